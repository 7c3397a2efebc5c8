#!/usr/bin/python3
"""loomc's default plan against every mesh, measured on CPU ranks.

For each N of --ranks, measures the machine once with `mpirun -np N loom-run --profile`
(one thread a rank unless --threads), then, for each model of the e2e tests
(test/models/hf_models.py: gpt2, bert, llama, resnet18 at their test sizes, global
batch 8, AdamW), compiles with `loomc --cluster cpu:N --calibration`:

  - the default plan (no --force: loomc's joint search chooses the mesh and the rest);
  - every mesh dp x tp x pp with dp*tp*pp = N, forced (`--force dp=A,tp=B,pp=C`);
    a mesh loomc cannot compile for the model is listed with loomc's error.

Every compiled plan is trained with `mpirun -np N loom-run` for --steps steps (the
first --warmup not counted) in each of --rounds rounds, every plan once a round in the
same order. Prints, per model and N, each plan's predicted step (calibrated), the
median over the rounds of each round's median step time (rank 0) and their ratio,
then the default's measured step over the fastest forced mesh's (<= 1.15 is a good
choice), plus a JSON line with the figures.

  bench/plan_choice.py --loom-bin build/bin [--ranks 2,4] [--rounds 3] [--steps 8]
                       [--models gpt2,bert,llama,resnet18]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "models"))
import _venv  # noqa: E402

_venv.require(["transformers", "torch", "torchvision"], "plan_choice.py")
import calibration  # noqa: E402  (env, mpirun, measured: the same runs as calibration.py)
import hf_models  # noqa: E402

GOOD = 1.15  # the default's measured step over the fastest mesh's, at most


def meshes(n):
    """Every (dp, tp, pp) with dp * tp * pp = n."""
    return [(n // (tp * pp), tp, pp) for tp in range(1, n + 1) for pp in range(1, n + 1)
            if n % (tp * pp) == 0]


def mesh_text(mesh):
    return "dp=%d tp=%d pp=%d" % (mesh["dp"], mesh["tp"], mesh["pp"])


def knobs_text(s):
    return "%dx%d %s zero=%d remat=%s" % (s["micro_batch"], s["num_micro_batches"],
                                          s["schedule"], s["zero_stage"], s["remat"])


def private_bin(loom_bin, work):
    """Copies of loomc and loom-run: a rebuild of --loom-bin cannot swap them mid-run."""
    out = os.path.join(work, "bin")
    os.makedirs(out)
    for name in ("loomc", "loom-run"):
        shutil.copy2(os.path.join(loom_bin, name), out)
    return out


def profile(nargs, work):
    path = os.path.join(work, "cal-%d.json" % nargs.ranks)
    subprocess.run(calibration.mpirun(nargs) + [os.path.join(nargs.loom_bin, "loom-run"),
                                                "--profile", path],
                   check=True, env=calibration.env(nargs), stdin=subprocess.DEVNULL)
    return path


def compile_plan(nargs, model, cal, force, pdir):
    """(summary, plan path, None) or (None, None, loomc's error line)."""
    os.makedirs(pdir)
    summary = os.path.join(pdir, "summary.json")
    plan = os.path.join(pdir, "plan.loomplan")
    cmd = [os.path.join(nargs.loom_bin, "loomc"), model, "--cluster", "cpu:%d" % nargs.ranks,
           "--calibration", cal, "--global-batch", "8", "--optimizer", "adamw",
           "--lr", "1e-4", "--summary-json", summary, "-o", plan, "--quiet"] + force
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        lines = (run.stderr + run.stdout).strip().splitlines() or ["exit %d" % run.returncode]
        return None, None, lines[-1].replace(os.path.dirname(os.path.dirname(model)) + "/", "")
    with open(summary) as f:
        return json.load(f), plan, None


def model_files(kind, work):
    mdir = os.path.join(work, kind)
    _, meta = hf_models.build(kind, mdir, batch=8)
    data = [(name, os.path.join(mdir, name + ".npy")) for name in (meta["input"], "target")]
    return os.path.join(mdir, "model.onnx"), data


def plans_of(nargs, kind, model, data, cal, work):
    """The default plan and every forced mesh of one model on N ranks."""
    out = []
    forced = [("dp=%d tp=%d pp=%d" % m, ["--force", "dp=%d,tp=%d,pp=%d" % m])
              for m in meshes(nargs.ranks)]
    for name, force in [("default", [])] + forced:
        pdir = os.path.join(work, "%s-%d-%s" % (kind, nargs.ranks, name.replace(" ", "-")))
        summary, plan, err = compile_plan(nargs, model, cal, force, pdir)
        p = {"model": kind, "ranks": nargs.ranks, "name": name, "default": not force,
             "error": err, "times_s": []}
        if summary:
            p.update(mesh=mesh_text(summary["mesh"]), knobs=knobs_text(summary),
                     predicted_s=summary["predicted"]["step_time_s"],
                     files=(nargs, plan, data, pdir))
            if summary.get("search"):
                p["search_s"] = summary["search"]["chosen"]["step_time_s"]
        out.append(p)
    return out


def train_round(plans, rnd):
    for p in plans:
        if "files" not in p or p["error"]:
            continue
        nargs, plan, data, pdir = p["files"]
        try:
            times = calibration.measured(nargs, plan, data, pdir, rnd)
        except subprocess.CalledProcessError as e:
            p["error"] = "loom-run failed (exit %d)" % e.returncode
            continue
        p["times_s"].append(statistics.median(times))


def report(group):
    """Print one model's table on N ranks; returns its figures."""
    default, forced = group[0], group[1:]
    print("\n%s on cpu:%d" % (default["model"], default["ranks"]))
    print("  %-22s %-30s %10s %10s %6s" % ("mesh", "micro-batches schedule ZeRO", "predicted",
                                           "measured", "ratio"))
    for p in group:
        if p["error"]:
            print("  %-22s does not %s: %s" % (p["name"], "run" if "files" in p else "compile",
                                               p["error"]))
            continue
        p["measured_s"] = statistics.median(p["times_s"])
        label = p["name"]
        if p["default"]:
            label = "default " + p["mesh"]
        print("  %-22s %-30s %8.2fms %8.2fms %6.2f" % (
            label, p["knobs"], 1e3 * p["predicted_s"], 1e3 * p["measured_s"],
            p["predicted_s"] / p["measured_s"]))
    ok = [p for p in forced if "measured_s" in p]
    row = {"model": default["model"], "ranks": default["ranks"],
           "plans": [{k: v for k, v in p.items() if k != "files"} for p in group]}
    if default.get("measured_s") is None or not ok:
        print("  no default plan or no forced mesh measured")
        return row
    if "search_s" in default:
        print("  the search's own estimate of its choice: %.2f ms" % (1e3 * default["search_s"]))
    same = [p for p in forced if p.get("mesh") == default["mesh"]]
    if same:
        print("  the default's mesh is the forced %s (%s)" % (
            same[0]["name"], "the same plan" if same[0].get("knobs") == default["knobs"]
            else "forced: " + str(same[0].get("knobs"))))
    fast = min(ok, key=lambda p: p["measured_s"])
    guess = min(ok, key=lambda p: p["predicted_s"])
    ratio = default["measured_s"] / fast["measured_s"]
    print("  predicted fastest mesh %s, measured fastest %s" % (guess["name"], fast["name"]))
    print("default measured %.2f ms, fastest measured %.2f ms (mesh %s): ratio %.2f, %s" % (
        1e3 * default["measured_s"], 1e3 * fast["measured_s"], fast["name"], ratio,
        "<= %.2f" % GOOD if ratio <= GOOD else "over %.2f" % GOOD))
    row.update(default_mesh=default["mesh"], fastest_mesh=fast["name"],
               predicted_fastest_mesh=guess["name"], ratio=ratio, within=ratio <= GOOD)
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--loom-bin", default="build/bin", help="folder with loomc and loom-run")
    p.add_argument("--ranks", default="2,4", help="comma-separated rank counts")
    p.add_argument("--threads", type=int, default=1, help="threads per rank")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--models", default=",".join(calibration.MODELS))
    p.add_argument("--mpirun", default=os.environ.get("LOOM_MPIEXEC", "mpirun"))
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="loom-plan-choice-")
    loom_bin = private_bin(args.loom_bin, work)
    ranks = [int(n) for n in args.ranks.split(",")]
    # One copy of the flags per N: calibration.py's helpers read args.ranks.
    per_n = {n: argparse.Namespace(**dict(vars(args), ranks=n, loom_bin=loom_bin))
             for n in ranks}
    cals = {n: profile(per_n[n], work) for n in ranks}
    groups = []
    for kind in args.models.split(","):
        model, data = model_files(kind, work)
        groups += [plans_of(per_n[n], kind, model, data, cals[n], work) for n in ranks]
    # Each round trains every plan once, in the same order: a slow spell of the
    # machine then hits one round of each plan, which the median leaves out.
    for rnd in range(args.rounds):
        train_round([p for g in groups for p in g], rnd)
    rows = [report(g) for g in groups]
    judged = [r for r in rows if "ratio" in r]
    print("\ndefaults within %.2fx of the fastest mesh: %d of %d" % (
        GOOD, sum(r["within"] for r in judged), len(judged)))
    calibrations = {}
    for n, path in cals.items():
        with open(path) as f:
            calibrations[str(n)] = json.load(f)
    print(json.dumps({"ranks": ranks, "threads": args.threads, "rounds": args.rounds,
                      "steps": args.steps, "warmup": args.warmup,
                      "calibrations": calibrations, "rows": rows}))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""The cost model against this machine: predicted and measured step times on CPU ranks.

Measures the machine once with `mpirun -np N loom-run --profile` (every rank busy at
once, one thread each unless --threads), then, for each model of the e2e tests
(test/models/hf_models.py: gpt2, bert, llama, resnet18 at their test sizes, global
batch 8) and each plan shape (dp=N, and dp=N/2 x tp=2), compiles it with
`loomc --cluster cpu:N` twice — with the datasheet stand-ins of the `cpu` preset and
with `--calibration` — and trains it with `mpirun -np N loom-run` for --steps steps
(the first --warmup not counted) in each of --rounds rounds, every plan once a round.
Prints, per model and plan, both predictions, the median over the rounds of each
round's median step time and the ratio predicted / measured with the calibration
(1.00 is exact), plus a JSON line with the figures.

  bench/calibration.py --loom-bin build/bin [--ranks 4] [--rounds 3] [--steps 8]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "models"))
import _venv  # noqa: E402

_venv.require(["transformers", "torch", "torchvision"], "calibration.py")
import hf_models  # noqa: E402

MODELS = ["gpt2", "bert", "llama", "resnet18"]


def env(args):
    n = str(args.threads)
    return dict(os.environ, LOOM_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n, OMP_NUM_THREADS=n)


def mpirun(args):
    return [args.mpirun, "-np", str(args.ranks), "--allow-run-as-root", "--oversubscribe",
            "--bind-to", "none"]


def predicted(args, model, force, calibration, work):
    summary = os.path.join(work, "summary.json")
    plan = os.path.join(work, "plan.loomplan")
    cmd = [os.path.join(args.loom_bin, "loomc"), model, "--cluster", "cpu:%d" % args.ranks,
           "--global-batch", "8", "--optimizer", "adamw", "--lr", "1e-4",
           "--summary-json", summary, "-o", plan, "--quiet"] + force
    if calibration:
        cmd += ["--calibration", calibration]
    subprocess.run(cmd, check=True)
    with open(summary) as f:
        return json.load(f)["predicted"]["step_time_s"], plan


def measured(args, plan, data, work, rnd):
    metrics = os.path.join(work, "metrics-%d.jsonl" % rnd)
    cmd = mpirun(args) + [os.path.join(args.loom_bin, "loom-run"), plan,
                          "--steps", str(args.steps), "--metrics", metrics, "--quiet"]
    for name, path in data:
        cmd += ["--data", "%s=%s" % (name, path)]
    subprocess.run(cmd, check=True, env=env(args), stdin=subprocess.DEVNULL)
    with open(metrics) as f:
        rows = [json.loads(line) for line in f][args.warmup:]
    return [r["step_time_s"] for r in rows]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--loom-bin", required=True, help="folder with loomc and loom-run")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--threads", type=int, default=1, help="threads per rank")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--mpirun", default=os.environ.get("LOOM_MPIEXEC", "mpirun"))
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="loom-calibration-")
    calibration = os.path.join(work, "calibration.json")
    subprocess.run(mpirun(args) + [os.path.join(args.loom_bin, "loom-run"), "--profile",
                                   calibration], check=True, env=env(args),
                   stdin=subprocess.DEVNULL)
    shapes = [("dp=%d" % args.ranks, []),
              ("dp=%d tp=2" % (args.ranks // 2), ["--force", "tp=2"])]
    print("%-9s %-11s %12s %12s %12s %7s" % ("model", "plan", "datasheet ms", "calibrated ms",
                                             "measured ms", "ratio"))
    # Every plan is compiled first, then each round trains every plan once:
    # a slow spell of the machine then hits one round of each plan, which
    # the median over the rounds leaves out, rather than all of one plan's.
    runs = []
    for kind in args.models.split(","):
        mdir = os.path.join(work, kind)
        _, meta = hf_models.build(kind, mdir, batch=8)
        model = os.path.join(mdir, "model.onnx")
        data = [(meta["input"], os.path.join(mdir, meta["input"] + ".npy")),
                ("target", os.path.join(mdir, "target.npy"))]
        for name, force in shapes:
            pdir = os.path.join(mdir, name.replace(" ", "-").replace("=", ""))
            os.makedirs(pdir)
            plain, _ = predicted(args, model, force, None, pdir)
            cal, plan = predicted(args, model, force, calibration, pdir)
            runs.append({"model": kind, "plan": name, "datasheet_s": plain,
                         "calibrated_s": cal, "files": (plan, data, pdir),
                         "times": []})
    for rnd in range(args.rounds):
        for run in runs:
            plan, data, pdir = run["files"]
            run["times"].append(statistics.median(measured(args, plan, data, pdir, rnd)))
    rows = []
    for run in runs:
        times, cal = run["times"], run["calibrated_s"]
        m = statistics.median(times)
        rows.append({"model": run["model"], "plan": run["plan"],
                     "datasheet_s": run["datasheet_s"], "calibrated_s": cal,
                     "measured_s": m, "ratio": cal / m,
                     "rounds_s": times})
        print("%-9s %-11s %12.1f %12.1f %12.1f %7.2f" % (run["model"], run["plan"],
                                                       run["datasheet_s"] * 1e3,
                                                       cal * 1e3, m * 1e3, cal / m))
    with open(calibration) as f:
        cal = json.load(f)
    within = sum(1 for r in rows if abs(r["ratio"] - 1) <= 0.25)
    print("calibrated predictions within 25%% of measured: %d of %d" % (within, len(rows)))
    print(json.dumps({"ranks": args.ranks, "threads": args.threads, "calibration": cal,
                      "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

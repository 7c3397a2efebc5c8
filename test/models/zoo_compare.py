#!/usr/bin/python3
"""Check Loom's runs of the model zoo against their references and print the table.

  zoo_compare.py --dir DIR [--known-failures FILE]

DIR is what `zoo.py build` and `zoo.py reference` wrote, with Loom's results next to
them (test/e2e/zoo.sh): for each command X it ran, X.rc (exit status) and X.log (its
output). Checks of each variant, in order (tolerances that vary by model are in its
zoo.json, set in zoo.py):
  import   `loomc --cluster cpu:1 ... -o p1.loomplan` succeeded
  params   s.json's num_parameters equals PyTorch's sum(p.numel() for p in
           module.parameters()) (unique parameters: tied ones once)
  train    5 AdamW steps on 1 rank (m1.jsonl): the losses within rtol 1e-4 of
           PyTorch training the module itself (ref.json)
  weights  the trained weights (trained.onnx): each float initializer's update within
           weights_rtol (1e-3) of PyTorch's in relative L2 (compare.py --initial
           model.onnx); the attention key biases (true gradient 0) must keep an update
           RMS under 1e-4; buffers (BatchNorm running statistics) are not compared
  dp2      2 ranks (`loomc --cluster cpu:2`, mpirun -np 2: m2.jsonl) against 1 rank,
           losses within dp2_rtol (1e-5)
  tp2      2 ranks as tensor parallelism (`loomc --cluster cpu:2 --force tp=2`:
           m-tp2.jsonl) against 1 rank, losses within dp2_rtol
  forward  `loom-run --forward` of the first batch against ONNX Runtime (ort/), within
           forward_tol (rtol 1e-4, atol 1e-4)
Every tolerance is checked against its measured sensitivity, as compare.py does: the
reference re-run on 1e-7-perturbed inputs (pert/) and on 2 threads (for dp2 and tp2
the reference is Loom's own 1-rank run). Above a tenth of the tolerance, or without a
measurement, the check is ILL-POSED and fails the run, whatever Loom did: the PyTorch
and ONNX Runtime sensitivities are measured even while Loom's side is blocked.

A check that needs an earlier one that failed is `blocked` by it (no plan: no
training). A check that zoo.py marks `unchecked` (its reference is ill-posed by
measurement) is computed and shown as UNCHECKED, and passes or fails nothing; one it
marks `unchecked_if_ill_posed` (well-posed on some machines only) is checked where its
measured sensitivity allows and UNCHECKED where not.
FILE (default zoo_known_failures.txt next to this script) lists the checks expected to
fail, one `MODEL EXPORT CHECK  # reason` a line: a listed check that fails is XFAIL; one
that passes is XPASS and fails the run ("now passes: remove it"), as do an unlisted
failure, a listed check that is blocked or unchecked (STALE: list the blocking check
only), and a line naming an unknown model, export or check. Lines for models not built
in DIR (zoo.py build --models) are ignored.

Prints one line per model x export x check: the verdict, the worst error as a share of
the tolerance, the largest sensitivity as a share of it, and what was measured or why
it failed (loomc's or loom-run's own error lines); then a summary. Exit 0 if nothing
failed unexpectedly, 1 otherwise, 2 on bad usage or an unreadable known-failures file.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
import compare_outputs  # noqa: E402
from ort_forward import output_file_name  # noqa: E402
from tolerance import WELL_POSED, fmt, usage  # noqa: E402

CHECKS = ("import", "params", "train", "weights", "dp2", "tp2", "forward")
EXPORTS = ("fold", "nofold")
DEFAULT_KNOWN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zoo_known_failures.txt")
# Tolerances; a model's forward and weights tolerances are in its zoo.json (zoo.py), and
# test/models/README.md ("The model zoo") quotes the sensitivities behind them all.
LOSS_RTOL = 1e-4
ZERO_GRADIENT_RMS = 1e-4


class Failed(Exception):
    """Loom's side of a check failed: a command, a file, or the comparison."""

    def __init__(self, detail, share=None):
        super().__init__(detail)
        self.detail, self.share = detail, share


def read_rc(d, step):
    try:
        with open(os.path.join(d, step + ".rc")) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def require_run(d, step, what=""):
    """Raise Failed with why command `step` failed (its error lines, prefixes dropped,
    else its last line, and its exit status) unless it succeeded."""
    rc = read_rc(d, step)
    if rc == 0:
        return
    try:
        with open(os.path.join(d, step + ".log"), errors="replace") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
    except OSError:
        lines = []
    errors = []
    for ln in lines:
        if "error:" in ln:
            msg = ln.split("error:", 1)[1].strip()
            if msg not in errors:
                errors.append(msg)
    text = "; ".join(errors) or (lines[-1] if lines else "no output")
    why = {None: "did not run", 124: "timed out", 137: "killed"}.get(rc, "exit %s" % rc)
    raise Failed("%s%s (%s)" % (what, text, why))


def loss_sensitivity(b_path, sens_paths, rtol):
    """[(tag, usage, where)] of re-runs of the reference loss list or metrics b."""
    b = compare.read_losses(b_path)
    steps = sorted(b)
    out = []
    for tag, path in sens_paths:
        s = compare.read_losses(path)
        compare.select_steps(s, b, 1, len(steps), path, b_path)
        out.append(compare.loss_sensitivity((tag, s, None), b, steps, rtol, 0.0))
    return out


def compare_losses(a_path, b_path, rtol):
    """(share, detail) of Loom's metrics a against the reference b; Failed if out of tolerance."""
    a, b = compare.read_metrics(a_path), compare.read_losses(b_path)
    steps = compare.select_steps(a, b, 1, None, a_path, b_path)
    u = compare.loss_usages(a, b, steps, rtol, 0.0)
    rel = compare.relative_error([a[s] for s in steps], [b[s] for s in steps], 0.0)
    worst = int(np.argmax(u))
    detail = "%d steps, worst rel err %s at step %d (%.8g vs %.8g)" % (
        len(steps), fmt(rel[worst]), steps[worst], a[steps[worst]], b[steps[worst]])
    if u.max() > 1:
        raise Failed(detail, float(u.max()))
    return float(u.max()), detail


def run_import(d, meta):
    require_run(d, "import")
    return None, ""


def run_params(d, meta):
    try:
        with open(os.path.join(d, "s.json")) as f:
            loom = int(json.load(f)["num_parameters"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise Failed("cannot read num_parameters from s.json: %s" % e)
    torch_n = meta["torch_parameters"]
    if loom != torch_n:
        raise Failed("Loom trains %d parameters, PyTorch %d (%+d)"
                     % (loom, torch_n, loom - torch_n))
    return None, "%d parameters" % loom


def train_sensitivity(d, meta):
    return loss_sensitivity(os.path.join(d, "ref.json"),
                            [("pert", os.path.join(d, "pert", "ref.json")),
                             ("threads2", os.path.join(d, "threads2.json"))], LOSS_RTOL)


def run_train(d, meta):
    require_run(d, "train")
    return compare_losses(os.path.join(d, "m1.jsonl"), os.path.join(d, "ref.json"), LOSS_RTOL)


def weight_setup(d, meta):
    """(loader of float initializers without buffers, reference weights, tolerance)."""
    skip = set(meta["initializers"]["buffers"])

    def load(name):
        weights = compare.read_weights(os.path.join(d, name))
        return {k: v for k, v in weights.items() if k not in skip}

    tol = compare.WeightTolerance(meta["weights_rtol"], 0.0, load("model.onnx"),
                                  compare.parse_zero_gradient(meta["zero_gradient"]),
                                  ZERO_GRADIENT_RMS)
    return load, load("ref.npz"), tol


def weights_sensitivity(d, meta):
    load, b, tol = weight_setup(d, meta)
    own = compare.weight_errors(b, b, tol)
    out = []
    # The perturbed run started from the perturbed weights: its update is what counts.
    for tag, path, start in (("pert", "pert/ref.npz", "pert/model.onnx"),
                             ("threads2", "threads2.npz", None)):
        sens = (path + ("@" + start if start else ""), load(path), load(start) if start else None)
        _, u, where = compare.weight_sensitivity(sens, b, tol, own)
        out.append((tag, u, where))
    return out


def run_weights(d, meta):
    load, b, tol = weight_setup(d, meta)
    a = load("trained.onnx")
    compare.match_weights(a, b, "trained.onnx", "ref.npz")
    errs = compare.weight_errors(a, b, tol)
    worst = max(errs, key=lambda n: errs[n][0])
    bad = [n for n in errs if errs[n][0] > 1]
    detail = "%d tensors, worst %s: %s %s" % (
        len(errs), worst, "update RMS" if worst.endswith(")") else "rel L2 err of the update",
        fmt(errs[worst][1]))
    if bad:
        raise Failed("%s; %d out of tolerance" % (detail, len(bad)), errs[worst][0])
    return errs[worst][0], detail


def dp2_sensitivity(d, meta):
    """Loom's own 1-rank run re-run on perturbed inputs and on 2 threads (None until it ran)."""
    if read_rc(d, "train") != 0:
        return None
    for step in ("train-pert", "train-threads2"):
        require_run(d, step, "the 1-rank sensitivity run %s failed: " % step)
    return loss_sensitivity(os.path.join(d, "m1.jsonl"),
                            [("pert", os.path.join(d, "pert", "m1.jsonl")),
                             ("threads2", os.path.join(d, "m1-threads2.jsonl"))], meta["dp2_rtol"])


def run_dp2(d, meta):
    require_run(d, "dp2-import")
    require_run(d, "dp2")
    return compare_losses(os.path.join(d, "m2.jsonl"), os.path.join(d, "m1.jsonl"),
                          meta["dp2_rtol"])


def run_tp2(d, meta):
    require_run(d, "tp2-import")
    require_run(d, "tp2")
    return compare_losses(os.path.join(d, "m-tp2.jsonl"), os.path.join(d, "m1.jsonl"),
                          meta["dp2_rtol"])


def forward_sensitivity(d, meta):
    rtol, atol = meta["forward_tol"]
    out = []
    for tag, sd in (("pert", "pert/ort"), ("threads2", "ort-threads2")):
        _, u, _ = compare_outputs.measure_sensitivity(os.path.join(d, "ort"), os.path.join(d, sd),
                                                      rtol, atol)
        out.append((tag, u, ""))
    return out


def run_forward(d, meta):
    require_run(d, "forward")
    rtol, atol = meta["forward_tol"]
    f = output_file_name(meta["output"])
    a = np.load(os.path.join(d, "loom-fwd", f), allow_pickle=False)
    b = np.load(os.path.join(d, "ort", f), allow_pickle=False)
    ok, msg = compare_outputs.compare_arrays(a, b, rtol, atol)
    share = float(usage(a, b, rtol, atol).max()) if a.shape == b.shape else None
    detail = "%s rtol %g atol %g: %s" % (meta["output"], rtol, atol, msg)
    if not ok:
        raise Failed(detail, share)
    return share, detail


# check: (what it needs to have passed, its comparison, the reference's sensitivity or
# None for an exact check). "train-run" is the 1-rank training run itself.
CHECK_TABLE = {
    "import": ((), run_import, None),
    "params": (("import",), run_params, None),
    "train": (("import",), run_train, train_sensitivity),
    "weights": (("import", "train-run"), run_weights, weights_sensitivity),
    "dp2": (("import", "train-run"), run_dp2, dp2_sensitivity),
    "tp2": (("import", "train-run"), run_tp2, dp2_sensitivity),
    "forward": ((), run_forward, forward_sensitivity),
}


class Outcome:
    """One check's result: status pass | fail | ill-posed | blocked, and its numbers."""

    def __init__(self, status, detail, share=None, sensitivity=None):
        self.status, self.detail, self.share, self.sensitivity = status, detail, share, sensitivity


def blocker(check, d, out):
    for need in CHECK_TABLE[check][0]:
        if need == "train-run":
            if read_rc(d, "train") != 0:
                return "train"
        elif out[need].status in ("fail", "blocked"):
            return need
    return None


def check_variant(d, meta):
    """{check: Outcome} of one variant. The reference's sensitivity is measured whether or
    not Loom's side ran: an ill-posed comparison is one whatever Loom does."""
    out = {}
    for check in CHECKS:
        _, run, sensitivity = CHECK_TABLE[check]
        measured, notes = [], []
        if sensitivity:
            try:
                measured = sensitivity(d, meta) or []
            except Failed as e:
                notes.append(e.detail)
            except (compare.InputError, OSError, ValueError, KeyError) as e:
                notes.append("ERROR sensitivity: %s" % e)
        sens = max((u for _, u, _ in measured), default=None)
        if measured:
            notes.append("sensitivity " + ", ".join(
                "%s %s%s" % (t, fmt(u), " (%s)" % w if w and u > 0 else "")
                for t, u, w in measured))
        status, share, detail = "pass", None, ""
        by = blocker(check, d, out)
        if by:
            status, detail = "blocked", "blocked by %s" % by
        else:
            try:
                share, detail = run(d, meta)
            except Failed as e:
                status, share, detail = "fail", e.share, e.detail
            except (compare.InputError, OSError, ValueError, KeyError) as e:
                status, detail = "fail", "ERROR %s" % e
            if sensitivity and not measured:
                status = "fail"     # no measurement: the sensitivity run or file failed (notes)
        if sens is not None and sens > WELL_POSED:
            status = "ill-posed"
        out[check] = Outcome(status, "; ".join(x for x in [detail] + notes if x), share, sens)
    return out


def read_known(path, models):
    """{(model, export, check): reason}; raises ValueError on a bad line."""
    known = {}
    with open(path) as f:
        for no, line in enumerate(f, 1):
            body, _, reason = line.partition("#")
            fields = body.split()
            if not fields:
                continue
            if len(fields) != 3:
                raise ValueError("%s:%d: expected `MODEL EXPORT CHECK  # reason`" % (path, no))
            for what, value, allowed in zip(("model", "export", "check"), fields,
                                            (models, EXPORTS, CHECKS)):
                if value not in allowed:
                    raise ValueError("%s:%d: unknown %s %r" % (path, no, what, value))
            known[tuple(fields)] = reason.strip()
    return known


def share_text(x):
    return "-" if x is None else fmt(x)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", required=True, help="the zoo directory (zoo.py build --out)")
    p.add_argument("--known-failures", default=DEFAULT_KNOWN,
                   help="checks expected to fail (default %s)" % os.path.basename(DEFAULT_KNOWN))
    args = p.parse_args(argv)
    try:
        with open(os.path.join(args.dir, "zoo.json")) as f:
            index = json.load(f)
        known = read_known(args.known_failures, index["models"])
    except (OSError, ValueError, KeyError) as e:
        print("zoo_compare: error: %s" % e, file=sys.stderr)
        return 2

    rows, counts, bad = [], {}, []
    for name in index["variants"]:
        d = os.path.join(args.dir, name)
        with open(os.path.join(d, "zoo.json")) as f:
            meta = json.load(f)
        for check, o in check_variant(d, meta).items():
            key = (meta["model"], meta["export"], check)
            listed = key in known
            if check in meta["unchecked"]:
                verdict = "STALE" if listed else "UNCHECKED"
                o.detail = "%s%s; %s" % (meta["unchecked"][check],
                                         ": unlist it" if listed else "", o.detail)
            elif o.status == "blocked":
                verdict = "STALE" if listed else "blocked"
                if listed:
                    o.detail += ": list only that check"
            elif o.status == "ill-posed" and check in meta.get("unchecked_if_ill_posed", {}):
                verdict = "STALE" if listed else "UNCHECKED"
                o.detail = "%s; %s" % (meta["unchecked_if_ill_posed"][check], o.detail)
            elif o.status == "ill-posed":
                verdict = "ILL-POSED"
            elif o.status == "fail":
                verdict = "XFAIL" if listed else "FAIL"
            else:
                verdict = "XPASS" if listed else "PASS"
                if listed:
                    fixed = "now passes: remove it from %s" % os.path.basename(args.known_failures)
                    o.detail = "; ".join(x for x in (fixed, o.detail) if x)
            if verdict in ("FAIL", "XPASS", "STALE", "ILL-POSED"):
                bad.append("%s %s %s" % key)
            counts[verdict] = counts.get(verdict, 0) + 1
            rows.append((meta["model"], meta["export"], check, verdict, share_text(o.share),
                         share_text(o.sensitivity), o.detail))
    head = ("model", "export", "check", "verdict", "share", "sens", "detail")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(6)]
    for r in [head] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[6])
    print("zoo: %d checks: %s" % (len(rows), ", ".join(
        "%d %s" % (counts[v], v) for v in ("PASS", "XFAIL", "blocked", "UNCHECKED", "FAIL", "XPASS",
                                            "STALE", "ILL-POSED") if v in counts)))
    print("  share: the worst error as a share of the tolerance; sens: the reference's largest "
          "move under 1e-7 perturbation or 2 threads, as a share of it (limit %g)" % WELL_POSED)
    if bad:
        print("FAILED: %s" % ", ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

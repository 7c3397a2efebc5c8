#!/usr/bin/python3
"""Compare Loom training results with a reference (or with another Loom run).

Checks (give one or more; each prints one verdict line):
  losses : --metrics A.jsonl --reference-losses B.json
           Loom metrics JSONL ({"step":i,"loss":f,...}, step from 1) against a
           JSON list of losses (entry k = step k+1), e.g. from torch_train.py.
  runs   : --metrics A.jsonl --metrics2 C.jsonl
           two Loom runs, step by step (C is the reference side).
  weights: --onnx TRAINED.onnx --reference-weights W.npz   (or --weights A.npz)
           final weights, floating-point initializers matched by name; every
           name in W.npz must exist in the trained model with the same shape
           and vice versa.

Tolerance (numpy.allclose semantics, b = the reference side):
  an element passes iff |a - b| <= atol + rtol * |b|; NaN/Inf never pass.
The verdict also reports the worst relative error
  max |a - b| / max(|b|, atol)    (|b| alone when atol is 0)
and the step/tensor where it occurs.

Steps compared: by default every step of the reference side (losses: 1..len(B);
runs: the steps in C); --first-step S starts there instead of 1 (e.g. a metrics
file written after --resume), --steps K compares only K steps from S. Both
sides must have every compared step; when a JSONL file repeats a step the last
line wins. A null loss counts as NaN. Lines without "step"/"loss" (e.g. summary lines) are ignored.

Exit status: 0 all checks pass, 1 a mismatch, 2 missing/unreadable/short input.
"""
import argparse
import json
import math
import sys

import numpy as np


class InputError(Exception):
    pass


def read_metrics(path):
    """{step: loss} from a Loom metrics JSONL file (last line of a step wins)."""
    try:
        with open(path) as f:
            lines = f.readlines()
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e.strerror or e))
    steps = {}
    for no, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            raise InputError("%s:%d: not JSON" % (path, no))
        if not isinstance(obj, dict) or "step" not in obj or "loss" not in obj:
            continue
        try:
            loss = obj["loss"]
            steps[int(obj["step"])] = float("nan") if loss is None else float(loss)  # null = NaN
        except (TypeError, ValueError):
            raise InputError("%s:%d: bad step/loss" % (path, no))
    if not steps:
        raise InputError("%s: no {\"step\",\"loss\"} lines" % path)
    return steps


def read_reference_losses(path):
    """{step: loss} from a JSON list (entry k is step k+1)."""
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        raise InputError("cannot read %s: %s" % (path, e.strerror or e))
    except ValueError:
        raise InputError("%s: not JSON" % path)
    if not isinstance(data, list) or not data:
        raise InputError("%s: expected a non-empty JSON list of losses" % path)
    try:
        return {k + 1: float("nan") if v is None else float(v) for k, v in enumerate(data)}
    except (TypeError, ValueError):
        raise InputError("%s: non-numeric loss" % path)


def select_steps(a, b, first, count, a_name, b_name):
    """Steps to compare: S..S+K-1, or every step >= S on the reference side b."""
    if count is not None:
        wanted = list(range(first, first + count))
    else:
        wanted = sorted(s for s in b if s >= first)
        if not wanted:
            raise InputError("%s: no steps >= %d" % (b_name, first))
        extra = sorted(s for s in a if s >= first and s not in b)
        if extra:
            raise InputError("%s has step %d that %s lacks" % (a_name, extra[0], b_name))
    for side, name in ((a, a_name), (b, b_name)):
        miss = [s for s in wanted if s not in side]
        if miss:
            have = "%d..%d" % (min(side), max(side))
            raise InputError("%s lacks step %d (has %d steps, %s)" % (name, miss[0], len(side), have))
    return wanted


def rel_errors(a, b, atol):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    diff = np.abs(a - b)
    denom = np.maximum(np.abs(b), atol) if atol > 0 else np.abs(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(diff == 0, 0.0, diff / denom)
    rel = np.where(np.isfinite(a) & np.isfinite(b), rel, np.inf)
    return diff, rel


def passes(a, b, rtol, atol):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    ok = np.abs(a - b) <= atol + rtol * np.abs(b)
    return ok & np.isfinite(a) & np.isfinite(b)


def _fmt(x):
    return "inf" if not math.isfinite(x) else "%.3g" % x


def compare_losses(a, b, steps, rtol, atol, label):
    av = [a[s] for s in steps]
    bv = [b[s] for s in steps]
    ok = passes(av, bv, rtol, atol)
    diff, rel = rel_errors(av, bv, atol)
    worst = int(np.argmax(rel))
    bad = np.flatnonzero(~ok)
    verdict = "OK" if bad.size == 0 else "MISMATCH"
    msg = ("%s %s: %d steps (%d..%d), worst rel err %s at step %d (%.8g vs %.8g), rtol=%g atol=%g"
           % (verdict, label, len(steps), steps[0], steps[-1], _fmt(rel[worst]), steps[worst],
              av[worst], bv[worst], rtol, atol))
    if bad.size:
        msg += "; %d step(s) out of tolerance, first at step %d" % (bad.size, steps[int(bad[0])])
    print(msg)
    return bad.size == 0


def read_onnx_weights(path):
    try:
        import onnx
        from onnx import numpy_helper
        model = onnx.load(path)
    except Exception as e:  # noqa: BLE001
        raise InputError("cannot load %s: %s" % (path, str(e).splitlines()[0] if str(e) else type(e).__name__))
    out = {}
    for init in model.graph.initializer:
        arr = numpy_helper.to_array(init)
        if arr.dtype.kind == "f":
            out[init.name] = arr
    return out


def read_npz(path):
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as e:  # noqa: BLE001
        raise InputError("cannot read %s: %s" % (path, e))


def compare_weights(a, b, rtol, atol, a_name, b_name):
    only_b = sorted(set(b) - set(a))
    only_a = sorted(set(a) - set(b))
    if only_b:
        raise InputError("%s lacks weight %r (%d missing)" % (a_name, only_b[0], len(only_b)))
    if only_a:
        raise InputError("%s lacks weight %r (%d missing)" % (b_name, only_a[0], len(only_a)))
    if not b:
        raise InputError("%s: no floating-point weights" % b_name)
    worst = (-1.0, None, 0.0)
    bad = []
    for name in sorted(b):
        x, y = a[name], b[name]
        if x.shape != y.shape:
            raise InputError("weight %r: shape %s in %s vs %s in %s"
                             % (name, list(x.shape), a_name, list(y.shape), b_name))
        if y.size == 0:
            continue
        ok = passes(x, y, rtol, atol)
        diff, rel = rel_errors(x, y, atol)
        r = float(rel.max())
        if r > worst[0]:
            worst = (r, name, float(diff.max()))
        if not ok.all():
            bad.append(name)
    verdict = "OK" if not bad else "MISMATCH"
    n_el = sum(v.size for v in b.values())
    msg = ("%s weights: %d tensors (%d values), worst rel err %s in %r (max abs err %s there), rtol=%g atol=%g"
           % (verdict, len(b), n_el, _fmt(worst[0]), worst[1], _fmt(worst[2]), rtol, atol))
    if bad:
        msg += "; out of tolerance: %s" % ", ".join(bad[:5]) + (" ..." if len(bad) > 5 else "")
    print(msg)
    return not bad


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--metrics", help="Loom metrics JSONL (the side under test)")
    p.add_argument("--reference-losses", help="JSON list of reference losses (torch_train.py --losses-out)")
    p.add_argument("--metrics2", help="second Loom metrics JSONL (reference side)")
    p.add_argument("--onnx", help="trained ONNX model written by Loom")
    p.add_argument("--weights", help="weights npz under test (instead of --onnx)")
    p.add_argument("--reference-weights", help="reference weights npz (torch_train.py --weights-out)")
    p.add_argument("--rtol", type=float, required=True)
    p.add_argument("--atol", type=float, default=0.0, help="absolute tolerance and relative-error floor (default 0)")
    p.add_argument("--first-step", type=int, default=1, help="first step compared (default 1)")
    p.add_argument("--steps", type=int, default=None, help="number of steps compared (default: all)")
    args = p.parse_args(argv)

    checks = []
    if args.reference_losses or args.metrics2:
        if not args.metrics:
            p.error("--reference-losses/--metrics2 need --metrics")
        if args.reference_losses:
            checks.append("losses")
        if args.metrics2:
            checks.append("runs")
    elif args.metrics:
        p.error("--metrics needs --reference-losses or --metrics2")
    if args.reference_weights:
        if bool(args.onnx) == bool(args.weights):
            p.error("--reference-weights needs exactly one of --onnx, --weights")
        checks.append("weights")
    elif args.onnx or args.weights:
        p.error("--onnx/--weights need --reference-weights")
    if not checks:
        p.error("nothing to compare")
    if args.rtol < 0 or args.atol < 0 or (args.steps is not None and args.steps < 1):
        p.error("tolerances must be >= 0 and --steps >= 1")

    rc = 0
    for check in checks:
        try:
            if check == "losses":
                a = read_metrics(args.metrics)
                b = read_reference_losses(args.reference_losses)
                steps = select_steps(a, b, args.first_step, args.steps, args.metrics, args.reference_losses)
                ok = compare_losses(a, b, steps, args.rtol, args.atol, "losses vs reference")
            elif check == "runs":
                a = read_metrics(args.metrics)
                b = read_metrics(args.metrics2)
                steps = select_steps(a, b, args.first_step, args.steps, args.metrics, args.metrics2)
                ok = compare_losses(a, b, steps, args.rtol, args.atol, "losses run vs run")
            else:
                a_name = args.onnx or args.weights
                a = read_onnx_weights(args.onnx) if args.onnx else read_npz(args.weights)
                b = read_npz(args.reference_weights)
                ok = compare_weights(a, b, args.rtol, args.atol, a_name, args.reference_weights)
        except InputError as e:
            print("ERROR %s: %s" % (check, e))
            rc = 2
            continue
        if not ok:
            rc = max(rc, 1)
    return rc


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Compare Loom training results with a reference (or with another Loom run).

Checks (give one or more; each prints one verdict line):
  losses : --metrics A.jsonl --reference-losses B.json
           Loom metrics JSONL ({"step":i,"loss":f,...}, step from 1) against a
           JSON list of losses (entry k = step k+1), e.g. from torch_train.py.
  runs   : --metrics A.jsonl --metrics2 C.jsonl
           two Loom runs, step by step (C is the reference side).
  weights: --onnx TRAINED.onnx --reference-weights W.npz or W.onnx   (or --weights A.npz)
           final weights, floating-point initializers matched by name; every
           name in W.npz must exist in the trained model with the same shape
           and vice versa.

Tolerance (b = the reference side):
  losses, and weights without --initial: element-wise, numpy.allclose semantics:
    an element passes iff |a - b| <= atol + rtol * |b|; NaN/Inf never pass.
  weights with --initial W0 (.onnx or .npz, the weights before training): the
    update of each tensor, in L2: ||a - b|| <= rtol * ||b - W0|| + atol * sqrt(n).
    Use it after AdamW: AdamW divides each gradient by its own running RMS, so a
    weight whose gradient nearly cancels moves by +-lr on the sign of rounding
    noise, and an element-wise bound on such weights is ill-posed (the reference
    on 1e-7-perturbed inputs already breaks it); the L2 of the update is not.
The verdict reports the worst error (relative error for element-wise checks, the
relative L2 error of the update with --initial), where it occurs, and the share of
the tolerance it uses.

Well-posedness (test/models/tolerance.py): --sensitivity FILE, repeatable, is the
reference side run again on 1e-7-perturbed inputs (perturb.py) or another thread
count: a .json loss list or .jsonl metrics file for the loss checks, a .npz or
.onnx for the weight check (FILE@INITIAL: the re-run started from the weights in
INITIAL, e.g. the perturbed model; with --initial its update is what counts). Its
distance from the reference, in the same measure, is printed as a share of the
tolerance; above 0.1 the check fails as ILL-POSED.
A check with a non-zero tolerance needs at least one sensitivity measurement.

Steps compared: by default every step of the reference side (losses: 1..len(B);
runs: the steps in C); --first-step S starts there instead of 1 (e.g. a metrics
file written after --resume), --steps K compares only K steps from S. Both
sides must have every compared step; when a JSONL file repeats a step the last
line wins. A null loss counts as NaN. Lines without "step"/"loss" (e.g. summary lines) are ignored.

Exit status: 0 all checks pass, 1 a mismatch, 2 missing/unreadable/short input
or a non-zero tolerance without --sensitivity, 3 ill-posed (and no mismatch).
"""
import argparse
import fnmatch
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tolerance import fmt, relative_error, sensitivity_line, usage  # noqa: E402


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


def loss_usages(a, b, steps, rtol, atol):
    return usage([a[s] for s in steps], [b[s] for s in steps], rtol, atol)


def compare_losses(a, b, steps, rtol, atol, label):
    """(ok, message) for the losses of `steps`, a against the reference b."""
    av = np.array([a[s] for s in steps], dtype=np.float64)
    bv = np.array([b[s] for s in steps], dtype=np.float64)
    u = loss_usages(a, b, steps, rtol, atol)
    rel = relative_error(av, bv, atol)
    worst = int(np.argmax(rel))
    bad = np.flatnonzero(u > 1)
    verdict = "OK" if bad.size == 0 else "MISMATCH"
    msg = ("%s %s: %d steps (%d..%d), worst rel err %s at step %d (%.8g vs %.8g), rtol=%g atol=%g, "
           "%s of the tolerance"
           % (verdict, label, len(steps), steps[0], steps[-1], fmt(rel[worst]), steps[worst],
              av[worst], bv[worst], rtol, atol, fmt(float(u.max()))))
    if bad.size:
        msg += "; %d step(s) out of tolerance, first at step %d" % (bad.size, steps[int(bad[0])])
    return bad.size == 0, msg


def loss_sensitivity(sens, b, steps, rtol, atol):
    """(file, worst usage, where) of a re-run reference against the reference b."""
    u = loss_usages(sens[1], b, steps, rtol, atol)  # sens = (file, losses, None)
    return sens[0], float(u.max()), "step %d" % steps[int(np.argmax(u))]


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
    # A parameter an eval-mode export wrote as Identity of an equal initializer
    # (deduplicated) has that initializer's value, under its own name.
    for node in model.graph.node:
        if (node.op_type == "Identity" and len(node.input) == 1 and node.input[0] in out
                and node.output[0] not in out):
            out[node.output[0]] = out[node.input[0]]
    return out


def read_npz(path):
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as e:  # noqa: BLE001
        raise InputError("cannot read %s: %s" % (path, e))


def match_weights(a, b, a_name, b_name):
    only_b = sorted(set(b) - set(a))
    only_a = sorted(set(a) - set(b))
    if only_b:
        raise InputError("%s lacks weight %r (%d missing)" % (a_name, only_b[0], len(only_b)))
    if only_a:
        raise InputError("%s lacks weight %r (%d missing)" % (b_name, only_a[0], len(only_a)))
    if not b:
        raise InputError("%s: no floating-point weights" % b_name)
    for name in b:
        if a[name].shape != b[name].shape:
            raise InputError("weight %r: shape %s in %s vs %s in %s"
                             % (name, list(a[name].shape), a_name, list(b[name].shape), b_name))


class WeightTolerance:
    """How final weights are compared (see the module docstring)."""

    def __init__(self, rtol, atol, w0=None, zero=None, zero_rms=1e-4):
        self.rtol, self.atol, self.w0 = rtol, atol, w0
        self.zero = zero or []          # [(fnmatch pattern, start, end)] of flattened tensors
        self.zero_rms = zero_rms


def parse_zero_gradient(specs):
    """[(pattern, start, end)] from NAME or NAME[START:END] (a flattened element range;
    NAME may be an fnmatch pattern)."""
    out = []
    for spec in specs:
        name, start, end = spec, 0, None
        if spec.endswith("]") and "[" in spec:
            name, rng = spec[:-1].split("[", 1)
            try:
                lo, hi = rng.split(":")
                start, end = int(lo), int(hi)
            except ValueError:
                raise InputError("--zero-gradient %r: expected NAME[START:END]" % spec)
        out.append((name, start, end))
    return out


def zero_mask(name, shape, tol):
    """Boolean mask (flattened) of the elements of `name` with a zero true gradient."""
    n = int(np.prod(shape))
    mask = np.zeros(n, dtype=bool)
    for pattern, start, end in tol.zero:
        if not fnmatch.fnmatchcase(name, pattern):
            continue
        end = n if end is None else end
        if not 0 <= start < end <= n:
            raise InputError("--zero-gradient %s[%d:%d]: tensor has %d elements" % (name, start, end, n))
        mask[start:end] = True
    return mask


def weight_errors(a, b, tol):
    """{item: (usage, error, absolute error)}; an item is a non-empty tensor of b, or the
    zero-gradient part of one ("NAME[START:END]" entries, keyed "NAME (zero gradient)").

    Element-wise (no w0): usage is the largest |a-b| / (atol + rtol|b|), error the
    largest relative error. Update in L2 (w0 given): usage is ||a-b|| / (rtol ||b-w0||
    + atol sqrt(n)), error ||a-b|| / ||b-w0||. Zero-gradient part: usage is the RMS of
    a's update divided by zero_rms (b is not used: the true update is zero)."""
    out = {}
    for name in sorted(b):
        x, y = a[name].astype(np.float64).ravel(), b[name].astype(np.float64).ravel()
        if y.size == 0:
            continue
        if tol.w0 is None:
            u = float(usage(x, y, tol.rtol, tol.atol).max())
            diff = np.nan_to_num(np.abs(x - y), nan=np.inf)
            out[name] = (u, float(relative_error(x, y, tol.atol).max()), float(diff.max()))
            continue
        w = tol.w0[name].astype(np.float64).ravel()
        zero = zero_mask(name, y.shape, tol)
        if zero.any():
            rms = float(np.sqrt(np.mean((x[zero] - w[zero]) ** 2)))
            out[name + " (zero gradient)"] = (rms / tol.zero_rms if np.isfinite(rms) else math.inf,
                                              rms, rms)
        keep = ~zero
        if not keep.any():
            continue
        x, y, w = x[keep], y[keep], w[keep]
        err = float(np.linalg.norm(x - y)) if np.isfinite(x).all() else math.inf
        upd = float(np.linalg.norm(y - w))
        bound = tol.rtol * upd + tol.atol * math.sqrt(y.size)
        u = 0.0 if err == 0 else (err / bound if bound > 0 else math.inf)
        out[name] = (u, err / upd if upd > 0 else (0.0 if err == 0 else math.inf), err)
    return out


def compare_weights(a, b, tol):
    """(ok, message): the trained weights a against the reference b."""
    errs = weight_errors(a, b, tol)
    worst = max((n for n in errs if not n.endswith(")")), key=lambda n: errs[n][0], default=None)
    bad = [n for n in sorted(errs) if errs[n][0] > 1]
    n_el = sum(v.size for v in b.values())
    if tol.w0 is None:
        what, err, abs_err = "weights", "worst rel err", "max abs err"
    else:
        what, err, abs_err = "weight updates", "worst rel L2 err of the update", "L2 err"
    msg = "%s %s: %d tensors (%d values)" % ("OK" if not bad else "MISMATCH", what, len(b), n_el)
    if worst is not None:
        msg += (", %s %s in %r (%s %s there), rtol=%g atol=%g, %s of the tolerance"
                % (err, fmt(errs[worst][1]), worst, abs_err, fmt(errs[worst][2]), tol.rtol, tol.atol,
                   fmt(errs[worst][0])))
    zero = [n for n in errs if n.endswith(" (zero gradient)")]
    if zero:
        z = max(zero, key=lambda n: errs[n][0])
        msg += ("; %d zero-gradient part(s) stay put: largest update RMS %s in %r, bound %g"
                % (len(zero), fmt(errs[z][1]), z[:-len(" (zero gradient)")], tol.zero_rms))
    if bad:
        msg += "; out of tolerance: %s" % ", ".join(bad[:5]) + (" ..." if len(bad) > 5 else "")
    return not bad, msg


def weight_sensitivity(sens, b, tol, own):
    """(file, worst usage, where): a re-run reference against the reference b; for the
    zero-gradient parts, the larger drift of the re-run and of the reference itself
    (`own`: weight_errors(b, b, tol)).

    sens = (name, weights, initial weights of the re-run or None). With --initial the
    re-run's update is what is compared: a run on perturbed inputs starts from
    perturbed weights, and that start is no part of its update."""
    name, weights, start = sens
    match_weights(weights, b, name, "the reference")
    if tol.w0 is not None and start is not None:
        start = {k: v for k, v in start.items() if k in b}
        match_weights(start, b, name.split("@", 1)[1], "the reference")
        weights = {k: weights[k].astype(np.float64) - start[k] + tol.w0[k] for k in b}
    errs = weight_errors(weights, b, tol)
    for n in errs:
        if n.endswith(" (zero gradient)"):
            errs[n] = max(errs[n], own[n])
    worst = max(errs, key=lambda n: errs[n][0])
    return name, errs[worst][0], repr(worst)


def excluded(names, patterns):
    return {n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)}


def read_weights(path):
    return read_onnx_weights(path) if path.endswith(".onnx") else read_npz(path)


def read_sensitivity(spec, weights):
    """(spec, values, initial weights or None) from FILE or, for weights, FILE@INITIAL."""
    path, _, start = spec.partition("@")
    if not weights:
        if start:
            raise InputError("--sensitivity %s: @INITIAL applies to weights only" % spec)
        return spec, read_losses(path), None
    return spec, read_weights(path), read_weights(start) if start else None


def read_losses(path):
    return read_metrics(path) if path.endswith(".jsonl") else read_reference_losses(path)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--metrics", help="Loom metrics JSONL (the side under test)")
    p.add_argument("--reference-losses", help="JSON list of reference losses (torch_train.py --losses-out)")
    p.add_argument("--metrics2", help="second Loom metrics JSONL (reference side)")
    p.add_argument("--onnx", help="trained ONNX model written by Loom")
    p.add_argument("--weights", help="weights npz under test (instead of --onnx)")
    p.add_argument("--reference-weights",
                   help="reference weights: npz (torch_train.py --weights-out) or .onnx (another Loom run)")
    p.add_argument("--initial", help="weights before training (.onnx or .npz): compare updates in L2")
    p.add_argument("--zero-gradient", action="append", default=[], metavar="NAME[START:END]",
                   help="with --initial: a tensor (or a flattened range of one) whose true gradient "
                        "is zero; it must stay within --zero-gradient-rms of its initial value "
                        "and is left out of the update comparison (repeatable)")
    p.add_argument("--zero-gradient-rms", type=float, default=1e-4,
                   help="RMS bound of a zero-gradient part's update (default 1e-4)")
    p.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                   help="weights left out of the comparison (fnmatch pattern, repeatable; "
                        "the verdict counts them)")
    p.add_argument("--sensitivity", action="append", default=[], metavar="FILE[@INITIAL]",
                   help="the reference re-run on perturbed inputs or other threads (repeatable); "
                        "for weights, @INITIAL names the re-run's own starting weights")
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
    elif args.onnx or args.weights or args.initial or args.zero_gradient or args.exclude:
        p.error("--onnx/--weights/--initial/--zero-gradient/--exclude need --reference-weights")
    if args.zero_gradient and not args.initial:
        p.error("--zero-gradient needs --initial")
    if not checks:
        p.error("nothing to compare")
    if args.rtol < 0 or args.atol < 0 or (args.steps is not None and args.steps < 1):
        p.error("tolerances must be >= 0 and --steps >= 1")
    if "runs" in checks and "losses" in checks and args.sensitivity:
        p.error("--sensitivity applies to one loss reference: compare --reference-losses and "
                "--metrics2 in separate calls")

    errors = mismatches = ill_posed = 0
    for check in checks:
        try:
            weights = check == "weights"
            sens = [read_sensitivity(f, weights) for f in args.sensitivity
                    if weights == f.split("@", 1)[0].endswith((".npz", ".onnx"))]
            if not sens and (args.rtol > 0 or args.atol > 0):
                raise InputError("a non-zero tolerance needs --sensitivity (the reference re-run on "
                                 "perturbed inputs), or compare bit for bit with --rtol 0")
            if check in ("losses", "runs"):
                a = read_metrics(args.metrics)
                b_name = args.reference_losses if check == "losses" else args.metrics2
                b = read_reference_losses(b_name) if check == "losses" else read_metrics(b_name)
                steps = select_steps(a, b, args.first_step, args.steps, args.metrics, b_name)
                for f, s, _ in sens:
                    select_steps(s, b, args.first_step, len(steps), f, b_name)
                label = "losses vs reference" if check == "losses" else "losses run vs run"
                ok, msg = compare_losses(a, b, steps, args.rtol, args.atol, label)
                measured = [loss_sensitivity(s, b, steps, args.rtol, args.atol) for s in sens]
            else:
                a_name = args.onnx or args.weights
                a, b = read_weights(a_name), read_weights(args.reference_weights)
                drop = excluded(set(a) | set(b), args.exclude)
                a, b = ({k: v for k, v in d.items() if k not in drop} for d in (a, b))
                sens = [(f, {k: v for k, v in d.items() if k not in drop}, w) for f, d, w in sens]
                match_weights(a, b, a_name, args.reference_weights)
                w0 = read_weights(args.initial) if args.initial else None
                if w0 is not None:
                    w0 = {k: v for k, v in w0.items() if k in b}
                    match_weights(w0, b, args.initial, args.reference_weights)
                tol = WeightTolerance(args.rtol, args.atol, w0, parse_zero_gradient(args.zero_gradient),
                                      args.zero_gradient_rms)
                unknown = [z for z, _, _ in tol.zero if not excluded(b, [z])]
                if unknown:
                    raise InputError("--zero-gradient %r: no such weight" % unknown[0])
                label = "weights" if w0 is None else "weight updates"
                ok, msg = compare_weights(a, b, tol)
                if drop:
                    msg += "; %d excluded (%s)" % (len(drop), ", ".join(args.exclude))
                own = weight_errors(b, b, tol) if tol.zero else {}
                measured = [weight_sensitivity(s, b, tol, own) for s in sens]
        except InputError as e:
            print("ERROR %s: %s" % (check, e))
            errors += 1
            continue
        print(msg)
        mismatches += not ok
        if measured:
            posed, line = sensitivity_line(label, measured)
            print(line)
            ill_posed += not posed
    return 2 if errors else 1 if mismatches else 3 if ill_posed else 0


if __name__ == "__main__":
    sys.exit(main())

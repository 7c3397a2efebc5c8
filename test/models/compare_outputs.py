#!/usr/bin/python3
"""Compare two directories of forward outputs (.npy), e.g. loom-run --forward vs
ort_forward.py.

  compare_outputs.py --a DIR1 --b DIR2 [--rtol 1e-4] [--atol 1e-5] [--sensitivity DIR3 ...]

Every *.npy in either directory is matched by file name. One line per tensor:
  OK name [shape] dtype max_abs=... max_rel=...
  MISMATCH name: <why> (shapes differ, dtypes of different kinds, values: how many
           elements fail, the worst one and its index)
  MISSING name: only in DIR1 | only in DIR2 (or unreadable)
Floating point: an element passes iff |a - b| <= atol + rtol*|b| (b = DIR2 is the
reference side, numpy allclose semantics), or both are NaN, or both are the same
infinity; NaN positions must match. Integers and booleans must be equal. An int or
float array may be compared with any int or float array (e.g. loom's f32 against an f64
reference); bool only with bool.
--sensitivity DIR3 (repeatable): the reference re-run on inputs perturbed by 1e-7
relative (perturb.py) or on another thread count. Its largest distance from DIR2,
as a share of the tolerance (tolerance.py), is printed; above 0.1 the comparison is
ILL-POSED. A non-zero tolerance needs at least one such measurement.
Exit 0 = all OK, 1 = some MISMATCH, 2 = something MISSING (or no .npy at all, or a
directory does not exist, or no --sensitivity for a non-zero tolerance), 3 =
ILL-POSED (and no mismatch).
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tolerance import sensitivity_line, usage  # noqa: E402


def compare_arrays(a, b, rtol, atol):
    """(ok, message). b is the reference."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape != b.shape:
        return False, "shape %s vs %s" % (list(a.shape), list(b.shape))
    ka, kb = a.dtype.kind, b.dtype.kind
    if (ka == "b") != (kb == "b") or ka not in "biuf" or kb not in "biuf":
        return False, "dtype %s vs %s" % (a.dtype, b.dtype)
    if a.size == 0:
        return True, "empty"
    if ka == "b" or (ka in "iu" and kb in "iu"):
        bad = a != b
        if bad.any():
            i = np.unravel_index(int(np.argmax(bad)), a.shape)
            return False, "%d of %d elements differ; first at %s: %s vs %s" % (
                int(bad.sum()), a.size, list(i), a[i], b[i])
        return True, "exact"
    x = a.astype(np.float64)
    y = b.astype(np.float64)
    nan_x, nan_y = np.isnan(x), np.isnan(y)
    both_nan = nan_x & nan_y
    same_inf = np.isinf(x) & np.isinf(y) & (x == y)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(x - y)
        close = diff <= atol + rtol * np.abs(y)
    ok = close | both_nan | same_inf
    finite = np.isfinite(diff) & ~both_nan & ~same_inf
    max_abs = float(diff[finite].max()) if finite.any() else 0.0
    rel = np.where(finite, diff / np.maximum(np.abs(y), max(atol, 1e-30)), 0.0)
    max_rel = float(rel.max()) if rel.size else 0.0
    stats = "max_abs=%.3g max_rel=%.3g" % (max_abs, max_rel)
    if ok.all():
        return True, stats
    bad = ~ok
    n_nan = int((nan_x != nan_y).sum())
    # Worst failing element: NaN mismatches first, then the largest violation.
    with np.errstate(invalid="ignore", over="ignore"):
        excess = np.where(bad, np.nan_to_num(diff - (atol + rtol * np.abs(y)), nan=np.inf,
                                             posinf=np.inf), -np.inf)
    i = np.unravel_index(int(np.argmax(excess)), a.shape)
    why = "%d of %d elements outside tolerance" % (int(bad.sum()), a.size)
    if n_nan:
        why += " (%d NaN positions differ)" % n_nan
    return False, "%s; worst at %s: %r vs %r; %s" % (why, list(i), float(x[i]), float(y[i]), stats)


def list_npy(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".npy"))


def compare_dirs(dir_a, dir_b, rtol, atol, out=sys.stdout):
    """Print one verdict line per tensor; returns the exit code (0/1/2)."""
    for d in (dir_a, dir_b):
        if not os.path.isdir(d):
            print("MISSING %s: not a directory" % d, file=out)
            return 2
    fa, fb = set(list_npy(dir_a)), set(list_npy(dir_b))
    names = sorted(fa | fb)
    if not names:
        print("MISSING: no .npy files in %s or %s" % (dir_a, dir_b), file=out)
        return 2
    mismatch = missing = False
    for f in names:
        name = f[:-4]
        if f not in fa or f not in fb:
            print("MISSING %s: only in %s" % (name, dir_a if f in fa else dir_b), file=out)
            missing = True
            continue
        try:
            a = np.load(os.path.join(dir_a, f), allow_pickle=False)
            b = np.load(os.path.join(dir_b, f), allow_pickle=False)
        except Exception as e:  # noqa: BLE001
            print("MISSING %s: unreadable: %s" % (name, str(e).splitlines()[0]), file=out)
            missing = True
            continue
        ok, msg = compare_arrays(a, b, rtol, atol)
        if ok:
            print("OK %s %s %s %s" % (name, list(a.shape), a.dtype, msg), file=out)
        else:
            print("MISMATCH %s: %s" % (name, msg), file=out)
            mismatch = True
    return 2 if missing else (1 if mismatch else 0)


def measure_sensitivity(dir_b, dir_s, rtol, atol):
    """(DIR3, worst share of the tolerance, tensor) of a re-run reference DIR3 against DIR2."""
    worst, where = 0.0, ""
    for f in list_npy(dir_b):
        path = os.path.join(dir_s, f)
        if not os.path.exists(path):
            raise ValueError("%s lacks %s" % (dir_s, f))
        b = np.load(os.path.join(dir_b, f), allow_pickle=False)
        a = np.load(path, allow_pickle=False)
        if a.shape != b.shape:
            raise ValueError("%s: shape %s, reference %s" % (path, list(a.shape), list(b.shape)))
        if b.size == 0 or b.dtype.kind not in "f":
            continue
        both_nan = np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
        u = float(np.where(both_nan | (a == b), 0.0, usage(a, b, rtol, atol)).max())
        if u > worst:
            worst, where = u, f[:-4]
    return dir_s, worst, where


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True, help="first output directory")
    p.add_argument("--b", required=True, help="second (reference) output directory")
    p.add_argument("--rtol", type=float, default=1e-4, help="default 1e-4")
    p.add_argument("--atol", type=float, default=1e-5, help="default 1e-5")
    p.add_argument("--sensitivity", action="append", default=[], metavar="DIR3",
                   help="the reference re-run on perturbed inputs or other threads (repeatable)")
    args = p.parse_args(argv)
    if not args.sensitivity and (args.rtol > 0 or args.atol > 0):
        print("MISSING: a non-zero tolerance needs --sensitivity (the reference re-run on "
              "perturbed inputs), or compare exactly with --rtol 0 --atol 0")
        return 2
    rc = compare_dirs(args.a, args.b, args.rtol, args.atol)
    if rc == 2 or not args.sensitivity:
        return rc
    try:
        measured = [measure_sensitivity(args.b, d, args.rtol, args.atol) for d in args.sensitivity]
    except (OSError, ValueError) as e:
        print("MISSING sensitivity: %s" % e)
        return 2
    posed, line = sensitivity_line("outputs", measured)
    print(line)
    return rc if rc or posed else 3


if __name__ == "__main__":
    sys.exit(main())

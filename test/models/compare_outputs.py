#!/usr/bin/python3
"""Compare two directories of forward outputs (.npy), e.g. loom-run --forward vs
ort_forward.py.

  compare_outputs.py --a DIR1 --b DIR2 [--rtol 1e-4] [--atol 1e-5]

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
Exit 0 = all OK, 1 = some MISMATCH, 2 = something MISSING (or no .npy at all, or a
directory does not exist).
"""
import argparse
import os
import sys

import numpy as np


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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True, help="first output directory")
    p.add_argument("--b", required=True, help="second (reference) output directory")
    p.add_argument("--rtol", type=float, default=1e-4, help="default 1e-4")
    p.add_argument("--atol", type=float, default=1e-5, help="default 1e-5")
    args = p.parse_args(argv)
    return compare_dirs(args.a, args.b, args.rtol, args.atol)


if __name__ == "__main__":
    sys.exit(main())

"""Tolerances and their well-posedness, shared by compare.py and compare_outputs.py.

A comparison of a result a against a reference b passes iff every item's error is
within its bound (numpy allclose: |a - b| <= atol + rtol*|b|). The *usage* of an item
is error / bound: a comparison passes iff its largest usage is at most 1.

A comparison is *well-posed* when the reference itself, run again on inputs perturbed
by one rounding error (perturb.py, 1e-7 relative) or on another thread count, stays
within a tenth of the tolerance: usage(perturbed reference, reference) <= 0.1. Then a
mismatch is Loom's, not rounding amplified by the computation; otherwise the
comparison cannot tell a correct Loom from a wrong one and must fail as ILL-POSED
(test/models/README.md, "Well-posed comparisons").
"""
import numpy as np

# The reference's own sensitivity must stay at or below this share of the tolerance.
WELL_POSED = 0.1


def usage(a, b, rtol, atol):
    """Element-wise |a - b| / (atol + rtol*|b|): 0 where equal, inf where the bound is
    0 and they differ or where either side is not finite (NaN never passes)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.abs(a - b)
        bound = atol + rtol * np.abs(b)
        u = np.where(diff == 0, 0.0, diff / bound)
    return np.where(np.isfinite(a) & np.isfinite(b), np.nan_to_num(u, nan=np.inf), np.inf)


def relative_error(a, b, atol):
    """Element-wise |a - b| / max(|b|, atol) (|b| alone when atol is 0): 0 where
    equal, inf where either side is not finite."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.abs(a - b)
        rel = np.where(diff == 0, 0.0, diff / np.maximum(np.abs(b), atol))
    return np.where(np.isfinite(a) & np.isfinite(b), np.nan_to_num(rel, nan=np.inf), np.inf)


def fmt(x):
    return "inf" if not np.isfinite(x) else "%.3g" % x


def sensitivity_line(label, measured):
    """(well_posed, line) for measured = [(file, worst usage, where)].

    The line lists every measurement; a comparison without one is not well-posed
    unless its tolerance is zero (bit equality needs no sensitivity)."""
    worst = max(u for _, u, _ in measured)
    parts = ["%s: %s of the tolerance%s" % (f, fmt(u), " (%s)" % w if w and u > 0 else "")
             for f, u, w in measured]
    ok = worst <= WELL_POSED
    head = "  sensitivity" if ok else "ILL-POSED %s: the reference itself moves by" % label
    return ok, "%s %s; limit %g%s" % (
        head, "; ".join(parts), WELL_POSED,
        "" if ok else " — the tolerance cannot tell Loom from rounding; choose a better-"
                      "conditioned case (or a tolerance the measurement justifies)")

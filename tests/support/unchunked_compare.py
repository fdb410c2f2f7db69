"""compare_tensor as it was before chunking (whole-array float64 temporaries), kept as the oracle
the chunked version must equal exactly (tests/validate/test_chunked_compare.py)."""

from __future__ import annotations

import numpy as np

from hipdnn_trace.validate.compare import TOP, Element, TensorComparison, _integer_type
from hipdnn_trace.validate.poison import unwritten_mask
from hipdnn_trace.validate.stored import allowed_range


def compare_whole(
    actual: np.ndarray,
    expected: np.ndarray,
    *,
    atol: float,
    rtol: float,
    reference: np.ndarray | None = None,
    top: int = TOP,
    ignore: np.ndarray | None = None,
    dtype: str | None = None,
) -> TensorComparison:
    """Compare logical arrays; ``reference`` (float64 oracle) is only reported, not judged.

    ``ignore`` (boolean, the output's shape) marks elements the op leaves undefined, such
    as attention rows past a sequence's length: they are neither compared nor counted.
    ``dtype`` is the output's hipDNN type (default: ``actual``'s); for an integer type an
    element passes when it lies in :func:`allowed_range` of the expected value, and the
    reported expected value and errors are those of the nearest allowed integer.
    """
    if tuple(actual.shape) != tuple(expected.shape):
        return TensorComparison(int(np.prod(expected.shape)), 0, 0, 0, np.nan, np.nan, None, atol, rtol,
                                shape_problem=f"shape {list(actual.shape)} differs from expected "
                                f"{list(expected.shape)}")
    poisoned = unwritten_mask(actual)
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    ignored = 0
    if ignore is not None and ignore.any():
        keep = ~np.broadcast_to(ignore, a.shape)
        ignored = int(a.size - keep.sum())
        poisoned = poisoned & keep
        a = np.where(keep, a, 0.0)
        e = np.where(keep, e, 0.0)
    total = a.size - ignored
    finite_a = np.isfinite(a)
    nonfinite_mask = ~finite_a & ~poisoned      # NaN/Inf in an output always fails
    integer = _integer_type(actual, dtype)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if integer:
            low, high = allowed_range(e, integer, atol=atol, rtol=rtol)
            e = np.where(np.isnan(e), e, np.clip(a, low, np.maximum(low, high)))   # nearest allowed integer
            bound = np.zeros_like(e)
        else:
            bound = atol + rtol * np.abs(e)
        err = np.abs(a - e)
        bad_value = finite_a & ~(err <= bound)
        rel = np.where(np.abs(e) > 0, err / np.abs(e), np.where(err > 0, np.inf, 0.0))
    fail = bad_value | nonfinite_mask | poisoned
    both_finite = finite_a & np.isfinite(e)
    finite = int((both_finite if ignore is None or not ignore.any()
                  else both_finite & ~np.broadcast_to(ignore, a.shape)).sum())
    finite_err = np.where(both_finite, err, 0.0)
    finite_rel = np.where(finite_a & np.isfinite(rel), rel, 0.0)
    score = np.where(fail, np.where(finite_a & ~np.isnan(err), err / np.maximum(bound, 1e-300), np.inf), -1.0)
    worst_index = None
    worst: list[Element] = []
    if fail.any():
        order = np.argsort(-score.reshape(-1), kind="stable")[:top]
        for flat in order:
            if score.reshape(-1)[flat] < 0:
                break
            idx = tuple(int(i) for i in np.unravel_index(flat, a.shape))
            worst.append(Element(
                idx, float(a[idx]), float(e[idx]),
                None if reference is None else float(np.asarray(reference, dtype=np.float64)[idx]),
                float(err[idx]), float(rel[idx]), float(bound[idx]),
            ))
        worst_index = worst[0].index if worst else None
    return TensorComparison(
        total=total,
        mismatches=int(bad_value.sum()),
        nonfinite=int(nonfinite_mask.sum()),
        unwritten=int(poisoned.sum()),
        max_abs=(float(finite_err.max()) if finite else np.nan) if total else 0.0,
        max_rel=(float(finite_rel.max()) if finite else np.nan) if total else 0.0,
        worst_index=worst_index,
        atol=atol,
        rtol=rtol,
        worst=worst,
        ignored=ignored,
        integer=integer,
        finite=finite,
    )

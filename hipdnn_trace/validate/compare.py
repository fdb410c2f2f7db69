"""Element-wise comparison of one output tensor with a mismatch report a person can act on.

An element passes when ``|actual - expected| <= atol + rtol * |expected|`` (hipDNN's
``allClose``). Non-finite values in the actual output always fail, and so do
elements still holding the poison bytes a session writes into outputs before the
first execution: a kernel that never wrote them is a bug, not a rounding error.
Integer outputs are judged against the output type's conversion of the float64
reference instead (``validate/integers.py``): an element passes when it is an
integer that conversion can give.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hipdnn_trace.graph.dtypes import from_numpy, is_integer
from hipdnn_trace.validate.integers import allowed_range
from hipdnn_trace.validate.poison import unwritten_mask

TOP = 10


@dataclass(frozen=True)
class Element:
    index: tuple[int, ...]
    actual: float
    expected: float
    reference: float | None
    abs_err: float
    rel_err: float


@dataclass
class TensorComparison:
    total: int
    mismatches: int
    nonfinite: int
    unwritten: int
    max_abs: float
    max_rel: float
    worst_index: tuple[int, ...] | None
    atol: float
    rtol: float
    worst: list[Element] = field(default_factory=list)
    shape_problem: str | None = None
    ignored: int = 0          # elements outside the output's defined region (padded attention rows)
    integer: str | None = None   # the integer type the output was judged in (validate/integers.py)

    @property
    def passed(self) -> bool:
        return self.shape_problem is None and self.mismatches == 0 and self.nonfinite == 0 \
            and self.unwritten == 0

    def message(self) -> str:
        """One line: what failed and by how much."""
        if self.shape_problem:
            return self.shape_problem
        skipped = f"; {self.ignored} padded element(s) not compared" if self.ignored else ""
        if self.integer and self.passed:
            return (f"every element {_article(self.integer)} {self.integer} conversion of the reference (truncated or rounded to "
                    f"nearest, saturated; fractional values within atol {self.atol:g} rtol {self.rtol:g}){skipped}")
        if self.passed:
            return (f"max abs {self.max_abs:.3g}, max rel {self.max_rel:.3g} within atol {self.atol:g} "
                    f"rtol {self.rtol:g}{skipped}")
        parts = []
        if self.unwritten:
            parts.append(f"{self.unwritten} element(s) never written (still poisoned)")
        if self.nonfinite:
            parts.append(f"{self.nonfinite} NaN/Inf element(s)")
        if self.mismatches and self.integer:
            parts.append(f"{self.mismatches}/{self.total} elements that no {self.integer} conversion of the reference "
                         f"gives (atol {self.atol:g} rtol {self.rtol:g} on fractional values)")
        elif self.mismatches:
            parts.append(f"{self.mismatches}/{self.total} elements outside atol {self.atol:g} rtol {self.rtol:g}")
        worst = f"; worst at {list(self.worst_index)}" if self.worst_index is not None else ""
        return ", ".join(parts) + f" (max abs {self.max_abs:.3g}, max rel {self.max_rel:.3g}{worst}{skipped})"


def compare_tensor(
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
    finite_err = np.where(finite_a & np.isfinite(e), err, 0.0)
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
                float(err[idx]), float(rel[idx]),
            ))
        worst_index = worst[0].index if worst else None
    return TensorComparison(
        total=total,
        mismatches=int(bad_value.sum()),
        nonfinite=int(nonfinite_mask.sum()),
        unwritten=int(poisoned.sum()),
        max_abs=float(finite_err.max()) if total else 0.0,
        max_rel=float(finite_rel.max()) if total else 0.0,
        worst_index=worst_index,
        atol=atol,
        rtol=rtol,
        worst=worst,
        ignored=ignored,
        integer=integer,
    )


def _integer_type(actual: np.ndarray, dtype: str | None) -> str | None:
    """The integer type an output is judged in, or None for floating (and boolean) outputs."""
    if dtype is None:
        try:
            dtype = from_numpy(np.asarray(actual).dtype)
        except ValueError:
            return None
    return dtype if is_integer(dtype) else None


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"

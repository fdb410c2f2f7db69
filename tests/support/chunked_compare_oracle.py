"""compare_tensor as it was before the cache-sized, threaded host path and the device path (commit 2091ff9),
kept as the oracle they must equal field for field (tests/validate/test_fast_compare.py), with the report
semantics added beside that path on branch h-ux (commit 010f994, the same change as to compare.py there and
to unchunked_compare.py): each worst element's allowed error (the list's order is abs_err / allowed), the
count of finite elements the maxima cover, and NaN maxima when no compared element is finite.

Original docstring: element-wise comparison of one output tensor with a mismatch report a person can act on.

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

import ml_dtypes
import numpy as np

from hipdnn_trace.graph.dtypes import INTEGER_ROUNDINGS, from_numpy, is_integer, to_integer
from hipdnn_trace.validate.compare import Element, TensorComparison
from hipdnn_trace.validate.poison import unwritten_elements

TOP = 10
#: Elements judged at once. The comparison's float64 and boolean temporaries are those of one chunk
#: (at most ``CHUNK_BYTES_PER_ELEMENT`` per element: 96 MiB at 2^20 elements) whatever the output's size,
#: so validating holds one float64 copy of an output (the reference) plus this, never several copies.
CHUNK_ELEMENTS = 1 << 20
#: Peak temporaries per element of a chunk (float64 a, e, bound, err, rel, masked maxima, booleans;
#: an integer output's allowed range adds a few): measured 61 bytes for fp16, 94 for int8 outputs in
#: tests/validate/test_chunked_compare.py, which holds this bound.
CHUNK_BYTES_PER_ELEMENT = 96


def compare_chunked(
    actual: np.ndarray,
    expected: np.ndarray,
    *,
    atol: float,
    rtol: float,
    reference: np.ndarray | None = None,
    top: int = TOP,
    ignore: np.ndarray | None = None,
    dtype: str | None = None,
    chunk_elements: int = CHUNK_ELEMENTS,
) -> TensorComparison:
    """Compare logical arrays; ``reference`` (float64 oracle) is only reported, not judged.

    ``ignore`` (boolean, the output's shape) marks elements the op leaves undefined, such
    as attention rows past a sequence's length: they are neither compared nor counted.
    ``dtype`` is the output's hipDNN type (default: ``actual``'s); for an integer type an
    element passes when it lies in :func:`allowed_range` of the expected value, and the
    reported expected value and errors are those of the nearest allowed integer.

    The flattened output is judged ``chunk_elements`` at a time, so the float64 temporaries
    are those of one chunk (:data:`CHUNK_BYTES_PER_ELEMENT` each), whatever the output's size;
    ``worst`` is the global worst (per-chunk candidates merged), as if judged whole.
    """
    if tuple(actual.shape) != tuple(expected.shape):
        return TensorComparison(int(np.prod(expected.shape)), 0, 0, 0, np.nan, np.nan, None, atol, rtol,
                                shape_problem=f"shape {list(actual.shape)} differs from expected "
                                f"{list(expected.shape)}")
    shape = tuple(actual.shape)
    flat_actual = np.asarray(actual).reshape(-1)        # a view unless ``actual`` is not contiguous
    flat_expected = np.asarray(expected).reshape(-1)
    flat_ignore = None
    if ignore is not None and ignore.any():
        flat_ignore = np.broadcast_to(ignore, shape).reshape(-1)   # booleans: 1/8 of a float64 copy at most
    integer = _integer_type(actual, dtype)
    # integer outputs: all-ones is a legal value, so only a wholly poisoned tensor is unwritten
    whole = _wholly_poisoned(flat_actual, chunk_elements) if flat_actual.dtype.kind in "iub" else None
    step = max(1, int(chunk_elements))
    tally = _Tally(top)
    for start in range(0, flat_actual.size, step):
        stop = min(start + step, flat_actual.size)
        tally.add(_judge_chunk(
            flat_actual[start:stop], flat_expected[start:stop],
            None if flat_ignore is None else flat_ignore[start:stop],
            whole, integer, atol, rtol, top, start))
    total = flat_actual.size - tally.ignored
    worst = []
    for c in tally.worst():
        index = tuple(int(i) for i in np.unravel_index(c.flat, shape))
        worst.append(Element(index, c.actual, c.expected,
                             None if reference is None else float(np.asarray(reference)[index]),
                             c.abs_err, c.rel_err, c.allowed))
    measured = total and tally.finite   # no finite pair: no maximum (NaN), not 0
    return TensorComparison(
        total=total,
        mismatches=tally.mismatches,
        nonfinite=tally.nonfinite,
        unwritten=tally.unwritten,
        max_abs=float(np.max(tally.max_abs)) if measured else (np.nan if total else 0.0),
        max_rel=float(np.max(tally.max_rel)) if measured else (np.nan if total else 0.0),
        worst_index=worst[0].index if worst else None,
        atol=atol,
        rtol=rtol,
        worst=worst,
        ignored=tally.ignored,
        integer=integer,
        finite=tally.finite,
    )


@dataclass(frozen=True)
class _Candidate:
    """A failing element that may be among the worst: its flat index, score and values."""

    flat: int
    score: float
    actual: float
    expected: float
    abs_err: float
    rel_err: float
    allowed: float


@dataclass
class _ChunkResult:
    mismatches: int
    nonfinite: int
    unwritten: int
    ignored: int
    finite: int
    max_abs: float
    max_rel: float
    ranked: list[_Candidate]       # failing elements with a score, at most ``top``
    unranked: list[_Candidate]     # failing elements whose score is NaN, first ``top`` by index
    all_failed: bool


@dataclass
class _Tally:
    """Sums, maxima and worst-element candidates over the chunks of one output."""

    top: int
    mismatches: int = 0
    nonfinite: int = 0
    unwritten: int = 0
    ignored: int = 0
    finite: int = 0
    max_abs: list[float] = field(default_factory=list)
    max_rel: list[float] = field(default_factory=list)
    ranked: list[_Candidate] = field(default_factory=list)
    unranked: list[_Candidate] = field(default_factory=list)
    all_failed: bool = True

    def add(self, chunk: _ChunkResult) -> None:
        self.mismatches += chunk.mismatches
        self.nonfinite += chunk.nonfinite
        self.unwritten += chunk.unwritten
        self.ignored += chunk.ignored
        self.finite += chunk.finite
        self.max_abs.append(chunk.max_abs)     # np.max over these: a NaN propagates as over the whole
        self.max_rel.append(chunk.max_rel)
        self.ranked = _best(self.ranked + chunk.ranked, self.top)
        self.unranked = (self.unranked + chunk.unranked)[:self.top]
        self.all_failed = self.all_failed and chunk.all_failed

    def worst(self) -> list[_Candidate]:
        """Highest score first, ties by index; NaN scores rank below every passing element, so
        they are listed only when no element passed (the order one stable sort of -score gives)."""
        if self.all_failed:
            return (self.ranked + self.unranked)[:self.top]
        return self.ranked


def _best(candidates: list[_Candidate], top: int) -> list[_Candidate]:
    order = sorted(candidates, key=lambda c: (-c.score, c.flat))
    return order[:top]


def _judge_chunk(raw: np.ndarray, expected: np.ndarray, ignore: np.ndarray | None, whole: bool | None,
                 integer: str | None, atol: float, rtol: float, top: int, offset: int) -> _ChunkResult:
    """One chunk judged exactly as the whole output would be (the same element-wise formulas)."""
    poisoned = np.full(raw.shape, whole) if whole is not None else unwritten_elements(raw)
    a = raw.astype(np.float64)
    e = np.asarray(expected, dtype=np.float64)
    ignored = 0
    keep = None
    if ignore is not None:
        keep = ~ignore
        ignored = int(keep.size - np.count_nonzero(keep))
        poisoned &= keep
        a = np.where(keep, a, 0.0)
        e = np.where(keep, e, 0.0)
    finite_a = np.isfinite(a)
    nonfinite_mask = ~finite_a & ~poisoned      # NaN/Inf in an output always fails
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if integer:
            low, high = allowed_range(e, integer, atol=atol, rtol=rtol)
            e = np.where(np.isnan(e), e, np.clip(a, low, np.maximum(low, high)))   # nearest allowed integer
            del low, high
            bound = np.zeros_like(e)
        else:
            bound = atol + rtol * np.abs(e)
        err = np.abs(a - e)
        bad_value = finite_a & ~(err <= bound)
        rel = np.where(np.abs(e) > 0, err / np.abs(e), np.where(err > 0, np.inf, 0.0))
    fail = bad_value | nonfinite_mask | poisoned
    both_finite = finite_a & np.isfinite(e)
    finite = int(np.count_nonzero(both_finite if keep is None else both_finite & keep))
    max_abs = float(np.where(both_finite, err, 0.0).max()) if a.size else 0.0
    max_rel = float(np.where(finite_a & np.isfinite(rel), rel, 0.0).max()) if a.size else 0.0
    failing = np.flatnonzero(fail)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        scores = np.where(finite_a[failing] & ~np.isnan(err[failing]),
                          err[failing] / np.maximum(bound[failing], 1e-300), np.inf)
    nan = np.isnan(scores)

    def candidates(where: np.ndarray) -> list[_Candidate]:
        return [_Candidate(offset + int(i), float(s), float(a[i]), float(e[i]), float(err[i]), float(rel[i]),
                           float(bound[i])) for i, s in zip(failing[where], scores[where])]

    return _ChunkResult(
        mismatches=int(np.count_nonzero(bad_value)), nonfinite=int(np.count_nonzero(nonfinite_mask)),
        unwritten=int(np.count_nonzero(poisoned)), ignored=ignored, finite=finite, max_abs=max_abs, max_rel=max_rel,
        ranked=_best(candidates(_top_scores(scores, nan, top)), top),
        unranked=candidates(np.flatnonzero(nan)[:top]),
        all_failed=failing.size == a.size,
    )


def _top_scores(scores: np.ndarray, nan: np.ndarray, top: int) -> np.ndarray:
    """Positions of the ``top`` highest non-NaN scores (ties: lowest index), unordered; linear time."""
    ranked = np.flatnonzero(~nan)
    if top <= 0:
        return ranked[:0]
    if ranked.size <= top:
        return ranked
    keys = -scores[ranked]
    threshold = np.partition(keys, top - 1)[top - 1]
    above = ranked[keys < threshold]
    ties = ranked[keys == threshold][:top - above.size]
    return np.concatenate([above, ties])


def _wholly_poisoned(flat: np.ndarray, chunk_elements: int) -> bool:
    """Every element still the poison bytes, looked at one chunk at a time (stops at the first written)."""
    if flat.size == 0:
        return False
    step = max(1, int(chunk_elements))
    return all(unwritten_elements(flat[start:start + step]).all() for start in range(0, flat.size, step))


def _integer_type(actual: np.ndarray, dtype: str | None) -> str | None:
    """The type an output is judged in by its stored values (integers; since issue 25 boolean, fp4 and
    fp6 too), or None for outputs judged against the float64 reference itself."""
    if dtype is None:
        try:
            dtype = from_numpy(np.asarray(actual).dtype)
        except ValueError:
            return None
    return dtype if is_integer(dtype) or dtype in _BY_DEFINITION else None


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


#: boolean, fp4 and fp6 outputs judged by their stored values (validate/stored.py), restated by definition:
#: the conversions a value within tolerance of the reference can have (a boolean: non-zero is true)
_BY_DEFINITION = {"boolean": None, "fp4_e2m1": ml_dtypes.float4_e2m1fn, "fp6_e2m3": ml_dtypes.float6_e2m3fn,
                  "fp6_e3m2": ml_dtypes.float6_e3m2fn}


def _by_definition(e: np.ndarray, dtype: str, atol: float, rtol: float) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(invalid="ignore", over="ignore"):
        lo, hi = e - (atol + rtol * np.abs(e)), e + (atol + rtol * np.abs(e))
    if dtype == "boolean":
        can_be_false, can_be_true = (lo <= 0) & (0 <= hi), ~((lo == 0) & (hi == 0))
        return np.where(can_be_false, 0.0, 1.0), np.where(can_be_true, 1.0, 0.0)
    target = _BY_DEFINITION[dtype]
    return lo.astype(target).astype(np.float64), hi.astype(target).astype(np.float64)


# validate/integers.py's allowed_range as it was (to_integer per rounding), part of the oracle
def allowed_range(expected: np.ndarray, dtype: str, *, atol: float, rtol: float) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) float64 arrays: the integers ``dtype`` may hold for each expected value.

    NaN expected values give an empty range (low > high): no integer matches them.
    """
    e = np.asarray(expected, dtype=np.float64)
    nan = np.isnan(e)
    e = np.where(nan, 0.0, e)
    if dtype in _BY_DEFINITION:
        low, high = _by_definition(e, dtype, atol, rtol)
        return np.where(nan, np.inf, low), np.where(nan, -np.inf, high)
    with np.errstate(invalid="ignore", over="ignore"):
        slack = np.where(e == np.trunc(e), 0.0, atol + rtol * np.abs(e))
        low_value, high_value = e - slack, e + slack
    low = np.minimum.reduce([to_integer(low_value, dtype, r).astype(np.float64) for r in INTEGER_ROUNDINGS])
    high = np.maximum.reduce([to_integer(high_value, dtype, r).astype(np.float64) for r in INTEGER_ROUNDINGS])
    low = np.where(nan, np.inf, low)
    high = np.where(nan, -np.inf, high)
    return low, high

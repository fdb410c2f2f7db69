"""Element-wise comparison of one output tensor with a mismatch report a person can act on.

An element passes when ``|actual - expected| <= atol + rtol * |expected|`` (hipDNN's
``allClose``). Non-finite values in the actual output always fail, and so do
elements still holding the poison bytes a session writes into outputs before the
first execution: a kernel that never wrote them is a bug, not a rounding error.
Integer outputs are judged against the output type's conversion of the float64
reference instead (``validate/integers.py``): an element passes when it is an
integer that conversion can give.

Numpy outputs are judged here, on the host, in cache-sized chunks spread over the CPUs this
process may use; device arrays (torch on a GPU) in ``device_compare.py``, on their device. Both
merge per-chunk tallies in index order (``tally.py``), so the result is the same for any chunk
size, thread count or path.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import array_api_compat
import numpy as np

from hipdnn_trace.graph.dtypes import from_numpy
from hipdnn_trace.validate.poison import POISON_BYTE, unwritten_elements
from hipdnn_trace.validate.stored import allowed_range, judged_in_stored_type
from hipdnn_trace.validate.tally import (
    TOP,
    Candidate,
    ChunkResult,
    Element,
    Tally,
    TensorComparison,
    best,
    passing_chunk,
    shape_mismatch,
)

__all__ = ["TOP", "CHUNK_ELEMENTS", "CHUNK_BYTES_PER_ELEMENT", "HOST_CHUNK_ELEMENTS", "Element",
           "TensorComparison", "compare_tensor"]

#: Elements whose temporaries may be alive at once, over all threads. The comparison's float64 and boolean
#: temporaries are those of these elements (at most ``CHUNK_BYTES_PER_ELEMENT`` per element: 96 MiB)
#: whatever the output's size, so validating holds one float64 copy of an output (the reference) plus this,
#: never several copies (backends/reference/memory.py ``validation_memory_bytes`` counts it).
CHUNK_ELEMENTS = 1 << 20
#: Elements one host thread judges at once: its float64 buffers (four of 512 KiB) stay in a core's L2
#: cache, where fresh whole-output temporaries made each numpy pass a trip to memory and page faults.
HOST_CHUNK_ELEMENTS = 1 << 16
#: Threads at most: so many chunks in flight stay within ``CHUNK_ELEMENTS``.
MAX_THREADS = CHUNK_ELEMENTS // HOST_CHUNK_ELEMENTS
#: Peak temporaries per element in flight: a thread's float64 buffers and mask (33 bytes) and, when every
#: element fails, the ranking among them; or, for a chunk with NaN/Inf/poison (buffers released), the exact
#: judge's float64 a, e, bound, err, rel, masked maxima, booleans (an integer output's allowed range adds a
#: few). Measured with one thread and 2^20-element chunks: fp16 60 bytes (one NaN), 77 (every element
#: failing), int8 62; tests/validate/test_chunked_compare.py holds this bound.
CHUNK_BYTES_PER_ELEMENT = 96


def compare_tensor(
    actual: Any,
    expected: Any,
    *,
    atol: float,
    rtol: float,
    reference: Any = None,
    top: int = TOP,
    ignore: Any = None,
    dtype: str | None = None,
    chunk_elements: int | None = None,
    threads: int | None = None,
) -> TensorComparison:
    """Compare logical arrays; ``reference`` (float64 oracle) is only reported, not judged.

    ``ignore`` (boolean, the output's shape) marks elements the op leaves undefined, such
    as attention rows past a sequence's length: they are neither compared nor counted.
    ``dtype`` is the output's hipDNN type (default: ``actual``'s); for an integer, boolean, fp4
    or fp6 type an element passes when it lies in :func:`allowed_range` of the expected value
    (``stored.py``), and the reported expected value and errors are those of the nearest allowed one.

    A numpy ``actual`` is judged on the host ``chunk_elements`` (default
    :data:`HOST_CHUNK_ELEMENTS`) at a time by ``threads`` threads (default: the CPUs this
    process may use, at most :data:`MAX_THREADS`); any other Array API array (torch on a GPU)
    on its own device (``device_compare.py``), where only scalars and the worst elements come
    back. ``worst`` is the global worst (per-chunk candidates merged), as if judged whole.
    """
    if not isinstance(actual, (np.ndarray, np.generic)) and array_api_compat.is_array_api_obj(actual):
        from hipdnn_trace.validate.device_compare import compare_on_device

        return compare_on_device(actual, expected, atol=atol, rtol=rtol, reference=reference, top=top,
                                 ignore=ignore, dtype=dtype, chunk_elements=chunk_elements)
    if tuple(actual.shape) != tuple(expected.shape):
        return shape_mismatch(tuple(actual.shape), tuple(expected.shape), atol, rtol)
    shape = tuple(actual.shape)
    flat_actual = np.asarray(actual).reshape(-1)        # a view unless ``actual`` is not contiguous
    flat_expected = np.asarray(expected).reshape(-1)
    flat_ignore = None
    if ignore is not None and np.asarray(ignore).any():
        flat_ignore = np.broadcast_to(ignore, shape).reshape(-1)   # booleans: 1/8 of a float64 copy at most
    step = HOST_CHUNK_ELEMENTS if chunk_elements is None else max(1, int(chunk_elements))
    integer = _integer_type(actual, dtype)
    # integer outputs: all-ones is a legal value, so only a wholly poisoned tensor is unwritten
    whole = _wholly_poisoned(flat_actual, step) if flat_actual.dtype.kind in "iub" else None
    judge = _HostJudge(flat_actual, flat_expected, flat_ignore, whole, integer, float(atol), float(rtol), top, step)
    tally = Tally(top)
    for chunk in _judge_all(judge, threads):
        tally.add(chunk)
    return tally.comparison(shape, flat_actual.size, atol, rtol, reference, integer)


class _Buffers:
    """One thread's float64 and boolean scratch, made on first use and reused for every chunk it judges
    (ufunc ``out=``); released while the exact judge runs, so the two never hold memory at once."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.arrays: dict[str, np.ndarray] = {}

    def get(self, name: str, dtype: type = np.float64) -> np.ndarray:
        array = self.arrays.get(name)
        if array is None:
            array = self.arrays[name] = np.empty(self.n, dtype=dtype)
        return array

    def release(self) -> None:
        self.arrays.clear()


@dataclass
class _HostJudge:
    """The flattened output and its settings; judges chunk ``i`` with one thread's buffers."""

    actual: np.ndarray
    expected: np.ndarray
    ignore: np.ndarray | None
    whole: bool | None
    integer: str | None
    atol: float
    rtol: float
    top: int
    step: int
    poison_value: float | None = field(init=False)

    def __post_init__(self) -> None:
        self.poison_value = _poison_value(self.actual.dtype)

    @property
    def chunks(self) -> int:
        return -(-self.actual.size // self.step)

    @property
    def quick(self) -> bool:
        """Whether a chunk may be found passing without the exact judge: not for integer outputs
        (their allowed range is the bulk of the work) nor a wholly poisoned one."""
        return self.integer is None and not self.whole

    def buffers(self) -> _Buffers | None:
        return _Buffers(min(self.step, self.actual.size)) if self.quick else None

    def chunk(self, i: int, buffers: _Buffers | None) -> ChunkResult:
        start = i * self.step
        stop = min(start + self.step, self.actual.size)
        raw, expected = self.actual[start:stop], self.expected[start:stop]
        ignore = None if self.ignore is None else self.ignore[start:stop]
        quick = None if buffers is None else self._finite(raw, expected, ignore, buffers, start)
        if quick is not None:
            return quick
        if buffers is not None:
            buffers.release()
        return _judge_chunk(raw, expected, ignore, self.whole, self.integer, self.atol, self.rtol, self.top, start)

    def _finite(self, raw: np.ndarray, expected: np.ndarray, ignore: np.ndarray | None, buf: _Buffers,
                offset: int) -> ChunkResult | None:
        """The chunk's result when every error is finite, else None (then :func:`_judge_chunk` decides).

        Same formulas as :func:`_judge_chunk`, into reused buffers. Every error finite means no NaN/Inf
        in a or e, so no element holds a NaN or Inf poison pattern; with no element equal to a finite
        poison value either, the only failures are values outside their bound, and every judged element
        is finite (the count the maxima cover costs nothing). A chunk where all pass (the common case)
        needs only the counts and the two maxima; the ranking is paid only for the elements that failed.
        """
        n = raw.size
        a, err, abs_e, bound = (buf.get(name)[:n] for name in ("a", "err", "abs_e", "bound"))
        mask = buf.get("mask", bool)[:n]
        np.copyto(a, raw, casting="unsafe")
        ignored = 0 if ignore is None else int(np.count_nonzero(ignore))
        if ignored or self.expected.dtype != np.float64:
            e = buf.get("e")[:n]
            np.copyto(e, expected, casting="unsafe")
            if ignored:
                np.copyto(a, 0.0, where=ignore)
                np.copyto(e, 0.0, where=ignore)
        else:
            e = expected
        if self.poison_value is not None and np.equal(a, self.poison_value, out=mask).any():
            return None
        np.subtract(a, e, out=err)
        np.abs(err, out=err)
        max_abs = err.max()
        if not np.isfinite(max_abs):      # a NaN/Inf in a or e (an Inf expected value may pass)
            return None
        np.abs(e, out=abs_e)
        np.multiply(abs_e, self.rtol, out=bound)
        np.add(bound, self.atol, out=bound)
        failed = n - int(np.count_nonzero(np.less_equal(err, bound, out=mask)))
        ranked: list[Candidate] = []
        unranked: list[Candidate] = []
        if failed:
            failing = np.flatnonzero(np.logical_not(mask, out=mask))
            ranked, unranked = self._ranked(failing, offset, a, e, err, abs_e, bound)
        rel = np.divide(err, abs_e, out=a)        # ``a`` is no longer needed
        max_rel = rel.max()
        if not np.isfinite(max_rel):      # zeros in e: 0/0 and x/0, which count as 0 in the maximum
            max_rel = rel.max(where=np.isfinite(rel, out=mask), initial=0.0)
        finite = n - ignored          # ignored elements were zeroed on both sides: finite, but not judged
        if not failed:
            return passing_chunk(ignored, finite, float(max_abs), float(max_rel))
        return ChunkResult(failed, 0, 0, ignored, finite, float(max_abs), float(max_rel), ranked, unranked,
                           failed == n)

    def _ranked(self, failing: np.ndarray, offset: int, a: np.ndarray, e: np.ndarray, err: np.ndarray,
                abs_e: np.ndarray, bound: np.ndarray) -> tuple[list[Candidate], list[Candidate]]:
        """The chunk's best and NaN-scored candidates among ``failing`` (finite errors), with
        :func:`_judge_chunk`'s score formula on the failing elements and its relative-error formula on
        the few candidates only (element-wise formulas: the same bits on any subset)."""
        scores = bound[failing]
        np.maximum(scores, 1e-300, out=scores)
        np.divide(err[failing], scores, out=scores)
        nan = np.isnan(scores)

        def candidates(where: np.ndarray) -> list[Candidate]:
            index = failing[where]
            f_err, f_abs = err[index], abs_e[index]
            rel = np.where(f_abs > 0, f_err / f_abs, np.where(f_err > 0, np.inf, 0.0))
            return [Candidate(offset + int(i), float(s), float(a[i]), float(e[i]), float(x), float(r), float(b))
                    for i, s, x, r, b in zip(index, scores[where], f_err, rel, bound[index])]

        return best(candidates(_top_scores(scores, nan, self.top)), self.top), \
            candidates(np.flatnonzero(nan)[:self.top])


def _judge_all(judge: _HostJudge, threads: int | None) -> list[ChunkResult]:
    """Every chunk's result in index order; chunks are handed to the threads one at a time."""
    count = judge.chunks
    workers = min(count, _thread_count(threads))
    results: list[ChunkResult | None] = [None] * count
    order: Iterator[int] = iter(range(count))
    lock = threading.Lock()

    def work() -> None:
        buffers = judge.buffers()
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            while True:
                with lock:
                    i = next(order, None)
                if i is None:
                    return
                results[i] = judge.chunk(i, buffers)

    if workers <= 1:
        work()
    else:
        with ThreadPoolExecutor(workers, thread_name_prefix="compare") as pool:
            for future in [pool.submit(work) for _ in range(workers)]:
                future.result()
    return [r for r in results if r is not None]


def _thread_count(threads: int | None) -> int:
    if threads is not None:
        return max(1, min(int(threads), MAX_THREADS))
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:       # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_THREADS))


def _poison_value(dtype: np.dtype) -> float | None:
    """The value a poisoned element of a floating type reads as, when finite and not zero (the fnuz
    fp8 and the sub-byte types: -240, -6...), else None: a NaN or Inf pattern already fails the
    finite-error test, and integer types follow the whole-tensor rule."""
    if dtype.kind in "iub" or dtype.itemsize == 0:
        return None
    try:
        value = float(np.full(dtype.itemsize, POISON_BYTE, dtype=np.uint8).view(dtype).astype(np.float64)[0])
    except (TypeError, ValueError):
        return None
    return value if np.isfinite(value) and value != 0.0 else None


def _judge_chunk(raw: np.ndarray, expected: np.ndarray, ignore: np.ndarray | None, whole: bool | None,
                 integer: str | None, atol: float, rtol: float, top: int, offset: int) -> ChunkResult:
    """One chunk judged exactly as the whole output would be (the same element-wise formulas)."""
    poisoned = np.full(raw.shape, whole) if whole is not None else unwritten_elements(raw)
    a = raw.astype(np.float64)
    e = np.asarray(expected, dtype=np.float64)
    ignored = 0
    keep: np.ndarray | None = None
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
    finite = int(np.count_nonzero(both_finite if keep is None else both_finite & keep))   # what the maxima cover
    max_abs = float(np.where(both_finite, err, 0.0).max()) if a.size else 0.0
    max_rel = float(np.where(finite_a & np.isfinite(rel), rel, 0.0).max()) if a.size else 0.0
    failing = np.flatnonzero(fail)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        scores = np.where(finite_a[failing] & ~np.isnan(err[failing]),
                          err[failing] / np.maximum(bound[failing], 1e-300), np.inf)
    nan = np.isnan(scores)

    def candidates(where: np.ndarray) -> list[Candidate]:
        return [Candidate(offset + int(i), float(s), float(a[i]), float(e[i]), float(err[i]), float(rel[i]),
                          float(bound[i])) for i, s in zip(failing[where], scores[where])]

    return ChunkResult(
        mismatches=int(np.count_nonzero(bad_value)), nonfinite=int(np.count_nonzero(nonfinite_mask)),
        unwritten=int(np.count_nonzero(poisoned)), ignored=ignored, finite=finite, max_abs=max_abs, max_rel=max_rel,
        ranked=best(candidates(_top_scores(scores, nan, top)), top),
        unranked=candidates(np.flatnonzero(nan)[:top]),
        all_failed=failing.size == a.size,
    )


def _top_scores(scores: np.ndarray, nan: np.ndarray, top: int) -> np.ndarray:
    """Positions of the ``top`` highest non-NaN scores (ties: lowest index), unordered; linear time.
    Without NaN scores (the usual case) the scores are ranked in place of a gathered copy."""
    ranked = np.flatnonzero(~nan) if nan.any() else None
    count = scores.size if ranked is None else ranked.size
    if top <= 0:
        return np.flatnonzero(nan[:0])
    if count <= top:
        return np.arange(count) if ranked is None else ranked
    keys = np.negative(scores) if ranked is None else np.negative(scores[ranked])
    threshold = np.partition(keys, top - 1)[top - 1]
    above = np.flatnonzero(keys < threshold)
    ties = np.flatnonzero(keys == threshold)[:top - above.size]
    positions = np.concatenate([above, ties])
    return positions if ranked is None else ranked[positions]


def _wholly_poisoned(flat: np.ndarray, chunk_elements: int) -> bool:
    """Every element still the poison bytes, looked at one chunk at a time (stops at the first written)."""
    if flat.size == 0 or not unwritten_elements(flat[:1]).all():
        return False
    step = max(1, int(chunk_elements))
    return all(unwritten_elements(flat[start:start + step]).all() for start in range(0, flat.size, step))


def _integer_type(actual: np.ndarray, dtype: str | None) -> str | None:
    """The type an output is judged in when judged in its stored values (integers, boolean, fp4, fp6:
    ``stored.py``), or None for outputs judged against the float64 reference itself."""
    if dtype is None:
        try:
            dtype = from_numpy(np.asarray(actual).dtype)
        except ValueError:
            return None
    return dtype if judged_in_stored_type(dtype) else None

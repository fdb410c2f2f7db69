"""compare_tensor for arrays on a device (torch on a GPU): judged there, only scalars and the worst come back.

An LLM-sized output on a GPU is gigabytes; copying it and its float64 reference to the host to
judge it costs the transfer and the host's time. Here the same element-wise formulas as the host
path (``compare._judge_chunk``) run in the arrays' own namespace through the Array API
(``array_api_compat``: torch on CUDA or ROCm, torch on the CPU in the tests, array-api-strict in
CI), chunk by chunk under a memory budget. Per chunk one small array of counts and maxima comes
back, and, only for a chunk with failing elements, the at most ``top`` best candidates of each
kind (the ranking, ties by lowest index and NaN-score rules are the host's). The chunks are merged
by ``tally.Tally`` like the host's, so the result is the host path's, field for field.

Two things the Array API lacks are asked of the namespace directly: the raw bits of an element
(the poison test: torch views them on the device; other namespaces on the host through DLPack,
where they live anyway) and the device's free memory (``torch.cuda.mem_get_info``). torch is never
imported here: ``array_api_compat`` finds the namespace of the arrays it is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import array_api_compat
import numpy as np

from hipdnn_trace.validate.poison import unwritten_elements
from hipdnn_trace.validate.stored import allowed_range, judged_in_stored_type
from hipdnn_trace.validate.tally import TOP, Candidate, ChunkResult, Tally, TensorComparison, best, shape_mismatch

#: Peak device temporaries per element of a chunk (float64 a, e, bound, err, |e|, rel and the masked
#: maxima, booleans; an integer output's allowed range adds a few): tests/validate/test_device_compare.py
#: measures them on torch's CPU allocator and holds this bound.
DEVICE_BYTES_PER_ELEMENT = 128
#: Share of the device's free memory one chunk's temporaries may take (the rest stays for the caller).
DEVICE_MEMORY_SHARE = 0.5
#: Elements per chunk at most on a GPU (128 Mi: 16 GiB of temporaries), and at least.
DEVICE_CHUNK_CAP = 1 << 27
DEVICE_CHUNK_FLOOR = 1 << 16
#: Elements per chunk for arrays in host memory (torch on the CPU, array-api-strict): the host path's
#: memory bound (``compare.CHUNK_ELEMENTS``), so backends/reference/memory.py's plan holds for them too.
HOST_MEMORY_CHUNK_ELEMENTS = 1 << 20

_INTEGER_NAMES = ("int8", "uint8", "int32", "int64")


def compare_on_device(actual: Any, expected: Any, *, atol: float, rtol: float, reference: Any = None,
                      top: int = TOP, ignore: Any = None, dtype: str | None = None,
                      chunk_elements: int | None = None) -> TensorComparison:
    """compare_tensor for an Array API ``actual`` not in numpy; ``expected`` and ``ignore`` may be
    in its namespace or numpy (then moved to its device a chunk at a time), ``reference`` either."""
    if tuple(actual.shape) != tuple(expected.shape):
        return shape_mismatch(tuple(actual.shape), tuple(expected.shape), atol, rtol)
    xp = array_api_compat.array_namespace(actual)
    shape = tuple(int(d) for d in actual.shape)
    flat = xp.reshape(actual, (-1,))
    size = int(flat.shape[0])
    judge = _DeviceJudge(xp, flat, _Source(xp, expected, shape, flat), _ignored(xp, ignore, shape, flat),
                         None, _integer_type(xp, actual, dtype), float(atol), float(rtol), top)
    step = _chunk_elements(actual, chunk_elements)
    if xp.isdtype(flat.dtype, ("integral", "bool")):
        # integer outputs: all-ones is a legal value, so only a wholly poisoned tensor is unwritten
        judge.whole = judge.wholly_poisoned(step)
    tally = Tally(top)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):    # numpy-backed namespaces warn as numpy
        for start in range(0, size, step):
            tally.add(judge.chunk(start, min(start + step, size)))
    return tally.comparison(shape, size, atol, rtol, reference, judge.integer)


def _chunk_elements(actual: Any, requested: int | None) -> int:
    """Elements per chunk: as asked, else what the budget allows on a GPU, else the host's bound."""
    if requested is not None:
        return max(1, int(requested))
    if array_api_compat.is_torch_array(actual) and actual.device.type == "cuda":
        import torch

        free, _ = torch.cuda.mem_get_info(actual.device)
        return budget_chunk_elements(free)
    return HOST_MEMORY_CHUNK_ELEMENTS


def budget_chunk_elements(free_bytes: int) -> int:
    """Elements per chunk whose temporaries take at most :data:`DEVICE_MEMORY_SHARE` of ``free_bytes``,
    within [:data:`DEVICE_CHUNK_FLOOR`, :data:`DEVICE_CHUNK_CAP`] (the floor keeps a nearly full device
    from judging in slivers; below it, the allocation fails as any other would)."""
    fits = int(free_bytes * DEVICE_MEMORY_SHARE) // DEVICE_BYTES_PER_ELEMENT
    return max(DEVICE_CHUNK_FLOOR, min(DEVICE_CHUNK_CAP, fits))


@dataclass
class _Source:
    """``expected`` flattened, handed out a chunk at a time in float64 on ``actual``'s device."""

    xp: Any
    values: Any
    device: Any

    def __init__(self, xp: Any, values: Any, shape: tuple[int, ...], like: Any) -> None:
        self.xp, self.device = xp, array_api_compat.device(like)
        self.values = np.asarray(values).reshape(-1) if _is_host(values) else xp.reshape(values, (-1,))

    def chunk(self, start: int, stop: int) -> Any:
        part = self.values[start:stop]
        if isinstance(part, np.ndarray):
            return self.xp.asarray(np.asarray(part, dtype=np.float64), device=self.device, copy=True)
        return self.xp.astype(part, self.xp.float64, copy=False)


def _is_host(values: Any) -> bool:
    return isinstance(values, (np.ndarray, np.generic)) or not array_api_compat.is_array_api_obj(values)


def _ignored(xp: Any, ignore: Any, shape: tuple[int, ...], like: Any) -> Any:
    """The flattened mask of elements not to judge, on the device, or None when nothing is masked."""
    if ignore is None:
        return None
    if _is_host(ignore):
        mask = np.asarray(ignore, dtype=bool)
        if not mask.any():
            return None
        flat = np.ascontiguousarray(np.broadcast_to(mask, shape)).reshape(-1)
        return xp.asarray(flat, device=array_api_compat.device(like), copy=True)
    if not bool(xp.any(ignore)):
        return None
    return xp.reshape(xp.broadcast_to(ignore, shape), (-1,))


def _integer_type(xp: Any, actual: Any, dtype: str | None) -> str | None:
    """The type an output is judged in when judged in its stored values (integers, boolean:
    ``stored.py``), or None for outputs judged against the float64 reference itself."""
    if dtype is None:
        dtype = next((name for name in _INTEGER_NAMES if actual.dtype == getattr(xp, name)), None)
        dtype = "boolean" if dtype is None and actual.dtype == xp.bool else dtype
    return dtype if judged_in_stored_type(dtype) else None


@dataclass
class _DeviceJudge:
    xp: Any
    actual: Any
    expected: _Source
    ignore: Any
    whole: bool | None
    integer: str | None
    atol: float
    rtol: float
    top: int

    def wholly_poisoned(self, step: int) -> bool:
        """Every element still the poison bytes, a chunk at a time (stops at the first written)."""
        size = int(self.actual.shape[0])
        return size > 0 and all(bool(self.xp.all(self.unwritten(self.actual[start:min(start + step, size)])))
                                for start in range(0, size, step))

    def unwritten(self, raw: Any) -> Any:
        """Elements whose bytes are all the poison byte (``poison.unwritten_elements`` on the device)."""
        xp = self.xp
        if array_api_compat.is_torch_array(raw):
            import torch

            bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[raw.element_size()]
            return raw.view(bits) == (255 if bits == torch.uint8 else -1)
        host = unwritten_elements(np.from_dlpack(raw))       # a host namespace: no copy to a device
        return xp.asarray(host, device=array_api_compat.device(raw))

    def as_float64(self, raw: Any) -> Any:
        xp = self.xp
        if array_api_compat.is_torch_array(raw) and raw.dtype == xp.bool:
            import torch

            raw = raw.view(torch.uint8) != 0      # a poisoned (0xFF) boolean reads as 1, as numpy's cast gives
        return xp.astype(raw, xp.float64)

    def chunk(self, start: int, stop: int) -> ChunkResult:
        """One chunk judged with the host's formulas (``compare._judge_chunk``), in float64."""
        xp = self.xp
        raw = self.actual[start:stop]
        n = stop - start
        a, e = self.as_float64(raw), self.expected.chunk(start, stop)
        poisoned = self.unwritten(raw) if self.whole is None else xp.full(n, self.whole, dtype=xp.bool,
                                                                         device=array_api_compat.device(a))
        ignored: Any = 0
        if self.ignore is not None:
            keep = ~self.ignore[start:stop]
            ignored = n - xp.count_nonzero(keep)
            poisoned = poisoned & keep
            a, e = xp.where(keep, a, 0.0), xp.where(keep, e, 0.0)
            del keep
        finite_a = xp.isfinite(a)
        nonfinite = ~(finite_a | poisoned)          # NaN/Inf in an output always fails
        e, bound, abs_e = self._expected_and_bound(a, e)
        err = xp.abs(a - e)
        bad_value = finite_a & ~(err <= bound)
        fail = bad_value | nonfinite | poisoned
        both_finite = finite_a & xp.isfinite(e)
        max_abs = xp.max(xp.where(both_finite, err, 0.0))
        # what the maxima cover; ignored elements (zeros on both sides, an integer output's nearest allowed
        # value of 0 is 0) are all counted here and taken off below, so no mask of them is kept alive
        finite = xp.count_nonzero(both_finite)
        del both_finite
        # the host's relative error is err / |e| where |e| > 0, else inf or 0, and its maximum skips the
        # non-finite: the plain ratio (inf or NaN where |e| is 0 or NaN) gives that maximum in one pass, and
        # the host's own formula is formed only for a chunk with failing elements (``_relative``)
        ratio = err / abs_e
        max_rel = xp.max(xp.where(finite_a & xp.isfinite(ratio), ratio, 0.0))
        del ratio
        counts = [xp.count_nonzero(m) for m in (bad_value, nonfinite, poisoned, fail)]
        del bad_value, nonfinite, poisoned
        scalars = _host(xp.stack([xp.astype(xp.asarray(v, device=array_api_compat.device(a)), xp.float64)
                                  for v in (*counts, ignored, finite, max_abs, max_rel)]))
        mismatches, nonfinite_n, unwritten_n, failing_n, ignored_n, finite_n = (int(v) for v in scalars[:6])
        ranked: list[Candidate] = []
        unranked: list[Candidate] = []
        if failing_n:
            ranked, unranked = self._candidates(fail, finite_a, a, e, err, bound, _relative(xp, err, abs_e), start)
        return ChunkResult(mismatches, nonfinite_n, unwritten_n, ignored_n, finite_n - ignored_n, float(scalars[6]),
                           float(scalars[7]), ranked, unranked, failing_n == n)

    def _expected_and_bound(self, a: Any, e: Any) -> tuple[Any, Any, Any]:
        """The value an element is judged against, its bound (``atol + rtol*|e|``, or for an integer output
        the nearest allowed integer and 0) and the value's magnitude."""
        xp = self.xp
        if not self.integer:
            abs_e = xp.abs(e)
            return e, self.atol + self.rtol * abs_e, abs_e
        low, high = allowed_range(e, self.integer, atol=self.atol, rtol=self.rtol)
        high = xp.maximum(low, high)
        nearest = xp.minimum(xp.maximum(a, low), high)      # numpy's clip(a, low, max(low, high))
        del low, high
        e = xp.where(xp.isnan(e), e, nearest)
        return e, xp.zeros_like(e), xp.abs(e)

    def _candidates(self, fail: Any, finite_a: Any, a: Any, e: Any, err: Any, bound: Any, rel: Any,
                    offset: int) -> tuple[list[Candidate], list[Candidate]]:
        """The chunk's best ``top`` failing elements with a score and its first ``top`` without one."""
        xp = self.xp
        failing = xp.nonzero(fail)[0]
        f_err = xp.take(err, failing)
        floor = xp.full_like(f_err, 1e-300)
        scored = xp.take(finite_a, failing) & ~xp.isnan(f_err)
        scores = xp.where(scored, f_err / xp.maximum(xp.take(bound, failing), floor), xp.full_like(f_err, np.inf))
        nan = xp.isnan(scores)
        columns = (a, e, err, rel, bound)      # Candidate's actual, expected, abs_err, rel_err, allowed

        def gather(positions: Any) -> list[Candidate]:
            if int(positions.shape[0]) == 0:
                return []
            index = xp.take(failing, positions)
            values = _host(xp.stack([xp.take(scores, positions)] + [xp.take(c, index) for c in columns]))
            flat = _host(index)
            return [Candidate(offset + int(flat[j]), *(float(v) for v in values[:, j])) for j in range(flat.shape[0])]

        return best(gather(self._top_scores(scores, nan)), self.top), gather(_head(xp.nonzero(nan)[0], self.top))

    def _top_scores(self, scores: Any, nan: Any) -> Any:
        """Positions of the ``top`` highest non-NaN scores (ties: lowest index), as ``compare._top_scores``."""
        xp = self.xp
        ranked = xp.nonzero(~nan)[0]
        top = self.top
        if top <= 0 or int(ranked.shape[0]) <= top:
            return _head(ranked, 0) if top <= 0 else ranked
        values = xp.take(scores, ranked)
        threshold = xp.sort(values, descending=True)[top - 1]
        above = ranked[values > threshold]
        ties = _head(ranked[values == threshold], top - int(above.shape[0]))
        return xp.concat([above, ties])


def _relative(xp: Any, err: Any, abs_e: Any) -> Any:
    """The host's relative error (``compare._judge_chunk``): err / |e| where |e| > 0, else inf where the
    error is positive and 0 where it is not."""
    return xp.where(abs_e > 0, err / abs_e, xp.where(err > 0, xp.full_like(err, np.inf), 0.0))


def _head(values: Any, stop: int) -> Any:
    """``values[:stop]`` as Python slices it (a stop past the end or negative), with the in-bounds stop
    the Array API requires."""
    return values[:slice(None, stop).indices(int(values.shape[0]))[1]]


def _host(values: Any) -> np.ndarray:
    """A small device array as numpy (the only transfers: a chunk's scalars and candidates)."""
    if array_api_compat.is_torch_array(values):
        return values.detach().cpu().numpy()
    return np.from_dlpack(values)

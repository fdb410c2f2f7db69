"""``np.matmul`` in bounded BLAS calls, so a signal is honoured within about a second.

Python runs signal handlers only between bytecodes: a 16k matmul in one BLAS call ignored
SIGTERM for minutes (then SIGKILL, and nothing was recorded). Splitting the product along its
batch dims, then its rows (M), then its columns (N) keeps every call under
:data:`CALL_FLOPS`; the reduction dim K is never split, so each output element is the same
K-term dot product as in one call. It is not promised to be the same bits: a BLAS may run another
micro-kernel on a tile at a split edge, so results agree within float64 rounding of that dot
product. Products under the bound are one call, exactly as before.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["CALL_FLOPS", "bounded_matmul"]

#: FLOPs of one BLAS call at most: about 0.2 s at 80 GFLOP/s float64, 1.7 s at 10 GFLOP/s
CALL_FLOPS = 1 << 34
#: split points are multiples of this (a multiple of every BLAS micro-tile), tiles at least this big
_ALIGN = 64
#: a last piece smaller than this joins the one before (a 1-row product would run as gemv, not gemm)
_MIN_TILE = 16


def bounded_matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None, *,
                   call_flops: int | None = None) -> np.ndarray:
    """``np.matmul(a, b, out=out)`` for ``a`` [..., M, K] and ``b`` [..., K, N] (batch dims
    broadcast as numpy does), in calls of at most ``call_flops`` (default :data:`CALL_FLOPS`) FLOPs
    each where the shape allows (a last range may hold up to 15 more rows or columns)."""
    call_flops = CALL_FLOPS if call_flops is None else call_flops
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim < 2 or b.ndim < 2:
        return np.matmul(a, b, out=out)
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if 2 * math.prod(batch) * m * k * n <= call_flops:
        return np.matmul(a, b, out=out)
    if out is None:
        out = np.empty(batch + (m, n), dtype=np.result_type(a, b))
    rank = len(batch) + 2
    a = a.reshape((1,) * (rank - a.ndim) + a.shape)
    b = b.reshape((1,) * (rank - b.ndim) + b.shape)
    _split(a, b, out, call_flops)
    return out


def _split(a: np.ndarray, b: np.ndarray, out: np.ndarray, call_flops: int) -> None:
    """Fill ``out`` (already of the broadcast shape) with a @ b; a and b have out's rank."""
    m, k = a.shape[-2:]
    n = b.shape[-1]
    flops = 2 * math.prod(out.shape[:-2]) * m * k * n
    if flops <= call_flops:
        np.matmul(a, b, out=out)
        return
    if out.ndim > 2:   # whole matrices per call where they fit, along the first batch dim
        per_index = flops // out.shape[0]
        step = call_flops // max(per_index, 1)
        if step < 1:   # one index is too big: drop the dim and split inside it
            for i in range(out.shape[0]):
                _split(a[0 if a.shape[0] == 1 else i], b[0 if b.shape[0] == 1 else i], out[i], call_flops)
            return
        for i0, i1 in _even(out.shape[0], step):
            np.matmul(a if a.shape[0] == 1 else a[i0:i1], b if b.shape[0] == 1 else b[i0:i1], out=out[i0:i1])
        return
    # near-square tiles: each call packs its A rows and B columns again, so thin strips of a big
    # product would spend as long copying as multiplying
    side = max(_ALIGN, math.isqrt(call_flops // max(2 * k, 1)) // _ALIGN * _ALIGN)
    cols = n if n <= side else side
    rows = call_flops // max(2 * k * cols, 1)
    for r0, r1 in _aligned(m, rows):
        for c0, c1 in ([(0, n)] if cols == n else _aligned(n, cols)):
            np.matmul(a[r0:r1], b[:, c0:c1], out=out[r0:r1, c0:c1])


def _even(size: int, step: int) -> list[tuple[int, int]]:
    """``size`` split into ceil(size / step) near-equal ranges (batch indices: any split is exact)."""
    count = max(1, -(-size // max(step, 1)))
    bounds = [size * i // count for i in range(count + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def _aligned(size: int, step: int) -> list[tuple[int, int]]:
    """Ranges of ``size`` rows or columns starting at multiples of :data:`_ALIGN`, so most BLAS
    tiles fall as in one call (on some BLAS builds the same bits, never promised: edge tiles may run
    another micro-kernel); a remainder too small for gemm joins the last range."""
    step = max(_ALIGN, step // _ALIGN * _ALIGN)
    starts = list(range(0, size, step))
    if len(starts) > 1 and size - starts[-1] < _MIN_TILE:
        starts.pop()
    return list(zip(starts, [*starts[1:], size]))

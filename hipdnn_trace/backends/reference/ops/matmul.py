"""Batched matrix multiply in float64, with hipDNN's batch broadcasting.

hipDNN's CPU reference (``CpuReferenceMatmul.hpp``) takes A [..., M, K] and
B [..., K, N] of equal rank and, per batch dim, lets the output be
``max(a_dim, b_dim)`` when one divides the other: output batch index ``i`` reads A at
``i // (out_dim // a_dim)`` (size-1 dims are the usual numpy broadcast; larger
divisors repeat each A batch for consecutive outputs, as grouped-query attention
needs). Lower-rank operands are left-padded with 1s here, like numpy.
"""

from __future__ import annotations

import numpy as np

from hipdnn_trace.backends.reference.ops._arrays import f64
from hipdnn_trace.backends.reference.xp import matmul as xp_matmul, namespace
from hipdnn_trace.errors import UnsupportedError

__all__ = ["matmul", "matmul_output_shape"]


def _batch_dims(a_shape: tuple[int, ...],
                b_shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Batch dims of A and B padded to one rank, and the output's batch dims."""
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise UnsupportedError(f"matmul needs operands of rank >= 2, got {a_shape} and {b_shape}")
    rank = max(len(a_shape), len(b_shape)) - 2
    a_b = (1,) * (rank - (len(a_shape) - 2)) + a_shape[:-2]
    b_b = (1,) * (rank - (len(b_shape) - 2)) + b_shape[:-2]
    out = []
    for i, (da, db) in enumerate(zip(a_b, b_b)):
        if da <= 0 or db <= 0 or (da % db != 0 and db % da != 0):
            raise UnsupportedError(f"matmul batch dim {i}: sizes {da} and {db} do not broadcast")
        out.append(max(da, db))
    return a_b, b_b, tuple(out)


def matmul_output_shape(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> tuple[int, ...]:
    """C's shape [..., M, N] for A [..., M, K] and B [..., K, N]."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    _, _, out = _batch_dims(a_shape, b_shape)
    if a_shape[-1] != b_shape[-2]:
        raise UnsupportedError(f"matmul: A is {a_shape}, B is {b_shape}; inner dims {a_shape[-1]} != {b_shape[-2]}")
    return out + (a_shape[-2], b_shape[-1])


def _expand(arr: np.ndarray, batch: tuple[int, ...], out_batch: tuple[int, ...]) -> np.ndarray:
    """Repeat batch entries where the output dim is a larger multiple (not 1) of ours."""
    xp = namespace(arr)
    arr = xp.reshape(arr, batch + tuple(arr.shape[-2:]))
    for axis, (d, o) in enumerate(zip(batch, out_batch)):
        if d != 1 and d != o:
            arr = xp.repeat(arr, o // d, axis=axis)
    return arr


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C = A @ B over the last two dims, float64 accumulate (BLAS, in bounded calls: signals are honoured)."""
    a64 = f64(a)
    b64 = f64(b)
    out_shape = matmul_output_shape(tuple(a64.shape), tuple(b64.shape))
    a_b, b_b, out_b = _batch_dims(tuple(a64.shape), tuple(b64.shape))
    xp = namespace(a64, b64)
    return xp.reshape(xp_matmul(xp, _expand(a64, a_b, out_b), _expand(b64, b_b, out_b)), out_shape)

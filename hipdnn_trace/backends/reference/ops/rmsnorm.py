"""RMS normalization (forward) in float64.

``y = x * inv_rms * scale (+ bias)``, ``inv_rms = 1/sqrt(mean(x^2) + eps)`` over the
normalized dims. Which dims are normalized follows hipDNN's newest CPU reference
(``CpuReferenceRMSNorm.hpp``): scale has x's rank, and the normalized dims are the
trailing run where scale's dims equal x's (all of them matching means dims 1..end).
``normalized_dim_count`` overrides that rule when the graph states it. Older hipDNN
references normalized per channel (over N and spatial, like batchnorm); that
variant is not implemented here.

inv_rms comes back shaped ``x.shape[:start] + (1,) * (rank - start)``.
"""

from __future__ import annotations

import numpy as np

from hipdnn_trace.backends.reference.ops._arrays import f64, reshape, shape_of, size, trailing
from hipdnn_trace.backends.reference.xp import namespace
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.norms import rmsnorm_start_axis

__all__ = ["rmsnorm", "rmsnorm_backward", "rmsnorm_start_axis"]


def rmsnorm(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray | None = None,
    *,
    epsilon: float,
    normalized_dim_count: int | None = None,
) -> dict[str, np.ndarray]:
    """Forward RMSNorm: y and inv_rms."""
    x = f64(x)
    xp = namespace(x)
    start = rmsnorm_start_axis(tuple(x.shape), shape_of(scale), normalized_dim_count)
    axes = tuple(range(start, x.ndim))
    if any(x.shape[a] == 0 for a in axes):
        raise UnsupportedError(f"rmsnorm: normalized dims {x.shape[start:]} include a zero")
    inv_rms = 1.0 / xp.sqrt(xp.mean(xp.square(x), axis=axes, keepdims=True) + float(epsilon))
    y = x * inv_rms * trailing(scale, x.shape, start, "rmsnorm scale")
    if bias is not None:
        y = y + trailing(bias, x.shape, start, "rmsnorm bias")
    return {"y": y, "inv_rms": inv_rms}


def rmsnorm_backward(
    dy: np.ndarray,
    x: np.ndarray,
    scale: np.ndarray,
    inv_rms: np.ndarray,
    *,
    start: int,
) -> dict[str, np.ndarray]:
    """Gradients of :func:`rmsnorm` with the saved inv_rms: dx, and dscale / dbias shaped
    like ``scale`` (summed over the batch axes ``0..start``).

    With ``r = inv_rms`` and ``g = dy * scale`` over the normalized axes (n elements):
    ``dx = r * g - x * r^3 * sum(g * x) / n``; ``dscale = sum_batch(dy * x * r)``;
    ``dbias = sum_batch(dy)``.
    """
    x, dy = f64(x), f64(dy)
    if dy.shape != x.shape:
        raise UnsupportedError(f"rmsnorm backward: dy shape {dy.shape} differs from x shape {x.shape}")
    if not 1 <= start < x.ndim:
        raise UnsupportedError(f"rmsnorm backward: first normalized axis {start} is outside x's rank {x.ndim}")
    axes = tuple(range(start, x.ndim))
    stat_shape = x.shape[:start] + (1,) * len(axes)
    r = f64(inv_rms)
    if size(r) != int(np.prod(stat_shape)):
        raise UnsupportedError(f"rmsnorm backward: inv_rms has {size(r)} values, expected one per batch position")
    r = reshape(r, stat_shape)
    scale_shape = shape_of(scale)
    s = trailing(scale, x.shape, start, "rmsnorm scale")
    g = dy * s
    n = int(np.prod(x.shape[start:]))
    xp = namespace(x)
    dx = r * g - x * r**3 * xp.sum(g * x, axis=axes, keepdims=True) / n
    batch_axes = tuple(range(start))
    dscale = reshape(xp.sum(dy * x * r, axis=batch_axes), scale_shape)
    dbias = reshape(xp.sum(dy, axis=batch_axes), scale_shape)
    return {"dx": dx, "dscale": dscale, "dbias": dbias}

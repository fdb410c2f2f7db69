"""Layer normalization (forward and backward) in float64.

Follows hipDNN's CPU reference (``CpuFpReferenceLayernorm.hpp``): statistics over the
trailing ``normalized_dim_count`` dims with the biased variance,
``inv_variance = 1/sqrt(var + eps)``, ``y = scale * (x - mean) * inv_variance + bias``
with scale and bias optional and shaped like the normalized dims (leading 1s
allowed, e.g. [1, 1, 4]). Saved mean / inv_variance come back shaped
``x.shape[:-k] + (1,) * k`` (hipDNN graphs use that padded form, e.g. [2, 3, 1]).
"""

from __future__ import annotations

import numpy as np

from hipdnn_trace.backends.reference.ops._arrays import f64, reshape, shape_of, size, trailing
from hipdnn_trace.backends.reference.xp import namespace
from hipdnn_trace.errors import UnsupportedError

__all__ = ["layernorm", "layernorm_backward"]


def _split(x: np.ndarray, normalized_dim_count: int, what: str) -> tuple[int, tuple[int, ...]]:
    """(first normalized axis, the normalized axes)."""
    k = int(normalized_dim_count)
    if not 1 <= k <= x.ndim:
        raise UnsupportedError(f"{what}: normalized_dim_count {k} must be between 1 and rank {x.ndim}")
    start = x.ndim - k
    if any(d == 0 for d in x.shape[start:]):
        raise UnsupportedError(f"{what}: normalized dims {x.shape[start:]} include a zero")
    return start, tuple(range(start, x.ndim))


def _stats(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    xp = namespace(x)
    mean = xp.mean(x, axis=axes, keepdims=True)
    var = xp.mean(xp.square(x - mean), axis=axes, keepdims=True)
    return mean, 1.0 / xp.sqrt(var + float(epsilon))


def layernorm(
    x: np.ndarray,
    scale: np.ndarray | None,
    bias: np.ndarray | None,
    *,
    epsilon: float,
    normalized_dim_count: int,
) -> dict[str, np.ndarray]:
    """Forward layernorm: y, mean, inv_variance."""
    x = f64(x)
    start, axes = _split(x, normalized_dim_count, "layernorm")
    mean, inv_var = _stats(x, axes, epsilon)
    y = (x - mean) * inv_var
    if scale is not None:
        y = y * trailing(scale, x.shape, start, "layernorm scale")
    if bias is not None:
        y = y + trailing(bias, x.shape, start, "layernorm bias")
    return {"y": y, "mean": mean, "inv_variance": inv_var}


def layernorm_backward(
    dy: np.ndarray,
    x: np.ndarray,
    scale: np.ndarray,
    *,
    normalized_dim_count: int,
    mean: np.ndarray | None = None,
    inv_variance: np.ndarray | None = None,
    epsilon: float | None = None,
) -> dict[str, np.ndarray]:
    """Gradients of :func:`layernorm`: dx, and dscale / dbias shaped like ``scale``.

    Saved mean / inv_variance may have any shape holding one value per batch position;
    without them they are recomputed from x with epsilon (as hipDNN's reference does).
    """
    x = f64(x)
    dy = f64(dy)
    if dy.shape != x.shape:
        raise UnsupportedError(f"layernorm backward: dy shape {dy.shape} differs from x shape {x.shape}")
    start, axes = _split(x, normalized_dim_count, "layernorm backward")
    scale_shape = shape_of(scale)
    s = trailing(scale, x.shape, start, "layernorm scale")
    if (mean is None) != (inv_variance is None):
        raise UnsupportedError("layernorm backward needs both mean and inv_variance, or neither")
    stat_shape = x.shape[:start] + (1,) * len(axes)
    if mean is None:
        if epsilon is None:
            raise UnsupportedError("layernorm backward without saved mean/inv_variance needs epsilon")
        m, iv = _stats(x, axes, epsilon)
    else:
        m, iv = f64(mean), f64(inv_variance)
        for name, arr in (("mean", m), ("inv_variance", iv)):
            if size(arr) != int(np.prod(stat_shape)):
                raise UnsupportedError(
                    f"layernorm backward: {name} has {arr.size} values, expected one per batch position"
                )
        m, iv = reshape(m, stat_shape), reshape(iv, stat_shape)
    xhat = (x - m) * iv
    g = dy * s
    count = int(np.prod(x.shape[start:]))
    xp = namespace(x)
    dx = iv * (g - xp.sum(g, axis=axes, keepdims=True) / count
               - xhat * (xp.sum(g * xhat, axis=axes, keepdims=True) / count))
    batch_axes = tuple(range(start))
    dscale = reshape(xp.sum(dy * xhat, axis=batch_axes), scale_shape)
    dbias = reshape(xp.sum(dy, axis=batch_axes), scale_shape)
    return {"dx": dx, "dscale": dscale, "dbias": dbias}

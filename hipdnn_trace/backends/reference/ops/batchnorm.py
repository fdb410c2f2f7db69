"""Batch normalization (inference, training forward, backward) in float64.

Per-channel statistics over every dim but 1 of an [N, C, spatial...] tensor, as in
hipDNN's CPU reference (``CpuFpReferenceBatchnorm.hpp``):

* training normalizes with the biased variance, ``inv_variance = 1/sqrt(var + eps)``;
* running stats: ``next = (1 - momentum) * prev + momentum * batch_stat``, where the
  variance fed in is the unbiased one ``var * n / (n - 1)`` (plain ``var`` when n == 1);
* backward: ``dbias = sum(dy)``, ``dscale = sum(dy * xhat)``,
  ``dx = scale * inv_variance * (dy - mean(dy) - xhat * mean(dy * xhat))``; when the
  saved mean / inv_variance are not given they are recomputed from x with epsilon.

Per-channel inputs may have any shape holding C values ([1, C, 1, 1] in hipDNN
graphs); per-channel outputs are returned as [1, C, 1, ...].
Statistics use two passes (mean, then mean of squared deviations): the oracle should
be more accurate than hipDNN's one-pass E[x^2] - E[x]^2, not equal to it.
"""

from __future__ import annotations

import numpy as np

from hipdnn_trace.backends.reference.ops._arrays import f64, per_channel, size
from hipdnn_trace.backends.reference.xp import namespace
from hipdnn_trace.errors import UnsupportedError

__all__ = ["batchnorm_inference", "batchnorm_train", "batchnorm_backward"]


def _check_x(x: np.ndarray, what: str) -> tuple[int, ...]:
    if x.ndim < 2:
        raise UnsupportedError(f"{what} needs x of rank >= 2 (N, C, ...), got shape {x.shape}")
    if size(x) == 0:
        raise UnsupportedError(f"{what} of an empty tensor {x.shape} has no statistics")
    return (0,) + tuple(range(2, x.ndim))


def _stats(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, biased variance, inv_variance), each [1, C, 1, ...]."""
    xp = namespace(x)
    mean = xp.mean(x, axis=axes, keepdims=True)
    var = xp.mean(xp.square(x - mean), axis=axes, keepdims=True)
    return mean, var, 1.0 / xp.sqrt(var + float(epsilon))


def batchnorm_inference(
    x: np.ndarray,
    mean: np.ndarray,
    inv_variance: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray,
) -> np.ndarray:
    """y = scale * (x - mean) * inv_variance + bias, per channel."""
    x = f64(x)
    _check_x(x, "batchnorm inference")
    c = x.shape[1]
    m = per_channel(mean, x.ndim, c, "batchnorm mean")
    iv = per_channel(inv_variance, x.ndim, c, "batchnorm inv_variance")
    s = per_channel(scale, x.ndim, c, "batchnorm scale")
    b = per_channel(bias, x.ndim, c, "batchnorm bias")
    return s * ((x - m) * iv) + b


def batchnorm_train(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray,
    *,
    epsilon: float,
    momentum: float | None = None,
    prev_running_mean: np.ndarray | None = None,
    prev_running_var: np.ndarray | None = None,
) -> dict[str, np.ndarray | None]:
    """Training forward: y and the batch statistics; running stats when momentum and
    both previous running stats are given (else ``None`` for those keys)."""
    x = f64(x)
    axes = _check_x(x, "batchnorm training")
    c = x.shape[1]
    s = per_channel(scale, x.ndim, c, "batchnorm scale")
    b = per_channel(bias, x.ndim, c, "batchnorm bias")
    mean, var, inv_var = _stats(x, axes, epsilon)
    y = s * ((x - mean) * inv_var) + b
    next_mean = next_var = None
    if momentum is not None and prev_running_mean is not None and prev_running_var is not None:
        m = float(momentum)
        count = size(x) // c
        unbiased = var if count == 1 else var * (count / (count - 1))
        prev_m = per_channel(prev_running_mean, x.ndim, c, "batchnorm prev_running_mean")
        prev_v = per_channel(prev_running_var, x.ndim, c, "batchnorm prev_running_var")
        next_mean = (1.0 - m) * prev_m + m * mean
        next_var = (1.0 - m) * prev_v + m * unbiased
    return {
        "y": y,
        "mean": mean,
        "inv_variance": inv_var,
        "next_running_mean": next_mean,
        "next_running_var": next_var,
    }


def batchnorm_backward(
    dy: np.ndarray,
    x: np.ndarray,
    scale: np.ndarray,
    *,
    mean: np.ndarray | None = None,
    inv_variance: np.ndarray | None = None,
    epsilon: float | None = None,
) -> dict[str, np.ndarray]:
    """Gradients of training-mode batchnorm: dx, dscale, dbias ([1, C, 1, ...])."""
    x = f64(x)
    dy = f64(dy)
    axes = _check_x(x, "batchnorm backward")
    if dy.shape != x.shape:
        raise UnsupportedError(f"batchnorm backward: dy shape {dy.shape} differs from x shape {x.shape}")
    c = x.shape[1]
    s = per_channel(scale, x.ndim, c, "batchnorm scale")
    if (mean is None) != (inv_variance is None):
        raise UnsupportedError("batchnorm backward needs both mean and inv_variance, or neither")
    if mean is None:
        if epsilon is None:
            raise UnsupportedError("batchnorm backward without saved mean/inv_variance needs epsilon")
        m, _, iv = _stats(x, axes, epsilon)
    else:
        m = per_channel(mean, x.ndim, c, "batchnorm mean")
        iv = per_channel(inv_variance, x.ndim, c, "batchnorm inv_variance")
    xhat = (x - m) * iv
    xp = namespace(x)
    dbias = xp.sum(dy, axis=axes, keepdims=True)
    dscale = xp.sum(dy * xhat, axis=axes, keepdims=True)
    count = size(x) // c
    dx = s * iv * (dy - dbias / count - xhat * (dscale / count))
    return {"dx": dx, "dscale": dscale, "dbias": dbias}

"""Block-scale quantize / dequantize, bit for bit as hipDNN's CPU reference.

``CpuFpReferenceBlockScaleQuantize.hpp``: per block, ``amax`` in the compute type, then
``scale = amax / max(y type)`` computed in double and **rounded up** to the scale type (so no
element saturates), then ``y = clamp(x / scale, lowest, max)`` in the compute type, stored
with round-to-nearest-even (integers: ``nearbyint``); a zero scale gives y = 0. NaN or Inf in
x is an error, as there. ``CpuFpReferenceBlockScaleDequantize.hpp``: ``y = x * scale`` (or
``x * 2^-scale``) in the compute type. Arrays are logical; element types use ml_dtypes.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.dtypes import DTYPES, numpy_dtype

__all__ = ["block_dequantize", "block_quantize", "round_up_to", "type_max"]

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def type_max(hipdnn_dtype: str) -> tuple[float, float]:
    """(lowest, max) finite values of a hipDNN element type."""
    target = numpy_dtype(hipdnn_dtype)
    info = ml_dtypes.finfo(target) if DTYPES[hipdnn_dtype].is_float else np.iinfo(target)
    return float(info.min), float(info.max)


def round_up_to(values: np.ndarray, hipdnn_dtype: str) -> np.ndarray:
    """Positive ``values`` rounded up to the nearest value of ``hipdnn_dtype`` (float64 result).

    hipDNN's ``quantizeRoundUp``: cast to nearest, one ulp up when that fell below, the type's
    max above it. e8m0 has no zero; a zero block's scale is its smallest value, 2^-127
    (hipDNN's conversion of 0 to e8m0 is not confirmed; y is 0 either way).
    """
    target = numpy_dtype(hipdnn_dtype)
    top = float(ml_dtypes.finfo(target).max)
    v = np.asarray(values, dtype=np.float64)
    if hipdnn_dtype == "fp8_e8m0":
        mantissa, exponent = np.frexp(np.maximum(v, 2.0 ** -127))   # v = m 2^e, m in [0.5, 1): exact
        exponent = exponent - (mantissa == 0.5)                     # a power of two is its own ceiling
        return np.exp2(np.clip(exponent, -127, 127).astype(np.float64))
    with np.errstate(over="ignore"):
        near = np.minimum(v, top).astype(np.float32).astype(target) if hipdnn_dtype != "float" else \
            np.minimum(v, top).astype(np.float32)
    below = near.astype(np.float64) < np.minimum(v, top)
    if below.any():
        bits = near.view(_UINT[near.itemsize]).copy()
        bits[below] += 1
        near = bits.view(near.dtype)
    return np.where(v > top, top, near.astype(np.float64))


def _compute(hipdnn_compute: str) -> type:
    return np.float64 if hipdnn_compute == "double" else np.float32


def block_quantize(x: np.ndarray, block_size: int, axis: int, y_dtype: str, scale_dtype: str,
                   compute: str = "float") -> tuple[np.ndarray, np.ndarray]:
    """(y, scale) as float64 arrays holding exactly the values hipDNN stores."""
    ct = _compute(compute)
    xc = np.asarray(x, dtype=np.float64).astype(ct)
    if not np.isfinite(xc).all():
        raise UnsupportedError("BlockScaleQuantize: x contains a NaN or Inf value (hipDNN's reference refuses it)")
    moved = np.moveaxis(xc, axis, -1)
    length = moved.shape[-1]
    blocks = -(-length // block_size)
    padded = np.zeros((*moved.shape[:-1], blocks * block_size), dtype=ct)
    padded[..., :length] = moved
    grouped = padded.reshape(*moved.shape[:-1], blocks, block_size)
    amax = np.abs(grouped).max(axis=-1)
    lowest, top = type_max(y_dtype)
    scale = round_up_to(amax.astype(np.float64) / top, scale_dtype)
    s = scale.astype(ct)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(s != 0, grouped / np.where(s != 0, s, 1), 0).astype(ct)
    y = np.clip(y, ct(lowest), ct(top))
    if not DTYPES[y_dtype].is_float:
        y = np.rint(y)   # nearbyint: round half to even
    y = y.reshape(*moved.shape[:-1], blocks * block_size)[..., :length]
    return np.moveaxis(y.astype(np.float64), -1, axis), np.moveaxis(scale, -1, axis)


def block_dequantize(x: np.ndarray, scale: np.ndarray, blocks: tuple[int, ...], *, negative: bool = False,
                     compute: str = "float") -> np.ndarray:
    """y = x * scale[block of each element] (or x * 2^-scale), in the compute type."""
    ct = _compute(compute)
    s = np.asarray(scale, dtype=np.float64).astype(ct)
    for axis, b in enumerate(blocks):
        if b > 1:
            s = np.repeat(s, b, axis=axis)
    s = s[tuple(slice(0, d) for d in np.shape(x))]
    xc = np.asarray(x, dtype=np.float64).astype(ct)
    factor = np.exp2(-s) if negative else s
    return (xc * factor).astype(np.float64)

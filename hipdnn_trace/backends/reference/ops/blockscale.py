"""Block-scale quantize / dequantize, bit for bit as hipDNN's CPU reference.

``CpuFpReferenceBlockScaleQuantize.hpp``: per block, ``amax`` in the compute type, then
``scale = amax / max(y type)`` computed in double and **rounded up** to the scale type (so no
element saturates), then ``y = clamp(x / scale, lowest, max)`` in the compute type, stored
with round-to-nearest-even (integers: ``nearbyint``); a zero scale gives y = 0. NaN or Inf in
x is an error, as there. ``CpuFpReferenceBlockScaleDequantize.hpp``: ``y = x * scale`` (or
``x * 2^-scale``) in the compute type. Arrays are logical; element types use ml_dtypes.

Namespace-generic: rounding a scale up is a search in the sorted values of its type (every type
but float has at most 2^16; float takes ``nextafter``), which gives the same values as hipDNN's
cast-then-bump-one-ulp rule without bit tricks; the elements' own rounding is
``rounding.stored_values``. Dequantize works in slabs of leading rows, so its compute-type
temporaries stay under :data:`SLAB_ELEMENTS` elements whatever the tensor's size.
"""

from __future__ import annotations

from functools import lru_cache
from math import prod
from typing import Any

import ml_dtypes
import numpy as np

from hipdnn_trace.backends.reference import xp as shim
from hipdnn_trace.backends.reference.ops._arrays import f64
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.dtypes import DTYPES, numpy_dtype

__all__ = ["SLAB_ELEMENTS", "block_dequantize", "block_quantize", "round_up_to", "type_max"]

Array = Any
#: elements of one dequantize slab (its scale, compute-type copy and product: ~0.3 GiB at most)
SLAB_ELEMENTS = 1 << 24
_UINT = {1: np.uint8, 2: np.uint16}


def type_max(hipdnn_dtype: str) -> tuple[float, float]:
    """(lowest, max) finite values of a hipDNN element type."""
    target = numpy_dtype(hipdnn_dtype)
    info = ml_dtypes.finfo(target) if DTYPES[hipdnn_dtype].is_float else np.iinfo(target)
    return float(info.min), float(info.max)


@lru_cache(maxsize=None)
def _ladder(hipdnn_dtype: str) -> np.ndarray:
    """Every finite non-negative value of a float type of at most 16 bits, ascending (float64)."""
    target = np.dtype(numpy_dtype(hipdnn_dtype))
    codes = np.arange(1 << (8 * target.itemsize), dtype=_UINT[target.itemsize])
    with np.errstate(invalid="ignore", over="ignore"):
        values = codes.view(target).astype(np.float64)
    keep = np.isfinite(values) & ~np.signbit(values)
    return np.unique(values[keep])


def round_up_to(values: np.ndarray, hipdnn_dtype: str) -> np.ndarray:
    """Positive ``values`` rounded up to the nearest value of ``hipdnn_dtype`` (float64 result).

    hipDNN's ``quantizeRoundUp``: cast to nearest, one ulp up when that fell below, the type's
    max above it; that is the smallest value of the type not below, found here by a search in
    the type's values. e8m0 has no zero; a zero block's scale is its smallest value, 2^-127
    (hipDNN's conversion of 0 to e8m0 is not confirmed; y is 0 either way).
    """
    v = f64(values)
    xp = shim.namespace(v)
    if hipdnn_dtype == "float":
        return _round_up_float(xp, v)
    if np.dtype(numpy_dtype(hipdnn_dtype)).itemsize > 2:
        raise UnsupportedError(f"scale type {hipdnn_dtype} cannot be rounded up by the reference")
    ladder = _ladder(hipdnn_dtype)
    steps = shim.from_numpy(xp, ladder, shim.device_of(v))
    at = xp.searchsorted(steps, xp.reshape(v, (-1,)), side="left")   # the first value not below
    at = xp.clip(at, 0, ladder.size - 1)                                 # above the max: the max
    return xp.reshape(xp.take(steps, at), v.shape)


def _round_up_float(xp: Any, v: Array) -> Array:
    """float32: the nearest value, one ``nextafter`` up when it fell below, the max above it."""
    top = float(np.finfo(np.float32).max)
    capped = xp.minimum(v, top)
    near = xp.astype(capped, xp.float32)
    up = xp.nextafter(near, xp.full_like(near, top))   # only used below the max
    return xp.where(xp.astype(near, xp.float64) < capped, xp.astype(up, xp.float64), xp.astype(near, xp.float64))


def _compute(xp: Any, hipdnn_compute: str) -> Any:
    return xp.float64 if hipdnn_compute == "double" else xp.float32


def _in_compute(value: float, hipdnn_compute: str) -> float:
    """A Python float as the compute type holds it (clip bounds: int32's max is 2^31 in float)."""
    return float(np.float64(value) if hipdnn_compute == "double" else np.float32(value))


def block_quantize(x: np.ndarray, block_size: int, axis: int, y_dtype: str, scale_dtype: str,
                   compute: str = "float") -> tuple[np.ndarray, np.ndarray]:
    """(y, scale) as float64 arrays holding the values hipDNN computes; y still to be stored
    in its type (``rounding.stored_values``)."""
    x = f64(x)
    xp = shim.namespace(x)
    ct = _compute(xp, compute)
    xc = xp.astype(x, ct)
    if not bool(xp.all(xp.isfinite(xc))):
        raise UnsupportedError("BlockScaleQuantize: x contains a NaN or Inf value (hipDNN's reference refuses it)")
    moved = xp.moveaxis(xc, axis, -1)
    length = moved.shape[-1]
    blocks = -(-length // block_size)
    grouped = xp.reshape(_padded(xp, moved, blocks * block_size), (*moved.shape[:-1], blocks, block_size))
    amax = xp.max(xp.abs(grouped), axis=-1)
    lowest, top = type_max(y_dtype)
    scale = round_up_to(xp.astype(amax, xp.float64) / top, scale_dtype)
    s = xp.expand_dims(xp.astype(scale, ct), axis=-1)
    nonzero = s != 0
    if bool(xp.all(nonzero)):   # the usual case (an e8m0 scale is never 0): no where passes over x
        y = grouped / s
    else:
        y = xp.where(nonzero, grouped / xp.where(nonzero, s, 1.0), 0.0)
    y = xp.clip(y, _in_compute(lowest, compute), _in_compute(top, compute))
    if not DTYPES[y_dtype].is_float:
        y = xp.round(y)   # nearbyint: round half to even
    y = xp.reshape(y, (*moved.shape[:-1], blocks * block_size))[..., :length]
    return xp.moveaxis(xp.astype(y, xp.float64), -1, axis), xp.moveaxis(scale, -1, axis)


def _padded(xp: Any, moved: Array, width: int) -> Array:
    """``moved`` with its last axis zero-padded to ``width`` (itself when it already is: no copy)."""
    length = moved.shape[-1]
    if length == width:
        return moved
    padded = xp.zeros((*moved.shape[:-1], width), dtype=moved.dtype, device=shim.device_of(moved))
    padded[..., :length] = moved
    return padded


def block_dequantize(x: np.ndarray, scale: np.ndarray, blocks: tuple[int, ...], *, negative: bool = False,
                     compute: str = "float") -> np.ndarray:
    """y = x * scale[block of each element] (or x * 2^-scale), in the compute type."""
    x, scale = f64(x), f64(scale)
    xp = shim.namespace(x, scale)
    if x.ndim == 0 or x.shape[0] == 0:
        return _dequantize_slab(xp, x, scale, blocks, negative, compute)
    out = xp.empty(x.shape, dtype=xp.float64, device=shim.device_of(x))
    rows = x.shape[0]
    block = max(int(blocks[0]), 1)
    step = max(block, SLAB_ELEMENTS // max(prod(x.shape[1:]), 1) // block * block)   # at block boundaries
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        part = _dequantize_slab(xp, x[r0:r1, ...], scale[r0 // block:-(-r1 // block), ...], blocks, negative, compute)
        out[r0:r1, ...] = part
    return out


def _dequantize_slab(xp: Any, x: Array, scale: Array, blocks: tuple[int, ...], negative: bool, compute: str) -> Array:
    ct = _compute(xp, compute)
    s = xp.astype(scale, ct)
    for axis, b in enumerate(blocks):
        if b > 1:
            s = xp.repeat(s, b, axis=axis)
    s = s[tuple(slice(0, d) for d in x.shape)]
    xc = xp.astype(x, ct)
    factor = shim.exp2(xp, -s) if negative else s
    return xp.astype(xc * factor, xp.float64)

"""Pooling (hipDNN's resample) in float64, forward and backward.

Follows test_sdk ``CpuFpReferenceResampleFwd.hpp`` / ``CpuFpReferenceResampleBwd.hpp``: windows
walk x padded by pre/post padding; MAXPOOL keeps the first strictly larger value in row-major
window order (a zero pad competes under ZERO_PAD with index -1, NEG_INF_PAD skips pads), the
index is the flat spatial index in x's plane; AVGPOOL divides the window sum by the window
size (INCLUDE_PADDING) or by the real elements in it (EXCLUDE_PADDING, at least 1). The
backward routes dy to the recorded argmax (MAXPOOL; an index outside its output's window
reaches no dx element, as hipDNN's loop over dx finds it in no window) or spreads dy / divisor over the window.

Namespace-generic and memory-bounded: every step is one pass over the window's taps in row-major
order, each tap a strided slice of the padded input of the output's shape, so nothing larger than
the padded input and a few output-sized arrays exists (no window view is copied). The forward keeps
the running maximum with its tap's flat index (np.argmax's rule: the first maximum, the first NaN)
or the running sum in hipDNN's order; the backward adds each tap's share (MAXPOOL: where the
recorded index is that tap's element) into its slice of a padded dx, so no scatter is needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import product
from math import prod
from typing import Any

import numpy as np

from hipdnn_trace.backends.reference import xp as shim
from hipdnn_trace.backends.reference.ops._arrays import as_array, f64
from hipdnn_trace.graph.resample import Pooling

__all__ = ["pool_backward", "pool_forward"]

Array = Any
#: hipDNN's MAXPOOL starts from float's lowest value, which a window of -inf pads therefore keeps
_LOWEST = float(np.finfo(np.float32).min)


def _taps(p: Pooling) -> Iterator[tuple[int, ...]]:
    """Window offsets in row-major order (hipDNN's loop order)."""
    return product(*(range(w) for w in p.window))


def _out_spatial(spatial: tuple[int, ...], p: Pooling) -> tuple[int, ...]:
    return tuple((i + a + b - w) // s + 1 for i, a, b, w, s in zip(spatial, p.pre, p.post, p.window, p.stride))


def _tap_slice(tap: tuple[int, ...], out_spatial: tuple[int, ...], p: Pooling) -> tuple[slice, ...]:
    """Where tap ``tap`` reads in the padded [N, C, *padded] array, for every output at once."""
    return (slice(None), slice(None),
            *(slice(r, r + (o - 1) * s + 1, s) for r, o, s in zip(tap, out_spatial, p.stride)))


def _padded(x: Array, p: Pooling, value: float, extent: tuple[int, ...] | None = None) -> Array:
    """x inside a [N, C, *extent] array filled with ``value`` (extent: padded by pre and post)."""
    xp = shim.namespace(x)
    n, c, *spatial = x.shape
    if extent is None and not any(p.pre) and not any(p.post):
        return x
    extent = extent or tuple(i + a + b for i, a, b in zip(spatial, p.pre, p.post))
    padded = xp.full((n, c, *extent), value, dtype=xp.float64, device=shim.device_of(x))
    padded[(slice(None), slice(None), *(slice(a, a + i) for a, i in zip(p.pre, spatial)))] = x
    return padded


def _tap_positions(tap: tuple[int, ...], spatial: tuple[int, ...], out_spatial: tuple[int, ...],
                   p: Pooling) -> tuple[np.ndarray, np.ndarray]:
    """(flat index in x's plane, inside x) of the element tap ``tap`` reads for every output: [*out]."""
    flat = np.zeros(out_spatial, dtype=np.int64)
    inside = np.ones(out_spatial, dtype=bool)
    for axis, (r, o, s, a, d) in enumerate(zip(tap, out_spatial, p.stride, p.pre, spatial)):
        pos = np.arange(o) * s + r - a
        shape = [1] * len(out_spatial)
        shape[axis] = o
        flat = flat * d + pos.reshape(shape)
        inside = inside & ((pos >= 0) & (pos < d)).reshape(shape)
    return np.where(inside, flat, -1), inside


def _tap_index(xp: Any, tap: tuple[int, ...], spatial: tuple[int, ...], out_spatial: tuple[int, ...],
               p: Pooling, device: Any) -> Array:
    """The flat index tap ``tap`` reads for every output ([*out], -1 for a pad), in ``xp``."""
    return shim.index_array(xp, _tap_positions(tap, spatial, out_spatial, p)[0], device)


def _divisor(xp: Any, spatial: tuple[int, ...], out_spatial: tuple[int, ...], p: Pooling, device: Any) -> Any:
    """The window size (INCLUDE_PADDING) or the real elements each window covers, at least 1 ([*out])."""
    if p.mode == "AVGPOOL_INCLUDE_PADDING":
        return float(prod(p.window))
    counts = sum(_tap_positions(tap, spatial, out_spatial, p)[1].astype(np.float64) for tap in _taps(p))
    return shim.from_numpy(xp, np.maximum(counts, 1.0), device)


def pool_forward(x: np.ndarray, p: Pooling, *, with_index: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """y [N, C, *out] and, for MAXPOOL with ``with_index``, the int64 argmax index."""
    x = f64(x)
    xp = shim.namespace(x)
    spatial = tuple(x.shape[2:])
    out_spatial = _out_spatial(spatial, p)
    if p.mode != "MAXPOOL":
        padded = _padded(x, p, 0.0)
        total = None
        for tap in _taps(p):
            window = padded[_tap_slice(tap, out_spatial, p)]
            total = window if total is None else total + window
        return total / _divisor(xp, spatial, out_spatial, p, shim.device_of(x)), None
    padded = _padded(x, p, -np.inf if p.padding_mode == "NEG_INF_PAD" else 0.0)
    return _running_max(padded, spatial, out_spatial, p, with_index)


def _running_max(padded: Array, spatial: tuple[int, ...], out_spatial: tuple[int, ...], p: Pooling,
                 with_index: bool) -> tuple[Array, Array | None]:
    """The first maximum of each window and its flat index, tap by tap (np.argmax's rule: a NaN
    wins and keeps its place)."""
    xp = shim.namespace(padded)
    device = shim.device_of(padded)
    best = index = None
    nan = bool(xp.any(xp.isnan(padded)))   # only then does np.argmax's NaN rule cost a pass
    for tap in _taps(p):
        value = padded[_tap_slice(tap, out_spatial, p)]
        where = _tap_index(xp, tap, spatial, out_spatial, p, device) if with_index else None
        if best is None:
            best, index = value, where
            continue
        better = value > best
        if nan:
            better = better | (xp.isnan(value) & ~xp.isnan(best))
        best = xp.where(better, value, best)
        if with_index:
            index = xp.where(better, where, index)
    y = xp.where(xp.isinf(best) & (best < 0), _LOWEST, best)   # all -inf: hipDNN keeps float's lowest
    if not with_index:
        return y, None
    return y, xp.astype(xp.broadcast_to(index, y.shape), xp.int64, copy=True)


def pool_backward(dy: np.ndarray, p: Pooling, dx_shape: tuple[int, ...],
                  index: np.ndarray | None = None) -> np.ndarray:
    """dx [N, C, *spatial]: dy back to the argmax (MAXPOOL) or spread over each window (AVGPOOL)."""
    dy = f64(dy)
    xp = shim.namespace(dy)
    device = shim.device_of(dy)
    n, c, *spatial = (int(d) for d in dx_shape)
    out_spatial = tuple(dy.shape[2:])
    if p.mode == "MAXPOOL" and index is None:
        raise ValueError("MAXPOOL backward needs the forward's index")
    extent = tuple(max(i + a + b, (o - 1) * s + w) for i, a, b, o, s, w in
                   zip(spatial, p.pre, p.post, out_spatial, p.stride, p.window))
    padded = xp.zeros((n, c, *extent), dtype=xp.float64, device=device)
    if p.mode == "MAXPOOL":
        idx = xp.astype(as_array(index), xp.int64)
        valid = idx >= 0   # a pad's -1 reaches nothing; an index outside its window matches no tap
        for tap in _taps(p):
            hit = valid & (idx == _tap_index(xp, tap, tuple(spatial), out_spatial, p, device))
            padded[_tap_slice(tap, out_spatial, p)] += xp.where(hit, dy, 0.0)
    else:
        share = dy / _divisor(xp, tuple(spatial), out_spatial, p, device)
        for tap in _taps(p):
            padded[_tap_slice(tap, out_spatial, p)] += share
    return padded[(slice(None), slice(None), *(slice(a, a + i) for a, i in zip(p.pre, spatial)))]

"""Pooling (hipDNN's resample) in float64, forward and backward.

Follows test_sdk ``CpuFpReferenceResampleFwd.hpp`` / ``CpuFpReferenceResampleBwd.hpp``: windows
walk x padded by pre/post padding; MAXPOOL keeps the first strictly larger value in row-major
window order (a zero pad competes under ZERO_PAD with index -1, NEG_INF_PAD skips pads), the
index is the flat spatial index in x's plane; AVGPOOL divides the window sum by the window
size (INCLUDE_PADDING) or by the real elements in it (EXCLUDE_PADDING, at least 1). The
backward routes dy to the recorded argmax (MAXPOOL; an index outside its output's window
reaches no dx element, as hipDNN's loop over dx finds it in no window) or spreads dy / divisor over the window.
"""

from __future__ import annotations

from itertools import product
from math import prod

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from hipdnn_trace.backends.reference.ops._arrays import f64
from hipdnn_trace.graph.resample import Pooling

__all__ = ["pool_backward", "pool_forward"]


def _windows(a: np.ndarray, p: Pooling) -> np.ndarray:
    """[N, C, *out, window elements] views of a padded [N, C, *padded] array."""
    nsp = len(p.window)
    view = sliding_window_view(a, p.window, axis=tuple(range(2, 2 + nsp)))
    view = view[(slice(None), slice(None), *(slice(None, None, s) for s in p.stride))]
    return view.reshape(*view.shape[: 2 + nsp], prod(p.window))


def _pad(a: np.ndarray, p: Pooling, value: float) -> np.ndarray:
    return np.pad(a, [(0, 0), (0, 0), *zip(p.pre, p.post)], constant_values=value)


def _real_counts(spatial: tuple[int, ...], p: Pooling) -> np.ndarray:
    """How many real (unpadded) elements each output window covers: [*out]."""
    mask = _pad(np.ones((1, 1, *spatial)), p, 0.0)
    return _windows(mask, p).sum(axis=-1)[0, 0]


def _crop(out_spatial: tuple[int, ...], p: Pooling) -> tuple[int, ...]:
    """Spatial extent the windows reach inside the padded input (the output formula floors)."""
    return tuple((o - 1) * s + w for o, s, w in zip(out_spatial, p.stride, p.window))


def pool_forward(x: np.ndarray, p: Pooling, *, with_index: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """y [N, C, *out] and, for MAXPOOL with ``with_index``, the int64 argmax index."""
    x = f64(x)
    spatial = tuple(x.shape[2:])
    if p.mode != "MAXPOOL":
        sums = _windows(_pad(x, p, 0.0), p).sum(axis=-1)
        divisor = float(prod(p.window)) if p.mode == "AVGPOOL_INCLUDE_PADDING" else \
            np.maximum(_real_counts(spatial, p), 1.0)
        return sums / divisor, None
    fill = -np.inf if p.padding_mode == "NEG_INF_PAD" else 0.0
    windows = _windows(_pad(x, p, fill), p)
    first = np.argmax(windows, axis=-1)[..., None]
    y = np.take_along_axis(windows, first, axis=-1)[..., 0]
    if np.isneginf(y).any():   # every element of a window was a -inf pad or -inf: hipDNN keeps float's lowest
        y = np.where(np.isneginf(y), np.finfo(np.float32).min, y)
    if not with_index:
        return y, None
    flat = _pad(np.arange(prod(spatial), dtype=np.float64).reshape(1, 1, *spatial), p, -1.0)
    index_windows = np.broadcast_to(_windows(flat, p), windows.shape)
    return y, np.take_along_axis(index_windows, first, axis=-1)[..., 0].astype(np.int64)


def pool_backward(dy: np.ndarray, p: Pooling, dx_shape: tuple[int, ...],
                  index: np.ndarray | None = None) -> np.ndarray:
    """dx [N, C, *spatial]: dy back to the argmax (MAXPOOL) or spread over each window (AVGPOOL)."""
    dy = f64(dy)
    n, c, *spatial = dx_shape
    if p.mode == "MAXPOOL":
        if index is None:
            raise ValueError("MAXPOOL backward needs the forward's index")
        idx = np.asarray(index).astype(np.int64)
        plane = prod(spatial)
        flat = _pad(np.arange(plane, dtype=np.float64).reshape(1, 1, *spatial), p, -1.0)
        inside = (_windows(flat, p)[0, 0] == idx[..., None]).any(axis=-1) & (idx >= 0)
        idx = np.where(inside, idx, plane).reshape(n * c, -1)   # pads and indices outside the window: nowhere
        dx = np.zeros((n * c, plane + 1))
        rows = np.repeat(np.arange(n * c), idx.shape[1]).reshape(idx.shape)
        np.add.at(dx, (rows, idx), dy.reshape(n * c, -1))
        return dx[:, :-1].reshape(dx_shape)
    out_spatial = tuple(dy.shape[2:])
    divisor = float(prod(p.window)) if p.mode == "AVGPOOL_INCLUDE_PADDING" else \
        np.maximum(_real_counts(tuple(spatial), p), 1.0)
    share = dy / divisor
    padded = np.zeros((n, c, *(max(i + a + b, r) for i, a, b, r in
                               zip(spatial, p.pre, p.post, _crop(out_spatial, p)))))
    for offset in product(*(range(w) for w in p.window)):
        where = tuple(slice(o, o + (m - 1) * s + 1, s) for o, m, s in zip(offset, out_spatial, p.stride))
        padded[(slice(None), slice(None), *where)] += share
    inner = tuple(slice(a, a + i) for a, i in zip(p.pre, spatial))
    return padded[(slice(None), slice(None), *inner)]

"""Small helpers every reference op shares: float64 inputs and per-channel shapes.

Kept apart so each op module holds only its own math.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from hipdnn_trace.errors import UnsupportedError


def f64(a: object) -> np.ndarray:
    """``a`` as a float64 array (a view when it already is one; never written to)."""
    return np.asarray(a, dtype=np.float64)


def as_shape(shape: Sequence[int], what: str) -> tuple[int, ...]:
    """A shape as a tuple of non-negative ints, or UnsupportedError naming ``what``."""
    try:
        out = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise UnsupportedError(f"{what}: shape {shape!r} is not a sequence of integers") from None
    if any(d < 0 for d in out):
        raise UnsupportedError(f"{what}: shape {out} has a negative dimension")
    return out


def per_channel(a: object, x_ndim: int, channels: int, what: str) -> np.ndarray:
    """A per-channel tensor (any dims holding ``channels`` values, e.g. [1, C, 1, 1])
    reshaped to ``(1, C, 1, ...)`` so it broadcasts against an N, C, spatial... tensor."""
    arr = f64(a)
    if arr.size != channels:
        raise UnsupportedError(f"{what} has {arr.size} values, expected one per channel ({channels})")
    return arr.reshape((1, channels) + (1,) * (x_ndim - 2))


def trailing(a: object, x_shape: tuple[int, ...], start: int, what: str) -> np.ndarray:
    """A tensor over the trailing dims ``x_shape[start:]`` (any dims holding that many
    values, e.g. [4] or [1, 1, 4]) reshaped to broadcast against x."""
    arr = f64(a)
    dims = x_shape[start:]
    expected = math.prod(dims)
    if arr.size != expected:
        raise UnsupportedError(f"{what} has {arr.size} values, expected {expected} for dims {dims}")
    return arr.reshape(dims)

"""Small helpers every reference op shares: float64 inputs and per-channel shapes.

Kept apart so each op module holds only its own math. Namespace-generic: numpy arrays stay
numpy (exactly as before), other Array API arrays (torch tensors) stay in their namespace.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import array_api_compat
import numpy as np

from hipdnn_trace.errors import UnsupportedError


def f64(a: object) -> Any:
    """``a`` as a float64 array of its own namespace (numpy for lists and scalars; a view when it
    already is one; never written to)."""
    if isinstance(a, np.ndarray) or not array_api_compat.is_array_api_obj(a):
        return np.asarray(a, dtype=np.float64)
    xp = array_api_compat.array_namespace(a)
    return a if a.dtype == xp.float64 else xp.astype(a, xp.float64)


def as_shape(shape: Sequence[int], what: str) -> tuple[int, ...]:
    """A shape as a tuple of non-negative ints, or UnsupportedError naming ``what``."""
    try:
        out = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise UnsupportedError(f"{what}: shape {shape!r} is not a sequence of integers") from None
    if any(d < 0 for d in out):
        raise UnsupportedError(f"{what}: shape {out} has a negative dimension")
    return out


def as_array(a: object) -> Any:
    """``a`` unchanged when it is an array of any namespace, else as a numpy array (no copy, no cast)."""
    return a if array_api_compat.is_array_api_obj(a) else np.asarray(a)


def size(a: Any) -> int:
    """Element count of any Array API array (torch's ``size`` is a method)."""
    return math.prod(a.shape)


def shape_of(a: Any) -> tuple[int, ...]:
    """The shape of an array of any namespace, or of a nested list."""
    return tuple(a.shape) if hasattr(a, "shape") else np.shape(a)


def reshape(a: Any, shape: tuple[int, ...]) -> Any:
    """``a`` reshaped in its own namespace."""
    return a.reshape(shape) if isinstance(a, np.ndarray) else array_api_compat.array_namespace(a).reshape(a, shape)


def per_channel(a: object, x_ndim: int, channels: int, what: str) -> Any:
    """A per-channel tensor (any dims holding ``channels`` values, e.g. [1, C, 1, 1])
    reshaped to ``(1, C, 1, ...)`` so it broadcasts against an N, C, spatial... tensor."""
    arr = f64(a)
    if size(arr) != channels:
        raise UnsupportedError(f"{what} has {size(arr)} values, expected one per channel ({channels})")
    return reshape(arr, (1, channels) + (1,) * (x_ndim - 2))


def trailing(a: object, x_shape: tuple[int, ...], start: int, what: str) -> Any:
    """A tensor over the trailing dims ``x_shape[start:]`` (any dims holding that many
    values, e.g. [4] or [1, 1, 4]) reshaped to broadcast against x."""
    arr = f64(a)
    dims = x_shape[start:]
    expected = math.prod(dims)
    if size(arr) != expected:
        raise UnsupportedError(f"{what} has {size(arr)} values, expected {expected} for dims {dims}")
    return reshape(arr, tuple(dims))

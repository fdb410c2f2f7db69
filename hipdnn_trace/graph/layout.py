"""Dims + strides <-> memory.

Backends and golden bundles move tensors as flat buffers laid out by the graph's
strides; numerics work on logical arrays (dims order). These helpers convert
between the two without copying more than once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_DIM_LETTERS = {3: "NCW", 4: "NCHW", 5: "NCDHW"}


def is_valid_layout(dims: Sequence[int], strides: Sequence[int]) -> bool:
    """True when no two distinct logical elements share an address.

    Broadcast (stride 0) is allowed only over size-1 dims. The check sorts dims by
    stride and requires each stride to step over everything inside it, which is
    sufficient for non-overlap and is what every packed or padded layout satisfies.
    """
    pairs = sorted((s, d) for d, s in zip(dims, strides) if d > 1)
    extent = 1
    for s, d in pairs:
        if s < extent:
            return False
        extent = s * d
    return all(s >= 0 for s in strides)


def packed_strides(dims: Sequence[int], order: Sequence[int] | None = None) -> tuple[int, ...]:
    """Strides of a packed tensor. ``order`` lists dims from outermost to innermost."""
    rank = len(dims)
    order = list(range(rank)) if order is None else list(order)
    strides = [0] * rank
    step = 1
    for axis in reversed(order):
        strides[axis] = step
        step *= max(1, dims[axis])
    return tuple(strides)


def channels_last_order(rank: int) -> list[int]:
    """Dim order (outermost first) of NHWC-style layouts: N, spatial..., C."""
    return [0, *range(2, rank), 1] if rank >= 3 else list(range(rank))


def stride_order(strides: Sequence[int]) -> list[int]:
    """Dims from outermost (largest stride) to innermost; ties keep logical order."""
    return sorted(range(len(strides)), key=lambda a: (-strides[a], a))


def layout_name(dims: Sequence[int], strides: Sequence[int]) -> str:
    """NCHW / NHWC (or NCDHW / NDHWC, NCW / NWC) when the strides match, else the order."""
    rank = len(dims)
    if tuple(strides) == packed_strides(dims):
        return _DIM_LETTERS.get(rank, "packed")
    if rank in _DIM_LETTERS and tuple(strides) == packed_strides(dims, channels_last_order(rank)):
        letters = _DIM_LETTERS[rank]
        return letters[0] + letters[2:] + letters[1]
    return "strided(" + ",".join(str(a) for a in stride_order(strides)) + ")"


def storage_elements(dims: Sequence[int], strides: Sequence[int]) -> int:
    if any(d == 0 for d in dims):
        return 0
    return 1 + sum((d - 1) * s for d, s in zip(dims, strides))


def view(buffer: np.ndarray, dims: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    """Logical (dims-ordered) read-only view of a flat buffer laid out by ``strides``."""
    flat = np.ascontiguousarray(buffer).reshape(-1)
    need = storage_elements(dims, strides)
    if flat.size < need:
        raise ValueError(f"buffer has {flat.size} elements, layout needs {need}")
    item = flat.itemsize
    out = np.lib.stride_tricks.as_strided(
        flat, shape=tuple(dims), strides=tuple(s * item for s in strides), writeable=False
    )
    return out


def pack(array: np.ndarray, strides: Sequence[int]) -> np.ndarray:
    """Flat buffer holding ``array`` (logical dims) at the addresses ``strides`` give.

    Gaps of padded layouts are zero.
    """
    dims = array.shape
    flat = np.zeros(storage_elements(dims, strides), dtype=array.dtype)
    if flat.size:
        dest = np.lib.stride_tricks.as_strided(
            flat, shape=dims, strides=tuple(s * flat.itemsize for s in strides)
        )
        dest[...] = array
    return flat

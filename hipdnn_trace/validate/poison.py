"""Poisoned outputs: how an output a kernel never wrote is told from a computed one.

Before the first execution every session fills its output buffers with 0xFF bytes
(``cudaMemset``/``hipMemset`` can do it on any device). For every floating-point
type hipDNN has, all-ones bytes are a NaN that arithmetic never produces (a computed
NaN is the canonical quiet NaN), so an element still all-ones after the run was
not written. For integer types all-ones is -1 (or the maximum), a legal value, so
only a tensor that is all-ones everywhere is reported as unwritten.
"""

from __future__ import annotations

import numpy as np

POISON_BYTE = 0xFF


def poison(buffer: np.ndarray) -> None:
    """Fill a host array with the poison pattern in place."""
    buffer.view(np.uint8)[...] = POISON_BYTE


def poisoned_like(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    out = np.empty(shape, dtype=dtype)
    poison(out)
    return out


def unwritten_elements(values: np.ndarray) -> np.ndarray:
    """Elements whose bytes are all the poison byte, whatever the type (no integer rule: for a
    chunk of a larger tensor, whose all-ones verdict needs the whole tensor)."""
    arr = np.ascontiguousarray(values)
    if arr.size == 0:
        return np.zeros(arr.shape, dtype=bool)
    raw = arr.view(np.uint8).reshape(arr.size, arr.dtype.itemsize)
    return (raw == POISON_BYTE).all(axis=1).reshape(arr.shape)


def unwritten_mask(values: np.ndarray) -> np.ndarray:
    """Elements whose bytes are all the poison byte."""
    arr = np.ascontiguousarray(values)
    mask = unwritten_elements(arr)
    if arr.size == 0:
        return mask
    kind = np.dtype(arr.dtype).kind
    if kind in "iub":   # legal values: only a wholly poisoned tensor counts
        return mask if mask.all() else np.zeros_like(mask)
    return mask

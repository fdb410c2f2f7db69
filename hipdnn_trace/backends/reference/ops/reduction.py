"""hipDNN reductions in float64.

As in hipDNN's CPU reference (``CpuReferenceReduction.hpp``): x and y have the same
rank, every y dim equals x's or is 1, and the reduced dims are those where y is 1 and
x is larger. Modes use hipDNN's JSON strings (``ReductionAttributes.hpp``): ADD, MUL,
MIN, MAX, AMAX (max |x|), AVG, NORM1 (sum |x|), NORM2 (sqrt of sum x^2), MUL_NO_ZEROS
(product of the non-zero values, 1 when all are zero); ``MIN_OP`` / ``MAX_OP`` and
lower case are accepted too. hipDNN rejects a reduction that reduces nothing; here it
is the identity (AMAX and NORM give |x|), since that answer is still exact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from hipdnn_trace.backends.reference.ops._arrays import as_shape, f64
from hipdnn_trace.backends.reference.xp import is_numpy, namespace, quiet
from hipdnn_trace.errors import UnsupportedError

__all__ = ["reduce", "REDUCTION_MODES"]

_Reducer = Callable[[np.ndarray, tuple[int, ...]], np.ndarray]


def _mul_no_zeros(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    xp = namespace(x)
    return xp.prod(xp.where(x == 0.0, 1.0, x), axis=axes, keepdims=True)


def _reducer(name: str, prepare: Callable[[object, np.ndarray], np.ndarray] = lambda xp, x: x) -> _Reducer:
    """Reduce with the namespace's ``name`` after ``prepare`` (abs, square)."""
    def run(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        xp = namespace(x)
        return getattr(xp, name)(prepare(xp, x), axis=axes, keepdims=True)
    return run


def _norm2(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    xp = namespace(x)
    return xp.sqrt(xp.sum(xp.square(x), axis=axes, keepdims=True))


_REDUCERS: dict[str, _Reducer] = {
    "ADD": _reducer("sum"),
    "MUL": _reducer("prod"),
    "MIN": _reducer("min"),
    "MAX": _reducer("max"),
    "AMAX": _reducer("max", lambda xp, x: xp.abs(x)),
    "AVG": _reducer("mean"),
    "NORM1": _reducer("sum", lambda xp, x: xp.abs(x)),
    "NORM2": _norm2,
    "MUL_NO_ZEROS": _mul_no_zeros,
}

_ALIASES = {"MIN_OP": "MIN", "MAX_OP": "MAX", "SUM": "ADD", "MEAN": "AVG"}

#: The hipDNN reduction mode strings this module computes.
REDUCTION_MODES: tuple[str, ...] = tuple(_REDUCERS)


def reduce(mode: str, x: np.ndarray, *, out_shape: Sequence[int]) -> np.ndarray:
    """Reduce x to ``out_shape`` with hipDNN reduction ``mode``."""
    name = str(mode).strip().upper()
    name = _ALIASES.get(name, name)
    if name not in _REDUCERS:
        raise UnsupportedError(f"unsupported reduction mode {mode}")
    x = f64(x)
    shape = as_shape(out_shape, "reduction output")
    xp = namespace(x)
    if len(shape) != x.ndim:
        raise UnsupportedError(f"reduction: output rank {len(shape)} differs from input rank {x.ndim}")
    for i, (xd, yd) in enumerate(zip(x.shape, shape)):
        if yd != xd and yd != 1:
            raise UnsupportedError(f"reduction: output dim {i} is {yd}, must be {xd} or 1")
    axes = tuple(i for i, (xd, yd) in enumerate(zip(x.shape, shape)) if yd == 1 and xd > 1)
    if any(d == 0 for d in x.shape):
        raise UnsupportedError(f"reduction of an empty tensor {x.shape}")
    with quiet(xp):
        out = _REDUCERS[name](x, axes)
    if is_numpy(xp):
        return np.array(out.reshape(shape), dtype=np.float64)
    return xp.asarray(xp.reshape(out, shape), dtype=xp.float64, copy=True)

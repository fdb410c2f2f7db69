"""Reference reductions against numpy, with hipDNN's out-shape rule for reduced dims."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hipdnn_trace.backends.reference.ops.reduction import REDUCTION_MODES, reduce
from hipdnn_trace.errors import UnsupportedError

X = np.array([[[0.5, -2.0, 0.0, 3.0], [1.0, 4.0, -1.5, 2.0], [0.0, 0.0, 0.0, 0.0]],
              [[-1.0, 2.0, 0.25, -3.0], [6.0, 0.0, 1.0, 1.0], [2.0, -2.0, 0.5, 0.5]]])   # (2, 3, 4)


def python_reduce(mode, values):
    """Scalar definitions over a Python list."""
    if mode == "ADD":
        return math.fsum(values)
    if mode == "MUL":
        return math.prod(values)
    if mode == "MIN":
        return min(values)
    if mode == "MAX":
        return max(values)
    if mode == "AMAX":
        return max(abs(v) for v in values)
    if mode == "AVG":
        return math.fsum(values) / len(values)
    if mode == "NORM1":
        return math.fsum(abs(v) for v in values)
    if mode == "NORM2":
        return math.sqrt(math.fsum(v * v for v in values))
    if mode == "MUL_NO_ZEROS":
        return math.prod(v for v in values if v != 0.0)
    raise AssertionError(mode)


@pytest.mark.parametrize("mode", REDUCTION_MODES)
@pytest.mark.parametrize("out_shape, axes", [((1, 3, 1), (0, 2)), ((2, 1, 4), (1,)), ((1, 1, 1), (0, 1, 2))])
def test_reductions_match_python_definitions(mode, out_shape, axes):
    got = reduce(mode, X, out_shape=out_shape)
    assert got.shape == out_shape
    kept = [a for a in range(3) if a not in axes]
    moved = np.moveaxis(X, kept, list(range(len(kept))))
    flat = moved.reshape(int(np.prod([X.shape[a] for a in kept])), -1)
    expect = np.array([python_reduce(mode, [float(v) for v in row]) for row in flat])
    np.testing.assert_allclose(got.ravel(), expect, rtol=1e-14)


def test_mode_aliases_and_case():
    np.testing.assert_array_equal(reduce("max_op", X, out_shape=(1, 1, 4)), X.max(axis=(0, 1), keepdims=True))
    np.testing.assert_array_equal(reduce("sum", X, out_shape=(2, 3, 1)), X.sum(axis=2, keepdims=True))


def test_bad_shapes_and_modes_are_unsupported():
    with pytest.raises(UnsupportedError, match="must be 3 or 1"):
        reduce("ADD", X, out_shape=(2, 2, 4))
    with pytest.raises(UnsupportedError, match="rank"):
        reduce("ADD", X, out_shape=(2, 3))
    with pytest.raises(UnsupportedError, match="unsupported reduction mode VAR"):
        reduce("VAR", X, out_shape=(1, 3, 4))

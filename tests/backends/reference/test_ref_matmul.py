"""Reference matmul: numpy broadcasting and hipDNN's divisible batch broadcasting."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest

from hipdnn_trace.backends.reference.ops.matmul import matmul, matmul_output_shape
from hipdnn_trace.errors import UnsupportedError


def loop_matmul(a, b):
    """C[i..., m, n] = sum_k A[i_a..., m, k] B[i_b..., k, n], A's batch index = i // (out/a)."""
    rank = max(a.ndim, b.ndim)
    a = a.reshape((1,) * (rank - a.ndim) + a.shape)
    b = b.reshape((1,) * (rank - b.ndim) + b.shape)
    out_b = [max(da, db) for da, db in zip(a.shape[:-2], b.shape[:-2])]
    c = np.zeros((*out_b, a.shape[-2], b.shape[-1]))
    for idx in product(*(range(d) for d in out_b)):
        ia = tuple(i // (o // d) for i, o, d in zip(idx, out_b, a.shape[:-2]))
        ib = tuple(i // (o // d) for i, o, d in zip(idx, out_b, b.shape[:-2]))
        for m, n in product(range(a.shape[-2]), range(b.shape[-1])):
            c[(*idx, m, n)] = sum(a[(*ia, m, k)] * b[(*ib, k, n)] for k in range(a.shape[-1]))
    return c


@pytest.mark.parametrize(
    "a_shape, b_shape",
    [
        ((3, 4), (4, 5)),
        ((2, 3, 4), (2, 4, 5)),
        ((2, 1, 3, 4), (1, 3, 4, 2)),      # size-1 broadcast both ways
        ((3, 4), (2, 2, 4, 3)),            # lower rank A
        ((2, 3, 4), (6, 4, 2)),            # hipDNN: A batch 2 serves out batches 0-2 and 3-5
        ((4, 1, 2, 3), (2, 3, 3, 2)),      # divisible in one dim, size-1 in another
    ],
)
def test_matches_loop_definition(a_shape, b_shape):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    c = matmul(a, b)
    expect = loop_matmul(a, b)
    assert c.shape == expect.shape == matmul_output_shape(a_shape, b_shape)
    np.testing.assert_allclose(c, expect, rtol=1e-12, atol=1e-12)


def test_numpy_broadcast_cases_agree_with_numpy_and_accept_float16_views():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 1, 7, 6)).astype(np.float16)
    b = rng.standard_normal((4, 8, 6)).astype(np.float16).transpose(0, 2, 1)   # non-contiguous
    c = matmul(a, b)
    assert c.dtype == np.float64
    np.testing.assert_allclose(c, np.matmul(a.astype(np.float64), b.astype(np.float64)), rtol=1e-12)


@pytest.mark.parametrize(
    "a_shape, b_shape, message",
    [((3, 4), (5, 6), "inner"), ((2, 3, 4), (3, 4, 5), "batch"), ((4,), (4, 2), "rank")],
)
def test_incompatible_shapes_are_unsupported(a_shape, b_shape, message):
    with pytest.raises(UnsupportedError, match=message):
        matmul(np.ones(a_shape), np.ones(b_shape))

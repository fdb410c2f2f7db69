"""Bounded BLAS calls (``_gemm.bounded_matmul``): every call under the FLOP bound, results equal to
one ``np.matmul`` within float64 rounding, and the reference ops that use it unchanged by a tiny bound.

No BLAS promises the same bits for a product computed in pieces: a tile at a split edge may run
another micro-kernel (seen: 5540 of 900,000 elements 1.6e-14 apart on an AMD EPYC with
scipy-openblas 0.3.31). So products are held to the forward error bound of a K-term dot product,
|got - expected| <= 2 * K * eps * (|a| @ |b|), which any correct BLAS meets and a wrong split
(a lost or doubled range) breaks by orders of magnitude."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from hipdnn_trace.backends.reference.ops import (
    _gemm,
    conv_dgrad,
    conv_fwd,
    conv_wgrad,
    matmul,
    moe_grouped_matmul,
    moe_grouped_matmul_backward,
)
from hipdnn_trace.backends.reference.ops._gemm import bounded_matmul


@pytest.fixture
def blas_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """FLOPs of every np.matmul call the module makes."""
    calls: list[int] = []
    inner = _gemm.np.matmul     # numpy's, or the second kernel choice (conftest.second_blas)

    def counting(a, b, out=None):
        calls.append(2 * int(np.prod(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))) * a.shape[-2]
                     * a.shape[-1] * b.shape[-1])
        return inner(a, b, out=out)

    names = {k: getattr(np, k) for k in dir(np) if not k.startswith("__")}
    monkeypatch.setattr(_gemm, "np", SimpleNamespace(**{**names, "matmul": counting}))
    return calls


SHAPES = [
    ((3, 1, 40, 50), (1, 4, 50, 30), 250_000),       # broadcast batch, two matrices per call
    ((2, 3, 300, 70), (70, 500), 2_000_000),         # lower-rank B, split by rows
    ((1024, 2000), (2000, 1000), 1 << 28),           # rows in aligned ranges
    ((1000, 2000), (2000, 1037), 1 << 24),           # rows and columns
    ((16, 512, 512), (16, 512, 512), 1 << 28),       # whole matrices per call
]


def assert_within_dot_product_rounding(got: np.ndarray, expected: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """Each element within two K-term dot products' worst rounding of the exact value."""
    k = a.shape[-1]
    limit = 2 * k * np.finfo(np.float64).eps * np.matmul(np.abs(a), np.abs(b))
    excess = np.abs(got - expected) - limit
    assert got.shape == expected.shape
    assert np.all(excess <= 0), f"{np.count_nonzero(excess > 0)} element(s) beyond float64 rounding"


@pytest.mark.parametrize(("sa", "sb", "bound"), SHAPES)
def test_every_call_is_bounded_and_the_product_within_rounding(sa, sb, bound, blas_calls):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    expected = np.matmul(a, b)
    got = bounded_matmul(a, b, call_flops=bound)
    assert len(blas_calls) > 1
    assert max(blas_calls) <= bound * 2    # a last range may hold up to 15 more rows or columns
    assert sum(blas_calls) == 2 * expected.size * sa[-1]
    assert_within_dot_product_rounding(got, expected, a, b)


def test_an_unaligned_split_stays_within_float64_rounding():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((1025, 700)), rng.standard_normal((700, 999))
    assert_within_dot_product_rounding(bounded_matmul(a, b, call_flops=1 << 24), a @ b, a, b)


def test_the_rounding_bound_catches_a_wrong_split():
    """The bound is tight enough to fail: one range of rows computed twice is far outside it."""
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((256, 300)), rng.standard_normal((300, 128))
    wrong = a @ b
    wrong[64:128] *= 2
    with pytest.raises(AssertionError, match="beyond float64 rounding"):
        assert_within_dot_product_rounding(wrong, a @ b, a, b)


def test_small_products_are_one_call(blas_calls):
    a = np.ones((8, 8))
    out = np.empty((8, 8))
    assert bounded_matmul(a, a, out=out) is out and blas_calls == [1024]


def _ops(rng: np.random.Generator) -> dict[str, object]:
    """Every reference op that multiplies through BLAS, on inputs big enough to be split at 2^14 FLOPs."""
    x = rng.standard_normal((3, 8, 9, 10))
    w = rng.standard_normal((12, 4, 3, 3))                      # 2 groups
    opts = {"pre_padding": [1, 1], "post_padding": [1, 1], "stride": [1, 1], "dilation": [1, 1]}
    strided = {"pre_padding": [1, 0], "post_padding": [0, 1], "stride": [2, 2], "dilation": [1, 1]}
    y = conv_fwd(x, w, **opts)
    ys = conv_fwd(x, w, **strided)
    tokens = rng.standard_normal((1, 40, 24))
    offsets = np.array([0, 15, 40])
    return {
        "matmul": lambda: matmul(rng.standard_normal((2, 70, 33)), rng.standard_normal((1, 33, 90))),
        "conv_fwd": lambda: conv_fwd(x, w, **opts),
        "conv_fwd_strided": lambda: conv_fwd(x, w, **strided),
        "conv_dgrad": lambda: conv_dgrad(y, w, x_shape=x.shape, **opts),
        "conv_dgrad_strided": lambda: conv_dgrad(ys, w, x_shape=x.shape, **strided),
        "conv_wgrad": lambda: conv_wgrad(x, y, w_shape=w.shape, **opts),
        "moe": lambda: moe_grouped_matmul(tokens, rng.standard_normal((2, 24, 200)), offsets),
        "moe_backward": lambda: moe_grouped_matmul_backward(rng.standard_normal((1, 40, 200)), tokens, offsets),
    }


@pytest.mark.parametrize("op", list(_ops(np.random.default_rng(0))))
def test_reference_ops_give_the_same_results_in_bounded_calls(op, monkeypatch, blas_calls):
    def run() -> tuple[np.ndarray, int]:
        compute = _ops(np.random.default_rng(0))[op]
        start = len(blas_calls)
        return compute(), len(blas_calls) - start

    before, calls_before = run()
    monkeypatch.setattr(_gemm, "CALL_FLOPS", 1 << 14)
    after, calls_after = run()
    assert calls_after > calls_before   # really split
    np.testing.assert_allclose(after, before, rtol=1e-13, atol=1e-13)

"""Pooling, MoE and block scaling compute the same values in every namespace.

Each op runs on numpy, on array-api-strict (a numpy-backed Array API that refuses anything outside
the standard, so the code uses only what torch on a GPU has too) and on torch's CPU in float64
(skipped where a package is missing). Integer and code outputs (pooling indices, block scales,
quantized elements) must be identical; float64 values equal within float64 rounding (1e-12
relative: only the matrix products' summation order may differ between BLAS libraries). Cases
include ties, NaN, -inf windows, winning pads, indices outside their window, partial blocks,
every scale type and dequantize slabs smaller than the tensor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from hipdnn_trace.backends.reference import xp as shim
from hipdnn_trace.backends.reference.ops import (
    block_dequantize,
    block_quantize,
    blockscale as bs,
    moe_grouped_matmul,
    moe_grouped_matmul_backward,
    pool_backward,
    pool_forward,
)
from hipdnn_trace.backends.reference.ops.rounding import round_to, stored_values
from hipdnn_trace.graph.resample import Pooling


@dataclass(frozen=True)
class Space:
    """A namespace to run the ops in: how to put a host array there and take one back."""

    name: str
    put: Callable[[np.ndarray], Any]


def _spaces() -> list[Any]:
    out = []
    try:
        import array_api_strict as xs

        out.append(pytest.param(Space("strict", xs.asarray), id="array-api-strict"))
    except ImportError:  # pragma: no cover - depends on the environment
        out.append(pytest.param(None, id="array-api-strict", marks=pytest.mark.skip(reason="no array-api-strict")))
    try:
        import torch

        out.append(pytest.param(Space("torch", lambda a: torch.from_numpy(np.ascontiguousarray(a))), id="torch-cpu"))
    except ImportError:  # pragma: no cover - depends on the environment
        out.append(pytest.param(None, id="torch-cpu", marks=pytest.mark.skip(reason="torch is not installed")))
    return out


SPACES = _spaces()


@pytest.fixture(autouse=True)
def _standard_2024():
    """The standard version the ops are written against (scalars in where, no 2025 additions)."""
    try:
        import array_api_strict as xs
    except ImportError:  # pragma: no cover - depends on the environment
        yield
        return
    xs.set_array_api_strict_flags(api_version="2024.12")
    yield
    xs.reset_array_api_strict_flags()


def host(a: Any) -> np.ndarray:
    return np.asarray(shim.to_numpy(a))


def _same(got: Any, want: np.ndarray, *, exact: bool = False) -> None:
    have = host(got)
    assert have.shape == want.shape
    if exact:
        assert have.dtype.kind == want.dtype.kind
        np.testing.assert_array_equal(have, want)
    else:
        np.testing.assert_allclose(have, want, rtol=1e-12, atol=0, equal_nan=True)


POOLS = [
    Pooling("MAXPOOL", "ZERO_PAD", (3, 3), (2, 2), (1, 1), (1, 1)),
    Pooling("MAXPOOL", "NEG_INF_PAD", (2, 3), (1, 2), (1, 0), (0, 2)),
    Pooling("MAXPOOL", "NEG_INF_PAD", (2, 2, 2), (2, 2, 1), (0, 1, 0), (1, 0, 1)),
    Pooling("MAXPOOL", "NEG_INF_PAD", (3, 3), (1, 1), (0, 0), (0, 0)),
    Pooling("AVGPOOL_INCLUDE_PADDING", "ZERO_PAD", (3, 2), (2, 1), (1, 0), (0, 1)),
    Pooling("AVGPOOL_EXCLUDE_PADDING", "ZERO_PAD", (3, 3), (2, 2), (2, 1), (1, 2)),
    Pooling("AVGPOOL_EXCLUDE_PADDING", "ZERO_PAD", (2, 2, 3), (2, 1, 2), (1, 0, 1), (0, 1, 1)),
]


def _pool_input(p: Pooling, rng: np.random.Generator) -> np.ndarray:
    """Values with ties, a NaN, an all -inf plane and an all-negative plane (a zero pad wins)."""
    x = rng.standard_normal((2, 3, *(7 - i for i in range(len(p.window)))))
    x[0, 0] = -np.abs(x[0, 0]) - 1.0
    x[0, 1] = np.round(x[0, 1])              # many ties
    x[1, 0] = -np.inf
    x[1, 1].reshape(-1)[5] = np.nan
    return x


@pytest.mark.parametrize("space", SPACES)
@pytest.mark.parametrize("p", POOLS, ids=lambda p: f"{p.mode}-{p.padding_mode}-{len(p.window)}d-s{p.stride[0]}")
def test_pooling_forward_and_backward_equal_numpys(space: Space, p: Pooling) -> None:
    rng = np.random.default_rng(len(p.window) * 10 + p.stride[0])
    x = _pool_input(p, rng)
    y, index = pool_forward(x, p, with_index=p.mode == "MAXPOOL")
    got_y, got_index = pool_forward(space.put(x), p, with_index=p.mode == "MAXPOOL")
    _same(got_y, y)
    if p.mode == "MAXPOOL":
        _same(got_index, index, exact=True)
        index = index.copy()
        index.reshape(-1)[::7] = rng.integers(-1, x[0, 0].size, index.reshape(-1)[::7].size)   # some outside
    dy = rng.standard_normal(y.shape)
    dx = pool_backward(dy, p, x.shape, index)
    got_dx = pool_backward(space.put(dy), p, x.shape, None if index is None else space.put(index))
    _same(got_dx, dx)


def _routing(mode: str, rng: np.random.Generator, tokens: int, top_k: int) -> tuple[Any, Any]:
    routed = tokens * top_k
    if mode == "GATHER":
        return rng.permutation(routed) // top_k, None
    if mode == "SCATTER":
        dst = rng.permutation(routed)
        return dst // top_k, dst % top_k
    return None, None


@pytest.mark.parametrize("space", SPACES)
@pytest.mark.parametrize("mode", ["NONE", "GATHER", "SCATTER"])
def test_moe_forward_equals_numpys(space: Space, mode: str) -> None:
    rng = np.random.default_rng(3)
    experts, k, n, tokens, top_k = 3, 7, 5, 6, 2
    token = rng.standard_normal((1, tokens if mode == "GATHER" else tokens * top_k, k))
    weight = rng.standard_normal((experts, k, n))
    offsets = np.array([1, 4, 4, 9, 10, 12])      # rows before 1 unrouted, an empty group, wrap around
    index, ks = _routing(mode, rng, tokens, top_k)
    want = moe_grouped_matmul(token, weight, offsets, mode=mode, top_k=top_k, token_index=index, token_ks=ks)
    put = (lambda a: None if a is None else space.put(np.asarray(a, dtype=np.int32)[None, :, None]))
    got = moe_grouped_matmul(space.put(token), space.put(weight), space.put(offsets.astype(np.int32)), mode=mode,
                             top_k=top_k, token_index=put(index), token_ks=put(ks))
    _same(got, want)
    assert not host(got)[0, 0].any() or mode == "GATHER", "an unrouted row stays zero"


@pytest.mark.parametrize("space", SPACES)
def test_moe_weight_gradient_equals_numpys(space: Space) -> None:
    rng = np.random.default_rng(4)
    dout, token = rng.standard_normal((1, 11, 5)), rng.standard_normal((1, 11, 6))
    offsets = np.array([0, 4, 4, 9])
    want = moe_grouped_matmul_backward(dout, token, offsets)
    _same(moe_grouped_matmul_backward(space.put(dout), space.put(token), space.put(offsets)), want)
    assert not want[1].any(), "an expert without rows has a zero gradient"


def _scale_inputs(dtype: str) -> np.ndarray:
    """Exact values of the type, values between neighbours, zero and values past the max."""
    ladder = bs._ladder(dtype) if dtype != "float" else np.array([0.0, 1.0, 1.5, 3.0e38])
    between = (ladder[:-1] + ladder[1:]) / 2
    rng = np.random.default_rng(9)
    spread = np.abs(rng.standard_normal(500)) * np.exp2(rng.integers(-20, 20, 500))
    return np.concatenate([ladder[::max(1, ladder.size // 300)], between[::max(1, between.size // 300)],
                           [0.0, float(ladder.max()) * 1.5, 1e300, 5e-324], spread])


@pytest.mark.parametrize("space", SPACES)
@pytest.mark.parametrize("dtype", ["float", "half", "bfloat16", "fp8_e4m3", "fp8_e8m0"])
def test_scale_round_up_is_the_same_value_everywhere_and_the_smallest_not_below(space: Space, dtype: str) -> None:
    v = _scale_inputs(dtype)
    want = bs.round_up_to(v, dtype)
    _same(bs.round_up_to(space.put(v), dtype), want, exact=True)
    representable = round_to(want, dtype).astype(np.float64)
    np.testing.assert_array_equal(representable, want)
    top = float(bs._ladder(dtype).max()) if dtype != "float" else float(np.finfo(np.float32).max)
    assert ((want >= v) | (v > top)).all()
    if dtype != "float":   # nothing of the type lies in [v, want)
        ladder = bs._ladder(dtype)
        below = ladder[np.maximum(np.searchsorted(ladder, want) - 1, 0)]
        assert ((below < v) | (want == ladder[0]) | (v > top)).all()


QUANTIZE = [
    ("fp8_e4m3", "fp8_e8m0", 1, "float"),
    ("fp4_e2m1", "fp8_e4m3", 1, "float"),
    ("fp8_e5m2", "fp8_e8m0", 0, "float"),
    ("fp6_e2m3", "half", 1, "double"),
    ("int8", "float", 1, "float"),
    ("int32", "bfloat16", 0, "double"),
]


@pytest.mark.parametrize("space", SPACES)
@pytest.mark.parametrize(("y_dtype", "scale_dtype", "axis", "compute"), QUANTIZE)
def test_block_quantize_gives_the_same_codes_and_scales(space: Space, y_dtype, scale_dtype, axis, compute) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 37)) * np.exp2(rng.integers(-6, 6, (6, 1)))   # a partial last block
    x[2] = 0.0                                                               # zero blocks
    y, scale = block_quantize(x, 8, axis, y_dtype, scale_dtype, compute)
    got_y, got_scale = block_quantize(space.put(x), 8, axis, y_dtype, scale_dtype, compute)
    _same(got_scale, scale, exact=True)
    _same(got_y, y, exact=True)
    _same(stored_values(got_y, y_dtype), round_to(y, y_dtype).astype(np.float64), exact=True)


@pytest.mark.parametrize("space", SPACES)
@pytest.mark.parametrize("negative", [False, True])
def test_block_dequantize_in_slabs_equals_one_pass(space: Space, negative: bool, monkeypatch) -> None:
    rng = np.random.default_rng(6)
    x = round_to(rng.standard_normal((19, 5, 12)) * 4, "fp4_e2m1").astype(np.float64)
    scale = np.exp2(rng.integers(-4, 4, (5, 5, 3)).astype(np.float64))   # blocks (4, 1, 4): row 19 is partial
    want = block_dequantize(x, -np.log2(scale) if negative else scale, (4, 1, 4), negative=negative)
    monkeypatch.setattr(bs, "SLAB_ELEMENTS", 120)   # slabs of 8 rows: three of them, the last partial
    sc = space.put(-np.log2(scale) if negative else scale)
    _same(block_dequantize(space.put(x), sc, (4, 1, 4), negative=negative), want, exact=True)
    _same(block_dequantize(x, -np.log2(scale) if negative else scale, (4, 1, 4), negative=negative), want, exact=True)
    np.testing.assert_array_equal(want, (x * np.repeat(np.repeat(scale, 4, 0), 4, 2)[:19].astype(np.float32)))

"""Block-scale quantization: the float64 reference against bit patterns computed by hand from
the format definitions (OCP MX v1.0 element and e8m0 encodings, NVFP4's e4m3 scales) and
hipDNN's scale rule (test_sdk CpuFpReferenceBlockScaleQuantize: amax / max(y) rounded up)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from graph_dicts import load_error

from hipdnn_trace.backends.reference import executor
from hipdnn_trace.backends.reference.ops import block_dequantize, block_quantize, round_to
from hipdnn_trace.backends.reference.ops.blockscale import round_up_to
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.build import GraphBuilder


def stored(values: np.ndarray, dtype: str) -> np.ndarray:
    """The bytes a tensor of ``dtype`` holds for ``values`` (one element per byte)."""
    return round_to(values, dtype).view(np.uint8)


def quantize(x, y_dtype, scale_dtype, block):
    y, scale = block_quantize(np.asarray(x, dtype=float)[None], block, 1, y_dtype, scale_dtype)
    return stored(y, y_dtype)[0], scale[0]


def test_mxfp8_e4m3_block_with_amax_448_has_unit_scale_and_rne_elements() -> None:
    codes, scale = quantize([448.0, 1.0, -3.3, 0.001], "fp8_e4m3", "fp8_e8m0", 4)
    assert stored(scale, "fp8_e8m0").tolist() == [127]                  # e8m0 bits: 2^(127 - 127) = 1
    # 448 = 0 1111 110; 1 = 0 0111 000; -3.3 -> -3.25 = 1 1000 101; 0.001 -> 2^-9 (smallest subnormal) = 0x01
    assert codes.tolist() == [0b0_1111_110, 0b0_0111_000, 0b1_1000_101, 0b0_0000_001]


def test_hipdnns_rounded_up_scale_never_saturates_where_ocps_floor_rule_would() -> None:
    """amax 500: hipDNN stores scale 2 (500 / 448 rounded up to a power of two), y = 250 -> 256.
    The OCP MX floor rule would give scale 2^(8 - 8) = 1 and clamp 500 to 448 (docs/hipdnn-format.md 3.12)."""
    codes, scale = quantize([500.0, 16.0, 0.0, -2.0], "fp8_e4m3", "fp8_e8m0", 4)
    assert stored(scale, "fp8_e8m0").tolist() == [128]
    assert round_to(np.array([256.0, 8.0, 0.0, -1.0]), "fp8_e4m3").view(np.uint8).tolist() == codes.tolist()
    assert codes[0] == 0b0_1111_000                                     # 256 = 1.0 x 2^8, below 448: no saturation


def test_mxfp4_codes_and_scale_bits() -> None:
    codes, scale = quantize([0.1, -0.7, 3.0, 12.0], "fp4_e2m1", "fp8_e8m0", 4)
    assert stored(scale, "fp8_e8m0").tolist() == [128]                  # 12 / 6 = 2 = 2^(128 - 127)
    # x / 2 = 0.05 -> +0 (0000), -0.35 -> -0.5 (1001), 1.5 (0011), 6 (0111)
    assert codes.tolist() == [0b0000, 0b1001, 0b0011, 0b0111]


def test_e2m1_ties_round_to_the_even_code() -> None:
    codes, scale = quantize([6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], "fp4_e2m1", "fp8_e8m0", 8)
    assert scale.tolist() == [1.0]
    # 0.25 -> 0 (code 0), 0.75 -> 1 (code 2), 1.25 -> 1 (2), 1.75 -> 2 (4), 2.5 -> 2 (4), 3.5 -> 4 (6), 5 -> 4 (6)
    assert codes.tolist() == [7, 0, 2, 2, 4, 4, 6, 6]


def test_zero_blocks_store_zeros_with_the_smallest_e8m0_or_a_zero_float_scale() -> None:
    codes, scale = quantize([0.0] * 4, "fp8_e4m3", "fp8_e8m0", 4)
    assert codes.tolist() == [0] * 4 and stored(scale, "fp8_e8m0").tolist() == [0]   # 2^-127
    codes, scale = quantize([0.0] * 4, "fp8_e4m3", "float", 4)
    assert codes.tolist() == [0] * 4 and scale.tolist() == [0.0]


def test_nan_or_inf_input_is_refused_as_hipdnn_does() -> None:
    for bad in (np.nan, np.inf):
        with pytest.raises(UnsupportedError, match="NaN or Inf"):
            quantize([1.0, bad, 0.0, 0.0], "fp8_e4m3", "fp8_e8m0", 4)


def test_nvfp4_scale_is_rounded_up_to_e4m3() -> None:
    """amax 1.8: 1.8 / 6 = 0.3 rounds up to e4m3 0.3125 (0 0101 010), never down to 0.28125."""
    codes, scale = quantize([1.8, -0.9, 0.3, 0.0], "fp4_e2m1", "fp8_e4m3", 4)
    assert stored(scale, "fp8_e4m3").tolist() == [0b0_0101_010]
    # 1.8 / 0.3125 = 5.76 -> 6 (0111); -2.88 -> -3 (1101); 0.96 -> 1 (0010); 0
    assert codes.tolist() == [0b0111, 0b1101, 0b0010, 0b0000]


@pytest.mark.parametrize("dtype", ["float", "half", "bfloat16", "fp8_e4m3", "fp8_e8m0"])
def test_round_up_gives_the_smallest_representable_value_not_below(dtype: str) -> None:
    rng = np.random.default_rng(0)
    v = np.abs(rng.standard_normal(2000)) * np.exp2(rng.integers(-8, 8, 2000))
    up = round_up_to(v, dtype)
    bits = round_to(up, dtype)
    uint = {1: np.uint8, 2: np.uint16, 4: np.uint32}[bits.itemsize]
    assert (bits.astype(np.float64) == up).all(), "representable"
    assert (up >= v).all()
    below = (bits.view(uint) - 1).view(bits.dtype).astype(np.float64)
    assert (below < v).all(), "one step down falls below the value"


def test_int8_elements_round_half_to_even_and_saturate() -> None:
    y, scale = block_quantize(np.array([[127.0, 2.5, -3.5, 0.5]]), 4, 1, "int8", "float")
    assert scale.tolist() == [[1.0]] and y.tolist() == [[127.0, 2.0, -4.0, 0.0]]


def test_dequantize_maps_block_sizes_to_trailing_dims_with_a_partial_last_block() -> None:
    x = np.arange(24, dtype=float).reshape(2, 3, 4)
    scale = np.array([[[1.0, 10.0]], [[100.0, 1000.0]]])              # blocks of [3, 3] over the last two dims
    y = block_dequantize(x, scale, (1, 3, 3))
    assert y[0, 2, 2] == x[0, 2, 2] * 1.0 and y[0, 0, 3] == x[0, 0, 3] * 10.0 and y[1, 1, 3] == x[1, 1, 3] * 1000
    exponents = np.array([[[1.0, -2.0]], [[3.0, 0.0]]])                 # is_negative_scale: y = x * 2^-s
    y = block_dequantize(x, exponents, (1, 3, 3), negative=True)
    assert y[0, 1, 1] == x[0, 1, 1] / 2 and y[0, 1, 3] == x[0, 1, 3] * 4 and y[1, 2, 2] == x[1, 2, 2] / 8


def test_quantize_then_dequantize_is_within_half_a_code_step() -> None:
    x = np.random.default_rng(3).standard_normal((8, 64))
    y, scale = block_quantize(x, 32, 1, "fp8_e4m3", "fp8_e8m0")
    back = block_dequantize(round_to(y, "fp8_e4m3").astype(float), scale, (1, 32))
    # e4m3 has 3 mantissa bits: relative step 2^-3, half of it 2^-4 (subnormals: absolute 2^-10 x scale)
    np.testing.assert_array_less(np.abs(back - x), np.abs(x) * 2.0 ** -4 + np.repeat(scale, 32, 1) * 2.0 ** -10 + 1e-12)


def _graph():
    b = GraphBuilder("q", io="bfloat16")
    b.block_quantize(b.tensor("x", [8, 64]), 32, y_dtype="fp8_e4m3", scale_dtype="fp8_e8m0", name="quantize")
    return b.build()


@pytest.mark.parametrize(("edit", "fragment"), [
    (lambda n, t: n.update(block_size=0), "nodes[0].block_size: must be a positive integer"),
    (lambda n, t: n.update(axis=2), "nodes[0].axis: must be an axis of x's 2 dims"),
    (lambda n, t: t[2].update(dims=[8, 3], strides=[3, 1]), "outputs.scale_tensor_uid: dims [8, 3] must be [8, 2]"),
    (lambda n, t: t[2].update(data_type="int8"), "outputs.scale_tensor_uid: data type int8 is not one"),
])
def test_graph_errors_name_the_json_path(edit, fragment: str) -> None:
    assert fragment in load_error(_graph(), edit, "q.json")


def test_quantize_graph_runs_on_the_reference_with_e8m0_scales() -> None:
    graph = _graph()
    out = executor.evaluate(graph, make_inputs(graph, seed=0))
    scale_uid = graph.nodes[0].outputs["scale"]
    scale = out.stored[scale_uid]
    assert scale.dtype == ml_dtypes.float8_e8m0fnu and np.isfinite(scale.astype(float)).all()
    exponents = np.log2(scale.astype(float))
    assert (exponents == np.round(exponents)).all(), "e8m0 scales are powers of two"


def test_torch_e2m1_encoding_matches_ml_dtypes() -> None:
    torch = pytest.importorskip("torch")
    from hipdnn_trace.backends.torch_ops.blockscale import decode, encode_e2m1

    v = torch.linspace(-7, 7, 20001)
    want = v.numpy().astype(np.float64).astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
    assert (encode_e2m1(v).numpy() == want).all()
    assert (decode(torch.arange(16, dtype=torch.uint8), "fp4_e2m1").numpy() ==
            np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)).all()

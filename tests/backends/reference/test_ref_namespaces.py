"""The reference ops are namespace-generic: run under array-api-strict they equal numpy's.

array-api-strict is a numpy-backed Array API that refuses everything outside the standard
(numpy-only functions, implicit casts, partial indexing, ...), so a graph that evaluates under it
uses only what torch on a GPU also has, through the same code (``--reference-device cuda``). The
GPU itself is checked by the ``cuda`` test at the end (skips here without one).
"""

from __future__ import annotations

import numpy as np
import pytest
from repo_paths import GRAPHS

from hipdnn_trace.backends.reference import executor, xp as shim
from hipdnn_trace.backends.reference.memory import memory_refusal
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.ops import graph_flops

try:   # the strict namespace checks need it; the GPU test at the end does not (the device has no copy)
    import array_api_strict as xs
except ImportError:  # pragma: no cover - depends on the environment
    xs = None
needs_strict = pytest.mark.skipif(xs is None, reason="array-api-strict is not installed (pip install -e '.[dev]')")

#: graphs of every op the reference computes (all run on the device), small enough for a unit test
FAMILY_GRAPHS = [
    "attention/sdpa_gqa_causal_bf16.json",
    "attention/sdpa_backward_gqa_causal_bf16.json",
    "attention/sdpa_backward_varlen_fp16.json",
    "attention/sdpa_paged_gqa_bf16.json",
    "attention/sdpa_sink_window_gqa_fp32.json",
    "attention/sdpa_boolean_mask_bf16.json",
    "attention/sdpa_additive_bias_fp32.json",
    "conv/conv_fwd_asym_pad_dilated_fp32.json",
    "conv/conv_fwd_grouped_nhwc_bf16.json",
    "conv/conv_wgrad_3d_ncdhw_fp16.json",
    "conv/conv_dgrad_nhwc_stride2_fp16.json",
    "conv/conv_wgrad_nhwc_stride2_fp32.json",
    "fused/matmul_bias_gelu_bf16.json",
    "fused/conv_bias_relu_nhwc_fp32.json",
    "matmul/matmul_batched_bf16.json",
    "norm/batchnorm_training_nhwc_bf16.json",
    "norm/batchnorm_backward_nhwc_fp16.json",
    "norm/batchnorm_inference_variance_nhwc_fp32.json",
    "norm/batchnorm_inference_nchw_bf16.json",
    "norm/layernorm_bf16.json",
    "norm/layernorm_backward_bf16.json",
    "norm/rmsnorm_backward_fp16.json",
    "norm/rmsnorm_bf16.json",
    "pointwise/gelu_bf16.json",
    "pointwise/leaky_relu_fp16.json",
    "pointwise/swish_fp32.json",
    "pointwise/bias_add_broadcast_nhwc_bf16.json",
    "reduction/reduce_max_rows_bf16.json",
    "reduction/reduce_sum_spatial_fp32.json",
    "pool/maxpool_2d_index_bf16.json",
    "pool/maxpool_2d_zero_pad_nhwc_fp32.json",
    "pool/maxpool_3d_index_fp16.json",
    "pool/maxpool_backward_2d_fp16.json",
    "pool/avgpool_exclude_padding_3d_fp32.json",
    "pool/avgpool_exclude_padding_backward_3d_bf16.json",
    "pool/avgpool_include_padding_backward_2d_bf16.json",
    "moe/moe_grouped_matmul_none_fp32.json",
    "moe/moe_grouped_matmul_gather_top2_bf16.json",
    "moe/moe_grouped_matmul_scatter_top2_fp16.json",
    "moe/moe_grouped_matmul_backward_bf16.json",
    "moe/moe_mxfp4_experts_fp16.json",
    "blockscale/mxfp4_quantize_bf16.json",
    "blockscale/mxfp8_e4m3_quantize_fp16.json",
    "blockscale/mxfp8_e5m2_quantize_axis0_fp32.json",
    "blockscale/nvfp4_quantize_fp16.json",
    "blockscale/mxfp4_dequantize_fp32.json",
    "blockscale/nvfp4_dequantize_global_scale_bf16.json",
]


@pytest.fixture(autouse=True)
def _standard_2024():
    """The standard version the ops are written against (scalars in where, no 2025 additions)."""
    if xs is None:
        yield
        return
    xs.set_array_api_strict_flags(api_version="2024.12")
    yield
    xs.reset_array_api_strict_flags()


def _graph(rel: str):
    path = GRAPHS / rel
    if not path.exists():
        pytest.skip(f"{rel} is not bundled")
    return load_bytes(path.read_bytes(), str(path))


def _assert_close(expected: dict[int, np.ndarray], got: dict[int, np.ndarray], rtol: float) -> None:
    """Per tensor: same non-finite pattern and values, finite ones within ``rtol`` of the tensor's largest."""
    assert expected.keys() == got.keys()
    for uid, want in expected.items():
        have = got[uid]
        assert have.shape == want.shape and have.dtype == want.dtype, uid
        finite = np.isfinite(want)
        np.testing.assert_array_equal(np.isfinite(have), finite)
        np.testing.assert_array_equal(have[~finite], want[~finite])
        scale = float(np.abs(want[finite]).max(initial=0.0))
        assert float(np.abs(have[finite] - want[finite]).max(initial=0.0)) <= rtol * max(scale, 1e-300), uid


@needs_strict
@pytest.mark.parametrize("rel", FAMILY_GRAPHS)
def test_bundled_graph_under_array_api_strict_equals_numpy(rel):
    graph = _graph(rel)
    assert executor.check(graph) is None
    inputs = make_inputs(graph, 0)
    on_numpy = executor.evaluate(graph, inputs)
    on_strict = executor.evaluate(graph, inputs, xp=xs)
    _assert_close(on_numpy.exact, on_strict.exact, 1e-12)
    assert set(on_strict.placement.values()) == {xs.__name__}   # every op of these families ran there
    assert set(on_numpy.placement.values()) == {"cpu"}


def test_every_op_family_runs_on_the_device() -> None:
    assert executor.DEVICE_OPS == frozenset(executor.HANDLERS)


def test_bundled_families_cover_every_handler() -> None:
    """FAMILY_GRAPHS holds a graph of every op the reference computes, so each is proven generic."""
    covered = {node.type for rel in FAMILY_GRAPHS if (GRAPHS / rel).exists() for node in _graph(rel).nodes}
    assert covered == set(executor.HANDLERS)


@needs_strict
def test_generic_im2col_windows_equal_numpys_strided_view():
    rng = np.random.default_rng(3)
    part = rng.standard_normal((2, 3, 9, 8))
    args = ((3, 2), (2, 1), (3, 4), (2, 2))   # kernel, dilation, out, stride
    want = shim.windows(np, part, *args)
    got = shim.windows(xs, xs.asarray(part), *args)
    np.testing.assert_array_equal(np.from_dlpack(got), want)


@needs_strict
def test_generic_contraction_equals_einsum():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((3, 5, 4)), rng.standard_normal((3, 5, 6))
    got = np.from_dlpack(shim.contract_leading(xs, xs.asarray(a), xs.asarray(b)))
    np.testing.assert_allclose(got, np.einsum("grc,grd->cd", a, b), rtol=1e-13)


def test_auto_is_cpu_and_cuda_is_a_one_line_refusal_without_a_gpu(monkeypatch):
    from hipdnn_trace.backends import installed
    from hipdnn_trace.errors import UserError
    from hipdnn_trace.runs import plan
    from hipdnn_trace.runs.request import RunRequest

    monkeypatch.setattr(installed, "torch_gpu_missing", lambda: "torch sees no GPU")
    monkeypatch.setattr(shim, "cuda_missing", lambda: "torch sees no GPU")
    assert plan.resolve_reference_device(RunRequest(reference_device="auto")) == "cpu"
    with pytest.raises(UserError, match="^--reference-device cuda: torch sees no GPU; use --reference-device cpu$"):
        plan.resolve_reference_device(RunRequest(reference_device="cuda"))
    # nothing to validate: no device is looked for
    assert plan.resolve_reference_device(RunRequest(reference_device="cuda", validate="none")) == "cpu"
    with pytest.raises(RuntimeError, match="torch sees no GPU"):
        shim.Target.of("cuda")


@pytest.mark.gpu
@pytest.mark.cuda
@pytest.mark.slow
def test_cuda_reference_equals_cpu_reference_on_every_bundled_graph():
    """torch float64 on the GPU within 1e-12 relative of numpy on every bundled graph the CPU
    reference computes in about a minute, stored values within one step of their type."""
    compared = 0
    for path in sorted(GRAPHS.rglob("*.json")):
        graph = load_bytes(path.read_bytes(), str(path))
        if executor.check(graph) or memory_refusal(graph) or graph_flops(graph) > 2e11:
            continue
        inputs = make_inputs(graph, 0)
        on_cpu = executor.evaluate(graph, inputs)
        on_gpu = executor.evaluate(graph, inputs, device="cuda")
        _assert_close(on_cpu.exact, on_gpu.exact, 1e-12)
        compared += 1
    assert compared > 100

"""hipDNN graph -> cuDNN frontend plan, checked without a GPU (backends/cudnn_graph.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hipdnn_trace.backends import cudnn_graph as cg
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.sources import expand

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"


def _graph(relative: str):
    path = GRAPHS / relative
    if not path.exists():
        pytest.skip(f"{relative} not present")
    return load_bytes(path.read_bytes(), str(path))


def test_every_sample_graph_translates_with_unique_uids_and_all_outputs() -> None:
    if not GRAPHS.is_dir():
        pytest.skip("graphs/ not present")
    for source in expand([str(GRAPHS)]):
        graph = load_bytes(source.read(), source.name)
        try:
            plan = cg.plan(graph)
        except UnsupportedError as exc:   # only the documented cuDNN limits may refuse a sample graph
            documented = ("reductions write float only", "cuDNN takes an additive bias only",
                          "does not pack sub-byte tensors", "no Python frontend binding")
            assert any(d in str(exc) for d in documented), (source.name, exc)
            continue
        uids = [t.uid for t in plan.inputs] + [o.uid for o in plan.outputs]
        assert len(uids) == len(set(uids)) and min(uids) >= 1, source.name
        produced = {o.hipdnn_uid for o in plan.outputs if not o.virtual}
        assert {t.uid for t in graph.output_tensors} <= produced, source.name
        ranks = {len(t.dims) for t in plan.inputs} | {len(o.dims) for o in plan.outputs}
        assert len(ranks) == 1, f"{source.name}: cuDNN wants one rank per graph, got {ranks}"


def test_conv_keeps_pads_strides_dilation_and_flags_fp32() -> None:
    plan = cg.plan(_graph("conv/conv_fwd_asym_pad_dilated_fp32.json"))
    (op,) = plan.ops
    graph = _graph("conv/conv_fwd_asym_pad_dilated_fp32.json")
    node = graph.nodes[0]
    assert op.method == "conv_fprop" and set(op.tensors) == {"image", "weight"}
    assert op.attrs["pre_padding"] == node.params["pre_padding"]
    assert op.attrs["post_padding"] == node.params["post_padding"]
    assert op.attrs["dilation"] == node.params["dilation"]
    assert plan.fp32_math


def test_dgrad_and_wgrad_use_the_frontend_port_names() -> None:
    assert cg.plan(_graph("conv/conv_dgrad_nchw_fp16.json")).ops[0].tensors.keys() == {"loss", "filter"}
    wgrad = cg.plan(_graph("conv/conv_wgrad_nchw_fp16.json"))
    assert wgrad.ops[0].tensors.keys() == {"image", "loss"} and not wgrad.fp32_math


def test_fused_graph_keeps_intermediates_virtual() -> None:
    plan = cg.plan(_graph("fused/conv_bias_relu_nhwc_fp16.json"))
    assert [o.method for o in plan.ops] == ["conv_fprop", "add", "relu"]
    virtual = [o for o in plan.outputs if o.virtual]
    assert [o.name for o in virtual] == ["conv_out", "biased"] and {o.dtype for o in virtual} == {"FLOAT"}
    assert [o.name for o in plan.outputs if not o.virtual] == ["y"]


def test_two_d_matmul_is_lifted_to_a_batch_of_one() -> None:
    plan = cg.plan(_graph("matmul/matmul_2d_fp16.json"))
    a = next(t for t in plan.inputs if t.name == "a")
    assert len(a.dims) == 3 and a.dims[0] == 1


def test_four_d_matmul_batch_dims_are_collapsed() -> None:
    b = GraphBuilder("attn", io="half")
    q = b.tensor("q", [2, 4, 16, 8])
    k = b.tensor("k", [2, 4, 8, 16], strides=[512, 128, 1, 8])
    b.matmul(q, k, out="s")
    plan = cg.plan(b.build())
    dims = {t.name: (t.dims, t.strides) for t in [*plan.inputs, *plan.outputs]}
    assert dims["q"] == ((8, 16, 8), (128, 8, 1))
    assert dims["k"] == ((8, 8, 16), (128, 1, 8))
    assert any("collapsed" in n for n in plan.notes)


def test_hipdnn_grouped_matmul_batches_are_unsupported_with_a_reason() -> None:
    b = GraphBuilder("grouped")
    a = b.tensor("a", [8, 4, 4])
    c = b.tensor("b", [2, 4, 4])
    b.matmul(a, c, out="c")
    with pytest.raises(UnsupportedError, match="grouped batches"):
        cg.plan(b.build())


def test_channels_last_permutation_puts_the_innermost_axis_in_the_channel_slot() -> None:
    assert cg.channels_last_permutation((4, 16, 8, 8), (1024, 64, 8, 1)) == (0, 3, 1, 2)     # NCHW
    assert cg.channels_last_permutation((4, 16, 8, 8), (1024, 1, 128, 16)) == (0, 1, 2, 3)   # NHWC
    assert cg.channels_last_permutation((1, 1, 64, 256), (16384, 16384, 256, 1)) == (2, 3, 0, 1)
    assert cg.unit_strides_packed((64, 256, 1, 1), (256, 1, 16384, 16384)) == (256, 1, 256, 256)


def test_pointwise_graph_is_shown_channels_last_without_moving_memory() -> None:
    graph = _graph("pointwise/relu_clip_fp32.json")
    plan = cg.plan(graph)
    x = next(t for t in plan.inputs if t.name == "x")
    assert x.dims == (4, 16, 16, 16) and x.strides == (4096, 1, 256, 16)
    assert plan.ops[0].attrs == {"lower_clip": 0.0, "upper_clip": 6.0}


def test_nchw_batchnorm_inference_becomes_pointwise_and_nhwc_stays_native() -> None:
    plan = cg.plan(_graph("norm/batchnorm_inference_nchw_fp16.json"))
    assert [o.method for o in plan.ops] == ["sub", "mul", "mul", "add"]
    b = GraphBuilder("bn_nhwc", io="half")
    x = b.tensor("x", [2, 8, 4, 4], layout="NHWC")
    stats = [b.tensor(n, [1, 8, 1, 1], dtype="float") for n in ("mean", "inv_variance", "scale", "bias")]
    b.batchnorm_inference(x, *stats)
    assert [o.method for o in cg.plan(b.build()).ops] == ["batchnorm_inference"]


def test_low_precision_reduction_output_is_unsupported_with_the_reason() -> None:
    with pytest.raises(UnsupportedError, match="reductions write float only"):
        cg.plan(_graph("reduction/reduce_sum_spatial_bf16.json"))


def test_spatial_reduction_becomes_a_row_reduction() -> None:
    plan = cg.plan(_graph("reduction/reduce_sum_spatial_fp32.json"))
    (op,) = plan.ops
    x = next(t for t in plan.inputs if t.name == "x")
    y = plan.output(op.outputs[0])
    assert op.attrs["mode"] == cg.EnumValue("reduction_mode", "ADD")
    assert (x.dims, x.strides) == ((64, 256, 1, 1), (256, 1, 256, 256))   # [N*C, H*W]
    assert y.dims == (64, 1, 1, 1)


def test_coalesce_merges_only_axes_every_tensor_addresses_as_one() -> None:
    shapes = {1: ((4, 16, 16, 16), (4096, 256, 16, 1)), 2: ((4, 16, 1, 1), (16, 1, 1, 1))}
    assert cg.coalesce(shapes) == {1: ((64, 256), (256, 1)), 2: ((64, 1), (1, 1))}
    per_channel = {1: ((4, 16, 8), (128, 8, 1)), 2: ((1, 16, 1), (16, 1, 1))}
    merged = cg.coalesce(per_channel)    # broadcast and full axes never merge: nothing to do
    assert merged[1] == ((4, 16, 8), (128, 8, 1)) and merged[2][0] == (1, 16, 1) and merged[2][1][1] == 1


def test_matmul_batch_broadcast_is_made_explicit_with_stride_zero() -> None:
    plan = cg.plan(_graph("matmul/matmul_batched_broadcast_bt_fp32.json"))
    b = next(t for t in plan.inputs if t.name == "b")
    assert b.dims[0] == 4 and b.strides[0] == 0


def test_training_batchnorm_scalars_are_pass_by_value() -> None:
    plan = cg.plan(_graph("norm/batchnorm_training_nhwc_fp16.json"))
    (op,) = plan.ops
    eps = next(t for t in plan.inputs if t.key == op.tensors["epsilon"])
    momentum = next(t for t in plan.inputs if t.key == op.tensors["momentum"])
    assert eps.is_scalar and eps.by_value == pytest.approx(1e-5) and eps.dtype == "FLOAT"
    assert momentum.by_value == pytest.approx(0.1)
    assert len(op.outputs) == 5 and all(op.outputs)


def test_layernorm_statistics_follow_normalized_dim_count() -> None:
    plan = cg.plan(_graph("norm/layernorm_fp16.json"))
    (op,) = plan.ops
    assert op.attrs["norm_forward_phase"] == cg.EnumValue("norm_forward_phase", "TRAINING")
    mean = plan.output(op.outputs[1])
    assert mean.dims[-1] == 1 and mean.name == "layernorm_mean"


def test_backward_activations_read_dy_from_in_0() -> None:
    b = GraphBuilder("relu_bwd")
    dy = b.tensor("dy", [2, 8, 4, 4])
    x = b.tensor("x", [2, 8, 4, 4])
    b.pointwise("relu_bwd", dy, x, out="dx")
    plan = cg.plan(b.build())
    op = plan.ops[0]
    names = {k: next(t.name for t in plan.inputs if t.key == v) for k, v in op.tensors.items()}
    assert op.method == "relu_backward" and names == {"loss": "dy", "input": "x"}


@pytest.mark.parametrize("build,reason", [
    (lambda b: b.pointwise("elu_fwd", b.tensor("x", [2, 3, 4, 4]), elu_alpha=0.5), "no alpha"),
    (lambda b: b.conv_fwd(b.tensor("x", [1, 4, 8]), b.tensor("w", [4, 4, 3])), "rank 4 or 5"),
])
def test_inexpressible_graphs_say_why(build, reason: str) -> None:
    b = GraphBuilder("bad")
    build(b)
    with pytest.raises(UnsupportedError, match=reason):
        cg.plan(b.build())


def test_unknown_data_type_is_unsupported() -> None:
    b = GraphBuilder("fnuz", io="fp8_e4m3_fnuz")
    b.pointwise("identity", b.tensor("x", [2, 2, 2, 2]), out="y")
    with pytest.raises(UnsupportedError, match="fp8_e4m3_fnuz has no cuDNN equivalent"):
        cg.plan(b.build())

"""The graph builder, and the sample graphs in graphs/ that it generates."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from graph_samples import GRAPHS

from hipdnn_trace.backends.reference.executor import check, evaluate
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.errors import GraphError
from hipdnn_trace.graph import norms, ops, pointwise as pointwise_spec
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.load import load_bytes, load_file
from hipdnn_trace.graph.write import dumps, graph_to_json


def load_generator():
    spec = importlib.util.spec_from_file_location("graphs_generate", GRAPHS / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATOR = load_generator()
GENERATED = GENERATOR.generate()
SMALL = sorted(p for p in GENERATED if not p.startswith("perf/"))
PERF = sorted(p for p in GENERATED if p.startswith("perf/"))


# ---------------------------------------------------------------- builder

def test_built_graph_is_what_its_file_gives() -> None:
    b = GraphBuilder("g", io="half", compute="float", intermediate="float")
    x = b.tensor("x", [2, 4, 5, 5], layout="NHWC")
    w = b.tensor("w", [8, 4, 3, 3], layout="NHWC")
    y = b.conv_fwd(x, w, pad=1, virtual=True)
    b.pointwise("relu_fwd", y, out="z")
    graph = b.build()
    again = load_bytes(dumps(graph).encode(), "g")
    assert graph_to_json(again) == graph_to_json(graph)
    assert [t.uid for t in graph.tensors] == [1, 2, 3, 4]
    y_t, z_t = graph.tensors[2], graph.tensors[3]
    assert y_t.virtual and y_t.data_type == "float"          # virtual: intermediate type
    assert not z_t.virtual and z_t.data_type == "half"       # output: io type
    assert y_t.layout == z_t.layout == "NHWC"                # outputs follow x's layout
    assert graph.nodes[0].compute_data_type == "float"


@pytest.mark.parametrize("x_dims,w_dims,kw,out", [
    ([1, 3, 7, 7], [4, 3, 3, 3], {}, [1, 4, 5, 5]),
    ([1, 3, 7, 7], [4, 3, 3, 3], {"pad": 1, "stride": 2}, [1, 4, 4, 4]),
    ([1, 3, 7, 9], [4, 3, 3, 3], {"pad": [1, 0], "post_pad": [0, 2], "dilation": [1, 2]}, [1, 4, 6, 7]),
    ([2, 8, 6, 6], [16, 2, 1, 1], {}, [2, 16, 6, 6]),                 # 4 groups
    ([1, 2, 5, 5, 5], [3, 2, 3, 3, 3], {"pad": 1}, [1, 3, 5, 5, 5]),  # 3-D
])
def test_conv_output_dims_are_inferred(x_dims, w_dims, kw, out) -> None:
    b = GraphBuilder("c")
    y = b.conv_fwd(b.tensor("x", x_dims), b.tensor("w", w_dims), **kw)
    assert list(y.dims) == out
    graph = b.build()
    p = graph.nodes[0].params
    assert graph.nodes[0].param_sections["stride"] == "parameters"
    assert p["conv_mode"] == "CROSS_CORRELATION" and len(p["pre_padding"]) == len(x_dims) - 2


def test_conv_backward_ops() -> None:
    b = GraphBuilder("bwd")
    dy = b.tensor("dy", [2, 8, 4, 4], layout="NHWC")
    w = b.tensor("w", [8, 4, 3, 3], layout="NHWC")
    dx = b.conv_dgrad(dy, w, x_dims=[2, 4, 8, 8], pad=1, stride=2)
    x = b.tensor("x", [2, 4, 8, 8], layout="NHWC")
    dw = b.conv_wgrad(x, dy, w_dims=[8, 4, 3, 3], pad=1, stride=2)
    graph = b.build()
    assert dx.layout == "NHWC" and dw.layout == "NHWC"
    assert [n.type for n in graph.nodes] == ["ConvolutionBwdAttributes", "ConvolutionWrwAttributes"]
    bad = GraphBuilder("bad")
    bad.conv_dgrad(bad.tensor("dy", [2, 8, 4, 4]), bad.tensor("w", [8, 4, 3, 3]), x_dims=[2, 4, 8, 8])
    with pytest.raises(GraphError, match="do not match the convolution's output"):
        bad.build()


def test_matmul_batch_broadcast_and_transposed_b() -> None:
    b = GraphBuilder("m")
    a = b.tensor("a", [6, 5, 3])
    bt = b.tensor("b", [2, 3, 4], strides=[12, 1, 3])   # stored transposed
    c = b.matmul(a, bt)
    assert list(c.dims) == [6, 5, 4] and c.strides == (20, 4, 1)
    graph = b.build()
    assert ops.graph_flops(graph) == 2 * 6 * 5 * 4 * 3
    with pytest.raises(ValueError, match="one rank"):
        b.matmul(a, b.tensor("v", [3, 4]))


def test_pointwise_writes_every_key_null_when_unset() -> None:
    b = GraphBuilder("p")
    x = b.tensor("x", [2, 3, 4, 4], layout="NHWC")
    bias = b.tensor("bias", [1, 3, 1, 1])
    y = b.pointwise("add", x, bias)
    assert list(y.dims) == [2, 3, 4, 4] and y.layout == "NHWC"
    node = graph_to_json(b.build())["nodes"][0]
    keys = set(node["inputs"])
    assert set(pointwise_spec.POINTWISE_OPTIONS) | {"in_0_tensor_uid", "in_1_tensor_uid", "in_2_tensor_uid"} == keys
    assert node["inputs"]["in_2_tensor_uid"] is None and node["inputs"]["relu_lower_clip"] is None
    assert node["inputs"]["operation"] == "add" and node["outputs"] == {"out_0_tensor_uid": y.uid}


def test_norms_and_reduction() -> None:
    b = GraphBuilder("n", io="half")
    x = b.tensor("x", [2, 4, 3, 3])
    c = lambda name: b.tensor(name, [1, 4, 1, 1], dtype="float")
    bn = b.batchnorm(x, c("s"), c("b"), momentum=0.2, prev_running_mean=c("rm"), prev_running_variance=c("rv"))
    assert bn.next_running_variance is not None and bn.mean.data_type == "float"
    bwd = b.batchnorm_backward(x, x, c("s2"), mean=bn.mean, inv_variance=bn.inv_variance)
    assert list(bwd.dscale.dims) == [1, 4, 1, 1]
    inf = b.batchnorm_inference(x, c("m"), c("iv"), c("s3"), c("b3"))
    t = b.tensor("t", [2, 5, 8])
    ln = b.layernorm(t, b.tensor("g", [1, 1, 8]), b.tensor("beta", [1, 1, 8]))
    assert list(ln.mean.dims) == [2, 5, 1]
    ln_inf = b.layernorm(t, b.tensor("g2", [1, 5, 8]), normalized_dim_count=2, phase="INFERENCE")
    assert ln_inf.mean is None
    rms = b.rmsnorm(t, b.tensor("g3", [1, 1, 8]))
    assert list(rms.inv_rms.dims) == [2, 5, 1]
    r = b.reduction("add", inf, [2, 4, 1, 1])
    graph = b.build()
    eps = [v for v in graph.value_tensors if v.name.endswith("epsilon")]
    assert eps and all(v.value_type == "Float32Value" for v in eps)
    momentum = next(v for v in graph.value_tensors if v.name.endswith("momentum"))
    assert momentum.value == 0.2
    reduce_json = graph_to_json(graph)["nodes"][-1]
    assert reduce_json["mode"] == "add" and reduce_json["out_tensor_uid"] == r.uid   # flat layout
    assert check(graph) is None
    inputs = make_inputs(graph, 1)
    assert all(np.isfinite(a.astype(np.float64)).all() for a in evaluate(graph, inputs).stored.values())



@pytest.mark.parametrize("raw, phase", [(1, "INFERENCE"), (2, "TRAINING"), (0, "NOT_SET"), (7, "NOT_SET"),
                                        ("inference", "INFERENCE"), (" Training ", "TRAINING"), (None, "NONE")])
def test_norm_forward_phase_reads_hipdnn_ints_and_any_case(raw, phase) -> None:
    b = GraphBuilder("phase")
    t = b.tensor("t", [2, 5, 8])
    b.layernorm(t, b.tensor("g", [1, 1, 8]))
    node = b.build().nodes[0]
    node.params["forward_phase"] = raw
    assert norms.norm_forward_phase(node) == phase
    del node.params["forward_phase"]
    assert norms.norm_forward_phase(node) == "NOT_SET"


def test_pointwise_mode_is_the_arity_key_in_any_case() -> None:
    b = GraphBuilder("mode")
    x = b.tensor("x", [2, 3])
    b.pointwise("max_op", x, x)
    node = b.build().nodes[0]
    node.params["operation"] = " MAX_OP"
    mode = pointwise_spec.pointwise_mode(node)
    assert mode == "max_op" and pointwise_spec.POINTWISE_ARITY[mode] == 2

def test_builder_misuse_is_a_value_error() -> None:
    b = GraphBuilder("a")
    other = GraphBuilder("b").tensor("x", [2, 2])
    with pytest.raises(ValueError, match="not a tensor of graph 'a'"):
        b.pointwise("abs", other)
    with pytest.raises(ValueError, match="rank 4"):
        b.tensor("x", [2, 3], layout="NHWC")
    with pytest.raises(ValueError, match="unknown layout"):
        b.tensor("x", [2, 3], layout="diagonal")
    with pytest.raises(ValueError, match="not a hipDNN data type"):
        b.tensor("x", [2], dtype="float128")
    with pytest.raises(ValueError, match="do not broadcast"):
        b.pointwise("add", b.tensor("p", [2, 3]), b.tensor("q", [3, 2]))
    with pytest.raises(ValueError, match="2 values"):
        b.conv_fwd(b.tensor("x4", [1, 1, 4, 4]), b.tensor("w4", [1, 1, 3, 3]), pad=[1, 1, 1])


def test_duplicate_names_are_made_unique() -> None:
    b = GraphBuilder("d")
    x1, x2 = b.tensor("x", [2]), b.tensor("x", [2])
    assert (x1.name, x2.name) == ("x", "x_1")


# ---------------------------------------------------------------- samples

def test_committed_graphs_equal_the_generator_output() -> None:
    committed = {str(p.relative_to(GRAPHS)) for p in GRAPHS.rglob("*.json")}
    assert committed == set(GENERATED), "run: python graphs/generate.py"
    for rel, text in GENERATED.items():
        assert (GRAPHS / rel).read_text() == text, f"{rel} is stale: run python graphs/generate.py"


def test_generator_is_deterministic() -> None:
    assert load_generator().generate() == GENERATED


def test_sample_set_covers_the_issue() -> None:
    stems = {Path(p).stem.rsplit("_", 1)[0] for p in SMALL}
    for needed in ("conv_fwd_nchw", "conv_fwd_nhwc_stride2", "conv_fwd_grouped_nhwc", "conv_fwd_3d_ncdhw",
                   "conv_fwd_asym_pad_dilated", "conv_dgrad_nchw", "conv_dgrad_nhwc_stride2",
                   "conv_wgrad_nchw", "conv_wgrad_nhwc_stride2", "matmul_2d", "matmul_batched",
                   "relu_clip", "bias_add_broadcast_nhwc", "gelu", "batchnorm_inference_nchw",
                   "batchnorm_training_nhwc", "conv_bias_relu_nhwc"):
        assert needed in stems
    for stem in stems:
        assert {f"{stem}_{p}" for p in ("fp32", "fp16", "bf16")} <= {Path(p).stem for p in SMALL}
    names = [json.loads(GENERATED[p])["name"] for p in GENERATED]
    assert len(names) == len(set(names)), "graph names must be unique"


@pytest.mark.parametrize("rel", SMALL)
def test_small_sample_runs_on_the_reference(rel: str) -> None:
    graph = load_file(GRAPHS / rel)
    assert check(graph) is None
    assert sum(t.numel for t in graph.tensors) < 100_000, "keep graphs/ small: the CPU runs it all"
    inputs = make_inputs(graph, 0)
    result = evaluate(graph, inputs)
    assert {t.uid for t in graph.output_tensors} <= set(result.stored)
    for uid, arr in result.stored.items():
        assert arr.shape == graph.tensor(uid).dims
        assert np.isfinite(arr.astype(np.float64)).all(), f"{rel}: tensor {uid} not finite"


@pytest.mark.parametrize("rel", PERF)
def test_perf_sample_loads_with_gpu_sizes(rel: str) -> None:
    graph = load_file(GRAPHS / rel)
    assert graph.io_data_type in ("half", "bfloat16")
    assert ops.graph_flops(graph) > 5e7 or ops.graph_bytes(graph) > 2e7

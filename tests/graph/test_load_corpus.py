"""A malformed corpus generated from the bundled graphs: every case is refused at load, the same way
by ``inspect`` and ``run``.

Each case is one mutation of a valid bundled graph (one base per modelled op type): generic ones
applied to every base (every output virtual, a non-float compute type, an extra port, a dangling
uid, a missing port, each option given a value of the wrong JSON type) and per-family shape ones
(a conv whose channels do not divide, a layernorm scale or mean of the wrong size, ...). For every
case: ``inspect`` exits 1 with one stderr line naming the file and the JSON path, no traceback;
``run``'s per-graph path (``run_graph``, in process) records the same message; one ``run`` over a
sample of the corpus exits 1 with every graph an error row carrying that message; a handful go through the
CLI as a subprocess too.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from math import prod
from pathlib import Path
from typing import Any

import pytest

from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings, run_graph
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.cli import main
from hipdnn_trace.graph.ops import spec
from hipdnn_trace.graph.semantics import FLOAT_COMPUTE_OPS
from hipdnn_trace.graph.sources import GraphSource
from hipdnn_trace.markers import Markers
from hipdnn_trace.results.rundir import load_run

REPO = Path(__file__).resolve().parents[2]
GRAPHS = REPO / "graphs"

#: one valid bundled graph per modelled op type (its first node is the op)
BASES = (
    "conv/conv_fwd_nchw_fp32.json", "conv/conv_fwd_grouped_nhwc_fp32.json", "conv/conv_dgrad_nchw_fp32.json",
    "conv/conv_wgrad_3d_ncdhw_fp32.json", "matmul/matmul_batched_fp32.json", "fused/matmul_bias_gelu_fp32.json",
    "pointwise/bias_add_broadcast_nhwc_fp32.json", "pointwise/relu_clip_fp32.json",
    "norm/batchnorm_inference_nchw_fp32.json", "norm/batchnorm_inference_variance_nhwc_fp32.json",
    "norm/batchnorm_training_nhwc_fp32.json", "norm/batchnorm_backward_nhwc_fp32.json", "norm/layernorm_fp32.json",
    "norm/layernorm_backward_fp32.json", "norm/rmsnorm_fp32.json", "norm/rmsnorm_backward_fp32.json",
    "reduction/reduce_max_rows_fp32.json", "pool/avgpool_exclude_padding_3d_fp32.json",
    "pool/avgpool_exclude_padding_backward_3d_fp32.json", "attention/sdpa_additive_bias_fp32.json",
    "attention/sdpa_backward_gqa_causal_fp32.json", "blockscale/mxfp4_quantize_fp32.json",
    "blockscale/mxfp4_dequantize_fp32.json", "moe/moe_grouped_matmul_gather_top2_fp32.json",
    "moe/moe_grouped_matmul_backward_fp32.json",
)
Mutation = Callable[[dict[str, Any]], None]
#: (case id, base, mutation, fragments every message must hold: the JSON path and the problem)
Case = tuple[str, str, Mutation, tuple[str, ...]]


def _base(rel: str) -> dict[str, Any]:
    return json.loads((GRAPHS / rel).read_text())


def _tensor(g: dict[str, Any], name: str) -> tuple[int, dict[str, Any]]:
    return next((i, t) for i, t in enumerate(g["tensors"]) if t["name"] == name)


def _where(node: dict[str, Any], key: str) -> str:
    """JSON path of ``key`` inside node 0 (a section or the node itself)."""
    for section in ("inputs", "outputs", "parameters", "attributes"):
        if key in node.get(section, {}):
            return f"$.nodes[0].{section}.{key}"
    return f"$.nodes[0].{key}"


def _set(node: dict[str, Any], key: str, value: Any) -> None:
    for section in ("inputs", "outputs", "parameters", "attributes"):
        if key in node.get(section, {}):
            node[section][key] = value
            return
    node[key] = value


def _delete(node: dict[str, Any], key: str) -> None:
    for section in ("inputs", "outputs", "parameters", "attributes"):
        if key in node.get(section, {}):
            del node[section][key]
            return
    del node[key]


def dims(name: str, new: list[int]) -> Mutation:
    """Tensor ``name`` gets dims ``new`` (packed row-major strides)."""
    def mutate(g: dict[str, Any]) -> None:
        t = _tensor(g, name)[1]
        t["dims"] = new
        t["strides"] = [prod(new[i + 1:]) for i in range(len(new))]
    return mutate


def option(key: str, value: Any) -> Mutation:
    return lambda g: _set(g["nodes"][0], key, value)


def drop(key: str) -> Mutation:
    return lambda g: _delete(g["nodes"][0], key)


# ------------------------------------------------------------ generic mutations, every base

def _wrong_type(value: Any) -> Any:
    """A value of another JSON type than ``value`` that no option of its kind takes."""
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return ",".join(map(str, value)) or "none"
    return [value]


def _options(node: dict[str, Any]) -> list[tuple[str, Any]]:
    s = spec(node["type"])
    assert s is not None
    out = []
    for key in s.options:
        for section in ("inputs", "outputs", "parameters", "attributes"):
            if key in node.get(section, {}):
                out.append((key, node[section][key]))
        if key in node:
            out.append((key, node[key]))
    return [(k, v) for k, v in out if v is not None and not k.endswith("_tensor_uid")]


def _port_section(node: dict[str, Any]) -> str | None:
    """The section holding node 0's input ports (None: flat on the node)."""
    return "inputs" if any(k.endswith("_tensor_uid") for k in node.get("inputs", {})) else None


def generic_cases(rel: str) -> list[Case]:
    g = _base(rel)
    node = g["nodes"][0]
    op = node["type"].removesuffix("Attributes")
    s = spec(node["type"])
    assert s is not None
    stem = rel.split("/")[1].removesuffix(".json")
    cases: list[Case] = []

    def all_virtual(g: dict[str, Any]) -> None:
        written = {v for n in g["nodes"] for sec in ("outputs",) for k, v in n.get(sec, {}).items()
                   if k.endswith("_tensor_uid") and isinstance(v, int)}
        written |= {v for n in g["nodes"] for k, v in n.items() if k.endswith("_tensor_uid") and isinstance(v, int)
                    and k.removesuffix("_tensor_uid") in spec(n["type"]).all_outputs}
        for t in g["tensors"]:
            if t["uid"] in written:
                t["virtual"] = True
    cases.append((f"{stem}-all_outputs_virtual", rel, all_virtual,
                  ("$.tensors[", ".virtual", "every tensor the graph writes is virtual")))

    if node["type"] in FLOAT_COMPUTE_OPS:
        cases.append((f"{stem}-compute_int8", rel, option("compute_data_type", "int8"),
                      ("$.nodes[0].compute_data_type", "compute type int8 is not a floating type")))

        def graph_boolean(g: dict[str, Any]) -> None:
            g["compute_data_type"] = "boolean"
            g["nodes"][0]["compute_data_type"] = "unset"
        cases.append((f"{stem}-graph_compute_boolean", rel, graph_boolean,
                      ("$.compute_data_type", "compute type boolean is not a floating type")))

    section = _port_section(node)
    first_port = s.inputs[0] + "_tensor_uid"
    extra_path = f"$.nodes[0].{section}.bogus_tensor_uid" if section else "$.nodes[0].bogus_tensor_uid"

    def extra_port(g: dict[str, Any]) -> None:
        n = g["nodes"][0]
        (n[section] if section else n)["bogus_tensor_uid"] = g["tensors"][0]["uid"]
    cases.append((f"{stem}-extra_port", rel, extra_port, (extra_path, f"unknown field 'bogus_tensor_uid' for {op}")))
    cases.append((f"{stem}-dangling_uid", rel, option(first_port, 9999),
                  (_where(node, first_port), "uid 9999 is not a tensor of the graph")))
    cases.append((f"{stem}-missing_port", rel, drop(first_port), (f"{op} needs input {first_port}",)))

    def bad_dtype(g: dict[str, Any]) -> None:
        g["tensors"][-1]["data_type"] = "float33"
    cases.append((f"{stem}-unknown_dtype", rel, bad_dtype,
                  (f"$.tensors[{len(g['tensors']) - 1}].data_type", "unknown data type 'float33'")))
    for key, value in _options(node):
        cases.append((f"{stem}-option_{key}_wrong_type", rel, option(key, _wrong_type(value)),
                      (_where(node, key), f"{op} option {key} must be")))
    return cases


# ------------------------------------------------------------ per-family shape and value rules

SPECIFIC: list[Case] = [
    ("conv_channels_not_multiple", "conv/conv_fwd_nchw_fp32.json", dims("x", [2, 12, 12, 12]),
     ("$.nodes[0].inputs.w_tensor_uid", "x has 12 channels, not a multiple of w's 8 channels per group")),
    ("conv_output_dims", "conv/conv_fwd_nchw_fp32.json", dims("y", [2, 16, 11, 12]),
     ("$.nodes[0].outputs.y_tensor_uid", "do not match the convolution's output")),
    ("conv_filter_k_vs_y", "conv/conv_fwd_nchw_fp32.json", dims("w", [17, 8, 3, 3]),
     ("$.nodes[0].outputs.y_tensor_uid", "do not match the convolution's output")),
    ("conv_stride_length", "conv/conv_fwd_nchw_fp32.json", option("stride", [1]),
     ("$.nodes[0].parameters.stride", "must be a list of 2 integers")),
    ("conv_zero_dilation", "conv/conv_fwd_nchw_fp32.json", option("dilation", [0, 1]),
     ("$.nodes[0].parameters.stride", "stride and dilation must be >= 1")),
    ("conv_mode_unknown", "conv/conv_fwd_nchw_fp32.json", option("conv_mode", "SIDEWAYS"),
     ("$.nodes[0].parameters.conv_mode", "unknown conv_mode 'SIDEWAYS'")),
    ("conv_groups_k", "conv/conv_fwd_grouped_nhwc_fp32.json", dims("w", [18, 4, 3, 3]),
     ("$.nodes[0].inputs.w_tensor_uid", "18 output channels not divisible by 4 groups")),
    ("conv_dgrad_dx_channels", "conv/conv_dgrad_nchw_fp32.json", dims("dx", [2, 12, 12, 12]),
     ("$.nodes[0].inputs.w_tensor_uid", "dx has 12 channels, not a multiple of w's 8")),
    ("conv_wgrad_dw_dims", "conv/conv_wgrad_3d_ncdhw_fp32.json", dims("dw", [8, 4, 3, 3, 2]),
     ("$.nodes[0].inputs.dy_tensor_uid", "do not match the convolution's output")),
    ("matmul_inner", "matmul/matmul_batched_fp32.json", dims("b", [8, 63, 48]),
     ("$.nodes[0].inputs.b_tensor_uid", "inner dims differ")),
    ("matmul_output", "matmul/matmul_batched_fp32.json", dims("c", [8, 32, 47]),
     ("$.nodes[0].outputs.c_tensor_uid", "do not match a @ b")),
    ("matmul_batch", "matmul/matmul_batched_fp32.json", dims("b", [3, 64, 48]),
     ("$.nodes[0].inputs.b_tensor_uid", "do not broadcast")),
    ("matmul_rank", "matmul/matmul_batched_fp32.json", dims("b", [64, 48]),
     ("$.nodes[0].inputs.a_tensor_uid", "matmul tensors need the same rank")),
    ("pointwise_broadcast", "pointwise/bias_add_broadcast_nhwc_fp32.json", dims("bias", [1, 5, 1, 1]),
     ("$.nodes[0].inputs.in_1_tensor_uid", "do not broadcast to the output")),
    ("pointwise_arity", "pointwise/bias_add_broadcast_nhwc_fp32.json", option("in_1_tensor_uid", None),
     ("$.nodes[0].inputs", "add takes 2 input(s)")),
    ("pointwise_mode", "pointwise/relu_clip_fp32.json", option("operation", "relu"),
     ("$.nodes[0].inputs.operation", "unknown pointwise operation 'relu'")),
    ("pointwise_clip_string", "pointwise/relu_clip_fp32.json", option("relu_upper_clip", "6"),
     ("$.nodes[0].inputs.relu_upper_clip", "must be a finite number or null, got '6'")),
    ("pointwise_output_dims", "pointwise/relu_clip_fp32.json", dims("y", [4, 16, 16, 15]),
     ("$.nodes[0].inputs.in_0_tensor_uid", "do not broadcast to the output")),
    ("bn_inference_mean", "norm/batchnorm_inference_nchw_fp32.json", dims("mean", [1, 8, 1, 1]),
     ("$.nodes[0].inputs.mean_tensor_uid", "expected one per channel (16)")),
    ("bn_inference_y", "norm/batchnorm_inference_nchw_fp32.json", dims("y", [4, 16, 16, 8]),
     ("$.nodes[0].outputs.y_tensor_uid", "differ from x's")),
    ("bn_variance_epsilon", "norm/batchnorm_inference_variance_nhwc_fp32.json",
     dims("batchnorm_inference_epsilon", [2]), ("$.nodes[0].inputs.epsilon_tensor_uid", "epsilon is one value")),
    ("bn_training_momentum", "norm/batchnorm_training_nhwc_fp32.json", dims("batchnorm_momentum", [3]),
     ("$.nodes[0].inputs.momentum_tensor_uid", "momentum is one value, this tensor has 3")),
    ("bn_training_running_mean", "norm/batchnorm_training_nhwc_fp32.json", dims("running_mean", [1, 15, 1, 1]),
     ("$.nodes[0].inputs.prev_running_mean_tensor_uid", "expected one per channel (16)")),
    ("bn_training_saved_stat", "norm/batchnorm_training_nhwc_fp32.json", dims("batchnorm_inv_variance", [1, 4, 1, 1]),
     ("$.nodes[0].outputs.inv_variance_tensor_uid", "expected one per channel (16)")),
    ("bn_backward_half_saved", "norm/batchnorm_backward_nhwc_fp32.json", drop("mean_tensor_uid"),
     ("$.nodes[0].inputs.inv_variance_tensor_uid", "inv_variance is given without mean")),
    ("bn_backward_dscale", "norm/batchnorm_backward_nhwc_fp32.json", dims("batchnorm_backward_dscale", [1, 32, 1, 1]),
     ("$.nodes[0].outputs.dscale_tensor_uid", "expected one per channel (16)")),
    ("layernorm_scale", "norm/layernorm_fp32.json", dims("scale", [1, 1, 64]),
     ("$.nodes[0].inputs.scale_tensor_uid", "expected one per normalized element (128")),
    ("layernorm_bias", "norm/layernorm_fp32.json", dims("bias", [1, 3, 128]),
     ("$.nodes[0].inputs.bias_tensor_uid", "has 384 values, expected one per normalized element (128")),
    ("layernorm_mean", "norm/layernorm_fp32.json", dims("layernorm_mean", [8, 16, 1]),
     ("$.nodes[0].outputs.mean_tensor_uid", "expected one per normalized row (256)")),
    ("layernorm_inv_variance", "norm/layernorm_fp32.json", dims("layernorm_inv_variance", [8, 1, 1]),
     ("$.nodes[0].outputs.inv_variance_tensor_uid", "has 8 values, expected one per normalized row (256)")),
    ("layernorm_epsilon", "norm/layernorm_fp32.json", dims("layernorm_epsilon", [2]),
     ("$.nodes[0].inputs.epsilon_tensor_uid", "epsilon is one value")),
    ("layernorm_count_range", "norm/layernorm_fp32.json", option("normalized_dim_count", 4),
     ("$.nodes[0].attributes.normalized_dim_count", "must be an integer from 1 to x's rank 3")),
    ("layernorm_phase", "norm/layernorm_fp32.json", option("forward_phase", "BOGUS"),
     ("$.nodes[0].attributes.forward_phase", "unknown forward_phase 'BOGUS'")),
    ("layernorm_backward_scale", "norm/layernorm_backward_fp32.json", dims("scale", [64]),
     ("$.nodes[0].inputs.scale_tensor_uid", "expected one per normalized element (128")),
    ("layernorm_backward_half_saved", "norm/layernorm_backward_fp32.json", drop("inv_variance_tensor_uid"),
     ("$.nodes[0].inputs.mean_tensor_uid", "mean is given without inv_variance")),
    ("layernorm_backward_dx", "norm/layernorm_backward_fp32.json", dims("dx", [8, 32, 127]),
     ("$.nodes[0].outputs.dx_tensor_uid", "differ from x's")),
    ("rmsnorm_epsilon", "norm/rmsnorm_fp32.json", dims("rmsnorm_epsilon", [1, 2]),
     ("$.nodes[0].inputs.epsilon_tensor_uid", "epsilon is one value, this tensor has 2")),
    ("rmsnorm_inv_rms", "norm/rmsnorm_fp32.json",
     lambda g: (option("normalized_dim_count", 1)(g), dims("rmsnorm_inv_rms", [8, 31, 1])(g)),
     ("$.nodes[0].outputs.inv_rms_tensor_uid", "expected one per normalized row (256)")),
    ("rmsnorm_backward_inv_rms", "norm/rmsnorm_backward_fp32.json", dims("saved_inv_rms", [8, 31, 1]),
     ("$.nodes[0].inputs.inv_rms_tensor_uid", "has 248 values, expected one per normalized row (256)")),
    ("rmsnorm_backward_no_axes", "norm/rmsnorm_backward_fp32.json", dims("saved_inv_rms", [8, 32, 128]),
     ("$.nodes[0].inputs.inv_rms_tensor_uid", "cannot tell the normalized dims")),
    ("rmsnorm_backward_dscale", "norm/rmsnorm_backward_fp32.json", dims("dscale", [64]),
     ("$.nodes[0].outputs.dscale_tensor_uid", "expected one per normalized element (128")),
    ("reduction_dims", "reduction/reduce_max_rows_fp32.json", dims("y", [32, 1]),
     ("$.nodes[0].out_tensor_uid", "are not a reduction of")),
    ("reduction_mode", "reduction/reduce_max_rows_fp32.json", option("mode", "median"),
     ("$.nodes[0].mode", "unknown reduction mode 'median'")),
    ("pool_output", "pool/avgpool_exclude_padding_3d_fp32.json", dims("y", [1, 4, 3, 4, 5]),
     ("$.nodes[0].outputs.y_tensor_uid", "do not match the pooled size")),
    ("pool_window_length", "pool/avgpool_exclude_padding_3d_fp32.json", option("window", [3, 3]),
     ("$.nodes[0].attributes.window", "must be a list of 3 integers")),
    ("pool_mode", "pool/avgpool_exclude_padding_3d_fp32.json", option("resample_mode", "BILINEAR"),
     ("$.nodes[0].attributes.resample_mode", "unknown resample_mode 'BILINEAR'")),
    ("pool_backward_dx", "pool/avgpool_exclude_padding_backward_3d_fp32.json", dims("dx", [1, 4, 9, 7, 7]),
     ("$.nodes[0].inputs.dy_tensor_uid", "do not match the pooled size [1, 4, 5, 4, 4]")),
    ("sdpa_head_dim", "attention/sdpa_additive_bias_fp32.json", dims("key", [2, 2, 48, 16]),
     ("$.nodes[0].inputs.k_tensor_uid", "k's head dim 16 differs from q's 32")),
    ("sdpa_mask", "attention/sdpa_additive_bias_fp32.json", dims("attention_bias", [1, 1, 32, 47]),
     ("$.nodes[0].inputs.attn_mask_tensor_uid", "do not broadcast to [B, Hq, Sq, Skv]")),
    ("sdpa_output", "attention/sdpa_additive_bias_fp32.json", dims("output", [2, 2, 32, 16]),
     ("$.nodes[0].outputs.o_tensor_uid", "differ from the expected [2, 2, 32, 32]")),
    ("sdpa_alignment", "attention/sdpa_additive_bias_fp32.json", option("diagonal_alignment", "MIDDLE"),
     ("$.nodes[0].attributes.diagonal_alignment", "unknown diagonal_alignment 'MIDDLE'")),
    ("sdpa_rank", "attention/sdpa_additive_bias_fp32.json", dims("query", [2, 64, 32]),
     ("$.nodes[0].inputs.q_tensor_uid", "q must have 4 dims")),
    ("sdpa_backward_dq", "attention/sdpa_backward_gqa_causal_fp32.json", dims("grad_query", [1, 8, 48, 16]),
     ("$.nodes[0].outputs.dq_tensor_uid", "differ from the expected [1, 8, 48, 32]")),
    ("sdpa_backward_heads", "attention/sdpa_backward_gqa_causal_fp32.json",
     lambda g: (dims("key", [1, 3, 48, 32])(g), dims("value", [1, 3, 48, 32])(g)),
     ("$.nodes[0].inputs.k_tensor_uid", "q has 8 heads, not a multiple of k/v's 3")),
    ("sdpa_backward_stats", "attention/sdpa_backward_gqa_causal_fp32.json", dims("stats", [1, 8, 47, 1]),
     ("$.nodes[0].inputs.stats_tensor_uid", "expected [B, Hq, Sq, 1]")),
    ("quantize_scale", "blockscale/mxfp4_quantize_fp32.json", dims("scale", [32, 8]),
     ("$.nodes[0].outputs.scale_tensor_uid", "must be [32, 7]")),
    ("quantize_block", "blockscale/mxfp4_quantize_fp32.json", option("block_size", 0),
     ("$.nodes[0].block_size", "must be a positive integer, got 0")),
    ("quantize_y", "blockscale/mxfp4_quantize_fp32.json", dims("y", [32, 199]),
     ("$.nodes[0].outputs.y_tensor_uid", "differ from x's")),
    ("dequantize_scale", "blockscale/mxfp4_dequantize_fp32.json", dims("scale", [16, 7]),
     ("$.nodes[0].inputs.scale_tensor_uid", "must be [32, 7]")),
    ("dequantize_blocks", "blockscale/mxfp4_dequantize_fp32.json", option("block_size", [1, 1, 32]),
     ("$.nodes[0].block_size", "must be a list of 1..2 positive integers")),
    ("moe_k", "moe/moe_grouped_matmul_gather_top2_fp32.json", dims("weight", [8, 63, 48]),
     ("$.nodes[0].inputs.weight_tensor_uid", "K 63 differs from token's 64")),
    ("moe_mode", "moe/moe_grouped_matmul_gather_top2_fp32.json", option("mode", "broadcast"),
     ("$.nodes[0].mode", "unknown mode 'broadcast'")),
    ("moe_top_k", "moe/moe_grouped_matmul_gather_top2_fp32.json", option("top_k", 3),
     ("$.nodes[0].top_k", "GATHER mode requires top_k 0, got 3")),
    ("moe_output_rows", "moe/moe_grouped_matmul_gather_top2_fp32.json", dims("output", [1, 95, 48]),
     ("$.nodes[0].outputs.output_tensor_uid", "GATHER writes one row per token_index row (96)")),
    ("moe_backward_dweight", "moe/moe_grouped_matmul_backward_fp32.json", dims("dweight", [8, 64, 47]),
     ("$.nodes[0].outputs.dweight_tensor_uid", "must be [E, K 64, N 48]")),
]

CASES: list[Case] = [c for rel in BASES for c in generic_cases(rel)] + SPECIFIC


def _write(case: Case, folder: Path) -> Path:
    name, rel, mutate, _ = case
    g = copy.deepcopy(_base(rel))
    mutate(g)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(g, indent=1))
    return path


def _inspect_line(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    rc = main(["inspect", str(path)])
    out, err = capsys.readouterr()
    assert rc == 1, f"{path.name}: inspect exit {rc}, stdout {out[:300]!r}"
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, f"{path.name}: expected one line, got {err!r}"
    prefix = "hipdnn-trace inspect: error: "
    assert lines[0].startswith(prefix + str(path) + ": $"), lines[0]
    return lines[0].removeprefix(prefix)


def _run_message(path: Path) -> str:
    """What ``run`` records for the graph: its per-graph path, in process (the reference config)."""
    data = path.read_bytes()
    run = run_graph(GraphSource(str(path), lambda: data), [Config("reference", "reference")],
                    RunSettings(loop=LoopSettings(warmup=0, iters=1)), Markers())
    assert run.status == "error" and not run.configs, (run.status, run.error, run.configs)
    return run.error or ""


def test_corpus_is_large_and_covers_every_base() -> None:
    assert len(CASES) >= 100
    assert len({c[0] for c in CASES}) == len(CASES)
    assert {c[1] for c in CASES} == set(BASES)
    assert {json.loads((GRAPHS / b).read_text())["nodes"][0]["type"] for b in BASES} >= \
        FLOAT_COMPUTE_OPS | {"PointwiseAttributes"}


@pytest.mark.parametrize("rel", BASES)
def test_unmutated_bases_load_and_inspect_cleanly(rel: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--quiet", str(GRAPHS / rel)]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_inspect_and_run_refuse_with_one_line_naming_file_and_path(case: Case, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(case, tmp_path)
    line = _inspect_line(path, capsys)
    for fragment in case[3]:
        assert fragment in line, f"{case[0]}: {fragment!r} not in {line!r}"
    assert _run_message(path) == line


def test_one_run_over_the_corpus_errs_each_graph_with_inspects_message(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "corpus"
    folder.mkdir()
    sample = CASES[::8]   # every case's run message is checked above; this is the suite's exit and rows
    paths = [_write(c, folder) for c in sample]
    expected = {}
    for p in paths:
        expected[str(p)] = _inspect_line(p, capsys)
    rc = main(["run", str(folder), "--out", str(tmp_path / "runs"), "--run-id", "corpus", "-q", "--no-trace",
               "-w", "0", "-i", "1"])
    out = capsys.readouterr().out
    assert rc == 1 and "Traceback" not in out
    rows = load_run(tmp_path / "runs" / "corpus").summary
    assert rows.height == len(sample)
    for row in rows.iter_rows(named=True):
        assert row["status"] == "error", row
        assert row["error"] == expected[row["source"]], row["source"]


SUBPROCESS_CASES = ("layernorm_scale", "matmul_batched_fp32-extra_port", "relu_clip_fp32-all_outputs_virtual",
                    "conv_fwd_nchw_fp32-compute_int8")


@pytest.mark.parametrize("name", SUBPROCESS_CASES)
def test_cli_subprocess_inspect_and_run_agree(name: str, tmp_path: Path) -> None:
    case = next(c for c in CASES if c[0] == name)
    path = _write(case, tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    cli = [sys.executable, "-m", "hipdnn_trace"]
    inspect = subprocess.run([*cli, "inspect", str(path)], capture_output=True, text=True, env=env, timeout=120)
    assert inspect.returncode == 1 and inspect.stdout == ""
    lines = inspect.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in inspect.stderr, inspect.stderr
    message = lines[0].removeprefix("hipdnn-trace inspect: error: ")
    assert message.startswith(f"{path}: $")
    run = subprocess.run([*cli, "run", str(path), "--out", str(tmp_path / "runs"), "--run-id", "one", "-q",
                          "--no-trace", "-w", "0", "-i", "1"], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 1 and "Traceback" not in run.stdout + run.stderr
    (line,) = run.stdout.splitlines()   # -q: the count line only
    assert line.startswith("done in") and "1 errored" in line
    # the run directory keeps the whole line; the terminal's final table shows it (shortened) without -q
    assert load_run(tmp_path / "runs" / "one").summary["error"].to_list() == [message]
    loud = subprocess.run([*cli, "run", str(path), "--out", str(tmp_path / "runs"), "--run-id", "two",
                           "--no-trace", "-w", "0", "-i", "1"], capture_output=True, text=True, env=env, timeout=120)
    table = loud.stdout.splitlines()[loud.stdout.splitlines().index("") + 1:]
    assert table[0].startswith("graph ") and sum(message[:80] in ln for ln in table) == 1, loud.stdout


def test_every_option_of_every_op_has_a_json_type() -> None:
    from hipdnn_trace.graph.ops import SPECS

    for name, s in SPECS.items():
        assert set(s.options) | set(s.uid_lists) <= set(s.option_kinds), name

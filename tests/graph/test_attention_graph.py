"""Attention in the graph model: real hipDNN files load with exact FLOPs, bad ones are refused with
the JSON path, inputs mean something, and the cuDNN plan says what cuDNN needs."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import graph_dicts
import numpy as np
import pytest

from hipdnn_trace.backends import cudnn_graph as cg
from hipdnn_trace.backends.reference import executor
from hipdnn_trace.backends.reference.ops import round_to, sdpa_forward
from hipdnn_trace.bench.attention_inputs import undefined_elements
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.errors import GraphError, UnsupportedError
from hipdnn_trace.graph import attention, ops
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.load import load_file, parse_graph

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"


def _upstream(shared_fixtures: Path, rel: str) -> dict:
    path = shared_fixtures / "upstream-graphs" / rel
    if not path.exists():
        pytest.skip(f"{rel} not in the shared fixtures")
    return json.loads(path.read_text())


# hand counts: causal TOP_LEFT 16x16 -> 136 pairs; gqa 143x127 causal -> 8128 + 16*127 per head and batch;
# window 1024 over 2048 causal -> 1024*1025/2 + 1024*1024 per head and batch
@pytest.mark.parametrize("rel,flops", [
    ("samples/sample_sdpa_causal.json", 2 * 1 * 256 * 136),
    ("samples/sample_sdpa.json", 2 * 1 * 256 * 16 * 16),
    ("samples/sample_sdpa_backward.json", 2.5 * 2 * 1 * 256 * 16 * 16),
    ("aotriton_test/gqa_bf16_b4_qh10_kvh2_sq143_skv127_d256_causal_on.json", 2 * 10 * 512 * 4 * (8128 + 16 * 127)),
    ("common_llm_workloads/sliding_window_local_attention_fp16_b4_s2048_w1024_d64_gqa8.json",
     2 * 64 * 128 * 4 * (1024 * 1025 // 2 + 1024 * 1024)),
])
def test_upstream_attention_files_load_with_exact_flops(shared_fixtures: Path, rel: str, flops: float) -> None:
    graph = parse_graph(_upstream(shared_fixtures, rel), rel)
    assert ops.graph_flops(graph) == flops
    assert executor.check(graph) is None


def test_upstream_packed_paged_file_loads_as_two_packed_sequences(shared_fixtures: Path) -> None:
    graph = parse_graph(_upstream(shared_fixtures, "ROCm_dnn-benchmarking/sample_sdpa_paged.json"), "paged")
    assert executor.check(graph) is None
    assert attention.config(graph.nodes[0], graph).ragged_batch == 2
    assert cg.plan(graph).ops[0].method == "sdpa"


def test_builder_writes_hipdnns_own_key_order(shared_fixtures: Path) -> None:
    upstream = _upstream(shared_fixtures, "samples/sample_sdpa_causal.json")["nodes"][0]
    b = GraphBuilder("t", io="bfloat16")
    q, k, v = (b.tensor(n, [1, 1, 16, 128]) for n in ("query", "key", "value"))
    b.sdpa(q, k, v, causal=True, name="sdpa_node")
    ours = b.to_json()["nodes"][0]
    for section in ("inputs", "outputs", "attributes"):
        assert list(ours[section]) == list(upstream[section]), section
    assert ours["attributes"] == upstream["attributes"]


def _sdpa_json(**attrs) -> dict:
    return graph_dicts.sdpa([2, 8, 16, 32], [2, 2, 16, 32], causal=True, **attrs)


@pytest.mark.parametrize("change,path,words", [
    (lambda g: [g["tensors"][i].update(dims=[2, 3, 16, 32], strides=[1536, 512, 32, 1]) for i in (1, 2)],
     "inputs.k_tensor_uid", "not a multiple"),
    (lambda g: g["tensors"][3].update(dims=[2, 8, 16, 16], strides=[2048, 256, 16, 1]),
     "outputs.o_tensor_uid", "expected [2, 8, 16, 32]"),
    (lambda g: g["nodes"][0]["attributes"].update(diagonal_alignment="MIDDLE"),
     "attributes.diagonal_alignment", "unknown diagonal_alignment"),
    (lambda g: g["nodes"][0]["attributes"].update(causal_mask_bottom_right=True),
     "attributes.causal_mask_bottom_right", "both set"),
    (lambda g: g["nodes"][0]["attributes"].update(left_bound="wide"), "attributes.left_bound", "integer"),
    (lambda g: g["nodes"][0]["attributes"].update(left_bound=0), "attributes.left_bound", "keeps no key"),
])
def test_bad_attention_graphs_name_the_json_path(change, path: str, words: str) -> None:
    raw = _sdpa_json()
    change(raw)
    with pytest.raises(GraphError) as err:
        parse_graph(raw, "bad.json")
    assert path in str(err.value) and words in str(err.value)


def test_paged_without_max_seq_len_is_refused() -> None:
    raw = json.loads((GRAPHS / "attention/sdpa_paged_gqa_bf16.json").read_text())
    raw["nodes"][0]["attributes"]["max_seq_len_kv"] = None
    with pytest.raises(GraphError, match="max_seq_len_kv"):
        parse_graph(raw, "paged.json")


def test_lengths_and_page_tables_are_valid_and_seeded() -> None:
    graph = load_file(GRAPHS / "attention/sdpa_paged_gqa_bf16.json")
    cfg = attention.config(graph.nodes[0], graph)
    a, b = make_inputs(graph, 0), make_inputs(graph, 0)
    by_name = {t.name: t.uid for t in graph.tensors}
    for name in ("seq_len_q", "seq_len_kv", "page_table_k", "page_table_v"):
        np.testing.assert_array_equal(a[by_name[name]], b[by_name[name]])
    lq, lkv = a[by_name["seq_len_q"]].reshape(-1), a[by_name["seq_len_kv"]].reshape(-1)
    assert lq.min() >= 1 and lq.max() == cfg.seq_q and lkv.min() >= 1 and lkv.max() == cfg.seq_kv
    for port in ("page_table_k", "page_table_v"):
        table = a[by_name[port]].reshape(cfg.batch, -1).astype(int)
        assert table.min() >= 0 and table.max() < cfg.pages
        assert all(len(set(row)) == len(row) for row in table), "a sequence's pages must be distinct"


def test_backward_inputs_o_and_stats_are_the_rounded_forward() -> None:
    graph = load_file(GRAPHS / "attention/sdpa_backward_gqa_causal_bf16.json")
    x = make_inputs(graph, 3)
    node = graph.nodes[0]
    i = node.inputs
    fwd = sdpa_forward(x[i["q"]], x[i["k"]], x[i["v"]], scale=1 / np.sqrt(32),
                       masking=executor.ref.Masking(causal=True))
    np.testing.assert_array_equal(x[i["o"]], round_to(fwd["o"], "bfloat16"))
    np.testing.assert_array_equal(x[i["stats"]], round_to(fwd["stats"], "float"))


def test_varlen_flops_come_from_the_real_lengths() -> None:
    graph = load_file(GRAPHS / "attention/sdpa_varlen_causal_bf16.json")
    x = make_inputs(graph, 0)
    node = graph.nodes[0]
    lq = x[node.inputs["seq_len_q"]].reshape(-1).astype(int)
    lkv = x[node.inputs["seq_len_kv"]].reshape(-1).astype(int)
    pairs = sum(sum(max(0, min(kv, i + 1)) for i in range(q)) for q, kv in zip(lq, lkv))
    assert ops.graph_flops(graph, x) == 2 * 4 * 64 * pairs < ops.graph_flops(graph)


def test_rows_past_a_sequence_are_marked_undefined() -> None:
    graph = load_file(GRAPHS / "attention/sdpa_varlen_causal_fp32.json")
    x = make_inputs(graph, 0)
    node = graph.nodes[0]
    lq = x[node.inputs["seq_len_q"]].reshape(-1).astype(int)
    mask = undefined_elements(graph, x)[node.outputs["o"]]
    for b, length in enumerate(lq):
        assert not mask[b, :, :length].any() and mask[b, :, length:].all()


def test_cudnn_plan_speaks_the_frontends_words() -> None:
    plan = cg.plan(load_file(GRAPHS / "attention/sdpa_paged_gqa_bf16.json"))
    (op,) = plan.ops
    assert op.method == "sdpa" and plan.intermediate == "FLOAT"
    assert {"paged_attention_k_table", "paged_attention_v_table", "seq_len_q", "seq_len_kv"} <= set(op.tensors)
    assert op.attrs["use_padding_mask"] and op.attrs["paged_attention_max_seq_len_kv"] == 64
    assert op.attrs["diagonal_alignment"] == cg.EnumValue("diagonal_alignment", "BOTTOM_RIGHT")
    table = next(t for t in plan.inputs if t.name == "page_table_k")
    assert table.dims == (3, 1, 4, 1) and table.dtype == "INT32"
    window = cg.plan(load_file(GRAPHS / "attention/sdpa_sink_window_gqa_bf16.json")).ops[0]
    assert window.attrs["diagonal_band_left_bound"] == 32 and window.attrs["diagonal_band_right_bound"] == 0
    assert next(t for t in cg.plan(load_file(GRAPHS / "attention/sdpa_sink_window_gqa_bf16.json")).inputs
                if t.key == window.tensors["sink_token"]).dims == (1, 8, 1, 1)


def test_a_bf16_sink_is_declared_and_bound_as_float() -> None:
    """cuDNN reads sink_token as float: declared bfloat16, cuDNN 9.19 built the graph and then failed with
    cudaErrorMisalignedAddress at execute (benchmarks/repro_cudnn_sink.py, on an H200)."""
    b = GraphBuilder("bf16_sink", io="bfloat16")
    q, k, v = b.tensor("q", [1, 4, 64, 32]), b.tensor("k", [1, 2, 64, 32]), b.tensor("v", [1, 2, 64, 32])
    b.sdpa(q, k, v, causal=True, left_bound=16, right_bound=0, sink=b.tensor("sink_token", [4]))
    plan = cg.plan(b.build())
    sink = next(t for t in plan.inputs if t.key == plan.ops[0].tensors["sink_token"])
    assert sink.dtype == "FLOAT" and sink.cast == "float" and sink.dims == (1, 4, 1, 1)
    q_decl = next(t for t in plan.inputs if t.key == plan.ops[0].tensors["q"])
    assert q_decl.dtype == "BFLOAT16" and q_decl.cast is None          # only the sink is widened
    already = cg.plan(load_file(GRAPHS / "attention/sdpa_sink_window_gqa_bf16.json"))   # a float sink: as it is
    assert next(t for t in already.inputs if t.key == already.ops[0].tensors["sink_token"]).cast is None


def test_cudnn_plan_declares_rank3_stats_as_cudnns_four_dims() -> None:
    b = GraphBuilder("t", io="bfloat16")
    q, k, v, o, do = (b.tensor(n, [1, 2, 16, 64]) for n in ("q", "k", "v", "o", "do"))
    stats = b.tensor("stats", [1, 2, 16], dtype="float")
    b.sdpa_backward(q, k, v, o, do, stats)
    plan = cg.plan(b.build())
    decl = next(t for t in plan.inputs if t.name == "stats")
    assert decl.dims == (1, 2, 16, 1)


def test_what_cudnn_cannot_say_is_refused_with_the_reason() -> None:
    with pytest.raises(UnsupportedError, match="additive bias only"):
        cg.plan(load_file(GRAPHS / "attention/sdpa_boolean_mask_bf16.json"))
    raw = json.loads((GRAPHS / "attention/sdpa_mha_bf16.json").read_text())
    dropped = copy.deepcopy(raw)
    dropped["nodes"][0]["attributes"]["dropout_probability"] = 0.1
    graph = parse_graph(dropped, "dropout.json")
    with pytest.raises(UnsupportedError, match="RNG stream"):
        cg.plan(graph)
    assert "RNG stream" in (executor.check(graph) or "")


def test_inspect_notes_say_the_scale_default_and_the_pair_count() -> None:
    graph = load_file(GRAPHS / "attention/sdpa_mha_bhsd_scale_default_bf16.json")
    notes = " ".join(ops.node_notes(graph.nodes[0], graph))
    assert "1/sqrt(d_qk)" in notes and "cuDNN's own default would be 1.0" in notes
    assert "7680 of 7680" in notes


def test_hipdnn_backend_refuses_ports_hipdnns_backward_lacks() -> None:
    """Mock-free: only the port check of the hipdnn backend, which needs no AMD GPU."""
    from hipdnn_trace.backends.hipdnn import attention_support

    fwd = load_file(GRAPHS / "attention/sdpa_sink_window_gqa_bf16.json")
    assert attention_support(fwd.nodes[0]) is None
    b = GraphBuilder("t", io="bfloat16")
    q, k, v, o, do = (b.tensor(n, [1, 2, 16, 64]) for n in ("q", "k", "v", "o", "do"))
    b.sdpa_backward(q, k, v, o, do, b.tensor("stats", [1, 2, 16, 1], dtype="float"))
    raw = b.to_json()
    raw["tensors"].append({**raw["tensors"][0], "uid": 99, "name": "sink", "dims": [1, 2, 1, 1],
                           "strides": [2, 1, 1, 1], "data_type": "float"})
    raw["nodes"][0]["inputs"]["sink_token_tensor_uid"] = 99
    graph = parse_graph(raw, "bwd_sink.json")
    assert "sink_token_tensor_uid" in (attention_support(graph.nodes[0]) or "")


def test_a_graph_no_configuration_can_run_makes_no_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backends are asked first: a refused graph costs no input generation and no reference."""
    from hipdnn_trace.bench import graph_run
    from hipdnn_trace.bench.config import Config
    from hipdnn_trace.bench.loop import LoopSettings
    from hipdnn_trace.graph.sources import GraphSource
    from hipdnn_trace.graph.write import dumps
    from hipdnn_trace.markers import Markers

    raw = json.loads((GRAPHS / "attention/sdpa_mha_bf16.json").read_text())
    raw["nodes"][0]["attributes"]["dropout_probability"] = 0.1
    data = dumps(parse_graph(raw, "dropout.json")).encode()

    def no_inputs(*args, **kwargs):
        raise AssertionError("inputs were generated for a graph nothing can run")

    monkeypatch.setattr(graph_run, "_inputs", no_inputs)
    run = graph_run.run_graph(GraphSource("dropout.json", lambda: data), [Config("reference", "reference")],
                              graph_run.RunSettings(loop=LoopSettings(warmup=0, iters=1)), Markers())
    assert [c.status for c in run.configs] == ["unsupported"]
    assert "RNG stream" in (run.configs[0].error or "")

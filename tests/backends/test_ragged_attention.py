"""Packed (ragged) query rows: a paged attention node whose page tables and seq_len_q list more
sequences than q's batch rows (ROCm/dnn-benchmarking graphs/sample_sdpa_paged.json: two sequences in
q's one row). The reference is checked against a direct per-sequence definition written here (slice
each sequence's rows, gather its pages, plain softmax attention), torch against the reference, and the
upstream sample on both. cuDNN: a test marked ``cuda`` for the lead's H200."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hipdnn_trace.backends.reference import executor
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings, run_graph
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph import attention, ops
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.load import parse_graph
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.graph.sources import GraphSource
from hipdnn_trace.graph.write import graph_to_json
from hipdnn_trace.markers import Markers

SAMPLE = "upstream-graphs/ROCm_dnn-benchmarking/sample_sdpa_paged.json"
SETTINGS = RunSettings(loop=LoopSettings(warmup=0, iters=1))


def _packed_graph(*, causal: bool = True, batch: int = 2, per_row: int = 2) -> Graph:
    """q [batch, 4, 12, 8] holding batch * per_row sequences; paged K/V with 2 KV heads (GQA)."""
    seqs = batch * per_row
    b = GraphBuilder("ragged_paged", io="float")
    q = b.tensor("q", [batch, 4, 12, 8])
    k, v = b.tensor("k", [9, 2, 4, 8]), b.tensor("v", [9, 2, 4, 8])
    tk, tv = (b.tensor(n, [seqs, 1, 3, 1], dtype="int32") for n in ("page_table_k", "page_table_v"))
    lq, lkv = (b.tensor(n, [seqs], dtype="int32") for n in ("seq_len_q", "seq_len_kv"))
    b.sdpa(q, k, v, causal=causal, seq_len_q=lq, seq_len_kv=lkv, page_table_k=tk, page_table_v=tv,
           max_seq_len_kv=12, scale=0.3)
    return b.build()


def _direct(graph: Graph, x: dict[int, np.ndarray]) -> np.ndarray:
    """hipDNN's packed rows by hand: sequence i sits in q row i // per_row, after that row's earlier
    sequences; it attends to its own pages' first seq_len_kv keys (top-left causal when set)."""
    node = graph.nodes[0]
    cfg = attention.config(node, graph)
    i = node.inputs
    q, kc, vc = (x[i[p]].astype(np.float64) for p in ("q", "k", "v"))
    lq = x[i["seq_len_q"]].reshape(-1).astype(int)
    lkv = x[i["seq_len_kv"]].reshape(-1).astype(int)
    tk = x[i["page_table_k"]].reshape(len(lq), -1).astype(int)
    tv = x[i["page_table_v"]].reshape(len(lq), -1).astype(int)
    o = np.zeros(q.shape[:3] + (vc.shape[3],))
    start = 0
    for s in range(len(lq)):
        row = s // cfg.per_row
        start = 0 if s % cfg.per_row == 0 else start
        rows = slice(start, start + lq[s])
        k = np.concatenate([kc[p] for p in tk[s]], axis=1)[:, :lkv[s]].repeat(cfg.group, axis=0)
        v = np.concatenate([vc[p] for p in tv[s]], axis=1)[:, :lkv[s]].repeat(cfg.group, axis=0)
        scores = cfg.scale * np.einsum("hqd,hkd->hqk", q[row, :, rows], k)
        if cfg.causal:
            keep = np.arange(lkv[s])[None, :] <= np.arange(lq[s])[:, None]
            scores = np.where(keep, scores, -np.inf)
        p = np.exp(scores - scores.max(axis=-1, keepdims=True))
        o[row, :, rows] = np.einsum("hqk,hkd->hqd", p / p.sum(axis=-1, keepdims=True), v)
        start += lq[s]
    return o


def _run(graph: Graph, backend: str):
    data = json.dumps(graph_to_json(graph)).encode()
    run = run_graph(GraphSource(graph.name + ".json", lambda: data), [Config(backend, backend)], SETTINGS,
                    Markers())
    return run.configs[0]


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("batch,per_row", [(1, 2), (2, 2), (1, 3)])
def test_reference_equals_the_per_sequence_definition(causal: bool, batch: int, per_row: int) -> None:
    graph = _packed_graph(causal=causal, batch=batch, per_row=per_row)
    x = make_inputs(graph, 5)
    node = graph.nodes[0]
    lq = x[node.inputs["seq_len_q"]].reshape(-1).astype(int)
    assert len(lq) == batch * per_row and lq.max() <= 12 // per_row
    got = executor.evaluate(graph, x).exact[node.outputs["o"]]
    np.testing.assert_allclose(got, _direct(graph, x), rtol=1e-12, atol=1e-12)


def test_packed_flops_count_each_sequence_once() -> None:
    graph = _packed_graph(causal=True, batch=1, per_row=2)
    x = make_inputs(graph, 0)
    node = graph.nodes[0]
    lq = x[node.inputs["seq_len_q"]].reshape(-1).astype(int)
    lkv = x[node.inputs["seq_len_kv"]].reshape(-1).astype(int)
    pairs = sum(sum(min(kv, r + 1) for r in range(q)) for q, kv in zip(lq, lkv))
    assert ops.graph_flops(graph, x) == 2 * 4 * 16 * pairs


def test_inspect_notes_say_the_packing() -> None:
    graph = _packed_graph(batch=2, per_row=2)
    text = " ".join(attention.notes(graph.nodes[0], graph))
    assert "4 sequences in q's 2 batch row(s), up to 6 query rows each" in text
    assert f"of {4 * 6 * 12} (query, key) pairs" in text


def test_torch_matches_the_reference_on_packed_rows() -> None:
    pytest.importorskip("torch")
    c = _run(_packed_graph(batch=2, per_row=2), "torch")
    assert c.status == "ok" and c.validation == "passed", c.error


def test_packed_rows_that_do_not_share_q_rows_evenly_are_refused() -> None:
    raw = graph_to_json(_packed_graph(batch=2, per_row=2))
    for t in raw["tensors"]:
        if t["name"] == "q":
            t["dims"], t["strides"] = [3, 4, 12, 8], [384, 96, 8, 1]
        if t["name"] == "output":
            t["dims"], t["strides"] = [3, 4, 12, 8], [384, 96, 8, 1]
    with pytest.raises(Exception, match="share q's 3 batch rows evenly"):
        parse_graph(raw, "uneven.json")


def test_ragged_offset_on_q_alone_is_refused_at_load_not_computed_dense() -> None:
    """q ragged but o dense: no packing could hold both (the form itself: test_ragged_offset_attention.py)."""
    raw = graph_to_json(_packed_graph(batch=1, per_row=1))
    raw["tensors"].append({"name": "q_offsets", "uid": 99, "dims": [2, 1, 1, 1], "strides": [1, 1, 1, 1],
                           "data_type": "int32", "virtual": False})
    for t in raw["tensors"]:
        if t["name"] == "q":
            t["ragged_offset_tensor_uid"], t["ragged_offset_multiplier"] = 99, 32
    with pytest.raises(Exception, match="o must carry ragged_offset_tensor_uid like q"):
        parse_graph(raw, "offsets.json")


def _sample(shared_fixtures: Path) -> Graph:
    path = shared_fixtures / SAMPLE
    if not path.exists():
        pytest.skip(f"{SAMPLE} not in the shared fixtures")
    return parse_graph(json.loads(path.read_text()), "sample_sdpa_paged.json")


def test_upstream_paged_sample_equals_the_per_sequence_definition(shared_fixtures: Path) -> None:
    graph = _sample(shared_fixtures)
    cfg = attention.config(graph.nodes[0], graph)
    assert (cfg.ragged_batch, cfg.per_row, cfg.seq_q_each) == (2, 2, 64)
    x = make_inputs(graph, 0)
    got = executor.evaluate(graph, x).exact[graph.nodes[0].outputs["o"]]
    np.testing.assert_allclose(got, _direct(graph, x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", ["reference", "torch"])
def test_upstream_paged_sample_passes(shared_fixtures: Path, backend: str) -> None:
    if backend == "torch":
        pytest.importorskip("torch")
    c = _run(_sample(shared_fixtures), backend)
    assert c.status == "ok" and c.validation == "passed", c.error


def test_cudnn_plan_declares_packed_rows_as_ragged_tensors(shared_fixtures: Path) -> None:
    """The plan only (no GPU here): q and o as [sequences, H, Sq_each, D] token-major, each with an int32
    offset tensor computed from seq_len_q; lengths and page tables one row per sequence."""
    from hipdnn_trace.backends import cudnn_graph as cg

    plan = cg.plan(_sample(shared_fixtures))
    by_name = {t.name: t for t in (*plan.inputs, *plan.outputs)}
    assert by_name["Q"].dims == (2, 16, 64, 128) and by_name["Q"].strides == (131072, 128, 2048, 1)
    assert by_name["O"].dims == (2, 16, 64, 128) and by_name["Q"].ragged_offset and by_name["O"].ragged_offset
    offsets = next(t for t in plan.inputs if t.key == by_name["Q"].ragged_offset)
    assert offsets.dims == (3, 1, 1, 1) and offsets.dtype == "INT32" and offsets.offsets_of == (2, 128, 2048)
    assert by_name["SEQ_LEN_Q"].dims == (2, 1, 1, 1) and by_name["PAGE_TABLE_K"].dims == (2, 1, 1, 1)


def test_cudnn_refuses_packed_rows_not_stored_token_major() -> None:
    from hipdnn_trace.backends import cudnn_graph as cg

    with pytest.raises(UnsupportedError, match="token-major"):
        cg.plan(_packed_graph())


def test_ragged_element_offsets_follow_the_packing() -> None:
    """Two rows of Sq 6 packing 2 sequences each, token stride 8: starts 0, 3, 6 (row 1), 6 + 4 tokens."""
    assert attention.ragged_element_offsets([3, 2, 4, 1], 2, 6, 8) == [0, 24, 48, 80, 88]
    assert attention.ragged_element_offsets([64, 30], 2, 128, 2048) == [0, 64 * 2048, 94 * 2048]


def test_cudnn_session_uploads_offsets_from_the_bound_lengths() -> None:
    pytest.importorskip("torch")
    from hipdnn_trace.backends.cudnn import ragged_offsets
    from hipdnn_trace.backends.cudnn_graph import TensorDecl

    decl = TensorDecl("r1", 1, "ragged_offset_q", (3, 1, 1, 1), (1, 1, 1, 1), "INT32", hipdnn_uid=7,
                      offsets_of=(2, 128, 2048))
    got = ragged_offsets(decl, np.array([50.0, 7.0]))
    assert got.dtype == np.int32 and got.tolist() == [0, 50 * 2048, 57 * 2048]

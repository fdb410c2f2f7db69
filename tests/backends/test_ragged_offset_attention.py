"""Ragged attention through ``ragged_offset_tensor_uid`` (hipDNN RFC 0014; issue 35 item 4): q/k/v/o
(and the backward's dO/dQ/dK/dV) packed token by token, each sequence at its offset tensor's element.

The float64 reference is checked against a definition written here from the packed buffers alone
(slice each sequence out of the buffer the offsets describe, plain softmax attention), its backward
against the dense reference op on each sequence alone and against finite differences, the harness's
offset contents against hipDNN's rules, and torch against the reference through ``run_graph``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from finite_differences import numeric_grad
from graph_dicts import ragged_sdpa

from hipdnn_trace.backends.reference import executor
from hipdnn_trace.backends.reference.ops.sdpa import Masking, sdpa_backward
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings, run_graph
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.graph import attention, ops, ragged
from hipdnn_trace.graph.load import parse_graph
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.graph.sources import GraphSource
from hipdnn_trace.markers import Markers

SETTINGS = RunSettings(loop=LoopSettings(warmup=0, iters=1))


def _graph(**kw: object) -> Graph:
    return parse_graph(ragged_sdpa(**kw), "ragged.json")   # type: ignore[arg-type]


def _packed(graph: Graph, x: dict[int, np.ndarray], port: str) -> tuple[np.ndarray, list[int], int]:
    """The buffer a library would get for ``port``, its element offsets and its token stride."""
    node = graph.nodes[0]
    t = graph.by_uid[node.inputs.get(port, node.outputs.get(port))]   # type: ignore[index]
    assert t.ragged_offset_tensor_uid is not None
    raw = x[t.ragged_offset_tensor_uid].reshape(-1).astype(np.int64)
    elements = [int(v) * t.ragged_offset_multiplier for v in raw]
    bounds = [e // t.strides[2] for e in elements]
    flat = ragged.pack(x[t.uid].astype(np.float64), t, bounds, np.full(t.storage_elements, np.nan))
    return flat, elements, t.strides[2]


def _sequences(flat: np.ndarray, elements: list[int], token: int, heads: int) -> list[np.ndarray]:
    """Each sequence as [H, L, D], read straight out of the packed buffer (token-major: [L, H, D])."""
    return [flat[a:b].reshape((b - a) // token, heads, -1).transpose(1, 0, 2) for a, b in zip(elements, elements[1:])]


def _attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool) -> np.ndarray:
    """Plain softmax attention of one sequence, GQA by repeating kv heads."""
    g = q.shape[0] // k.shape[0]
    k, v = np.repeat(k, g, axis=0), np.repeat(v, g, axis=0)
    s = scale * np.einsum("hqd,hkd->hqk", q, k)
    if causal:
        s = np.where(np.arange(k.shape[1])[None, :] <= np.arange(q.shape[1])[:, None], s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.einsum("hqk,hkd->hqd", p / p.sum(axis=-1, keepdims=True), v)


@pytest.mark.parametrize("kw", [{}, {"causal": True}, {"shared": "side", "multiplier": True},
                                {"heads": (2, 2), "seq": (6, 6), "shared": "all", "causal": True},
                                {"heads": (4, 1), "seq": (5, 11)}])
def test_reference_equals_attention_on_the_packed_sequences(kw: dict[str, object]) -> None:
    graph = _graph(**kw)
    x = make_inputs(graph, 3)
    node = graph.nodes[0]
    cfg = attention.config(node, graph)
    out = executor.evaluate(graph, x).exact
    qs = _sequences(*_packed(graph, x, "q"), cfg.heads_q)
    ks = _sequences(*_packed(graph, x, "k"), cfg.heads_kv)
    vs = _sequences(*_packed(graph, x, "v"), cfg.heads_kv)
    o_flat, o_elements, o_token = _packed(graph, {**x, node.outputs["o"]: out[node.outputs["o"]]}, "o")
    assert len(qs) == cfg.batch and qs[0].shape[1] == cfg.seq_q   # the first sequence at S_max
    for b, (q, k, v) in enumerate(zip(qs, ks, vs)):
        want = _attend(q, k, v, 0.3, bool(kw.get("causal")))
        np.testing.assert_allclose(out[node.outputs["o"]][b, :, :q.shape[1]], want, rtol=1e-12, atol=1e-12)
    for got, want in zip(_sequences(o_flat, o_elements, o_token, cfg.heads_q),
                         (_attend(q, k, v, 0.3, bool(kw.get("causal"))) for q, k, v in zip(qs, ks, vs))):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_paged_reference_equals_attention_on_each_sequences_pages() -> None:
    graph = _graph(paged=True, causal=True)
    x = make_inputs(graph, 4)
    node = graph.nodes[0]
    cfg = attention.config(node, graph)
    i = node.inputs
    qs = _sequences(*_packed(graph, x, "q"), cfg.heads_q)
    lkv = x[i["seq_len_kv"]].reshape(-1).astype(int)
    tk, tv = (x[i[p]].reshape(cfg.batch, -1).astype(int) for p in ("page_table_k", "page_table_v"))
    o = executor.evaluate(graph, x).exact[node.outputs["o"]]
    for b, q in enumerate(qs):
        k = np.concatenate([x[i["k"]][p] for p in tk[b]], axis=1)[:, :lkv[b]].astype(np.float64)
        v = np.concatenate([x[i["v"]][p] for p in tv[b]], axis=1)[:, :lkv[b]].astype(np.float64)
        np.testing.assert_allclose(o[b, :, :q.shape[1]], _attend(q, k, v, 0.3, True), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_backward_equals_the_dense_backward_of_each_sequence(causal: bool) -> None:
    graph = _graph(backward=True, causal=causal)
    x = make_inputs(graph, 6)
    node = graph.nodes[0]
    i, o = node.inputs, node.outputs
    lq, lkv = attention.seq_lengths(node, graph, {u: x[u] for u in attention.length_uids(node, graph)})
    assert len(set(lq)) > 1 or len(set(lkv)) > 1
    out = executor.evaluate(graph, x).exact
    for b, (nq, nk) in enumerate(zip(lq, lkv)):
        one = {p: x[i[p]][b:b + 1, :, :(nk if p in ("k", "v") else nq)].astype(np.float64)
               for p in ("q", "k", "v", "o", "do")}
        want = sdpa_backward(one["q"], one["k"], one["v"], one["do"], o=one["o"], scale=0.3,
                             masking=Masking(causal=causal, bottom_right=False, left_bound=None,
                                             right_bound=0 if causal else None))
        for port, n in (("dq", nq), ("dk", nk), ("dv", nk)):
            np.testing.assert_allclose(out[o[port]][b:b + 1, :, :n], want[port], rtol=1e-12, atol=1e-12)


def test_backward_matches_finite_differences_of_the_forward() -> None:
    """d sum(O * dO) / dq and / dk by central differences of the ragged forward graph (double)."""
    fwd = _graph(batch=2, heads=(2, 1), seq=(3, 4), d=4, dtype="double", causal=True, shared="side")
    bwd = _graph(batch=2, heads=(2, 1), seq=(3, 4), d=4, dtype="double", causal=True, shared="side",
                 backward=True)
    xb = make_inputs(bwd, 2)
    nb, nf = bwd.nodes[0], fwd.nodes[0]
    by_name = {graph.by_uid[u].name: u for graph in (fwd,) for u in graph.by_uid}
    xf = {by_name[bwd.by_uid[u].name]: xb[u] for u in xb if bwd.by_uid[u].name in by_name}
    do = xb[nb.inputs["do"]]

    def loss() -> float:
        o = executor.evaluate(fwd, xf).exact[nf.outputs["o"]]
        lq, _ = attention.seq_lengths(nf, fwd, {u: xf[u] for u in attention.length_uids(nf, fwd)})
        return float(sum((o[b, :, :n] * do[b, :, :n]).sum() for b, n in enumerate(lq)))

    xb[nb.inputs["o"]] = executor.evaluate(fwd, xf).exact[nf.outputs["o"]]
    got = executor.evaluate(bwd, xb).exact
    for port, grad in (("q", "dq"), ("k", "dk")):
        np.testing.assert_allclose(got[nb.outputs[grad]], numeric_grad(loss, xf[nf.inputs[port]]), atol=1e-7)


def test_flops_count_each_sequence_at_its_length() -> None:
    graph = _graph(causal=True)
    x = make_inputs(graph, 0)
    node = graph.nodes[0]
    lq, lkv = attention.seq_lengths(node, graph, {u: x[u] for u in attention.length_uids(node, graph)})
    pairs = sum(sum(min(kv, r + 1) for r in range(q)) for q, kv in zip(lq, lkv))
    assert ops.graph_flops(graph, x) == 2 * 4 * 16 * pairs


def test_what_no_library_models_is_refused_with_the_reason() -> None:
    raw = ragged_sdpa(heads=(4, 4), seq=(7, 7))
    raw["tensors"].append({"uid": 88, "name": "bias", "dims": [1, 1, 7, 7], "strides": [49, 49, 7, 1],
                           "data_type": "float", "virtual": False})
    raw["nodes"][0]["inputs"]["attn_mask_tensor_uid"] = 88
    reason = executor.check(parse_graph(raw, "mask.json"))
    assert reason and "takes no mask" in reason


def _run(graph_dict: dict, backend: str) -> object:
    data = json.dumps(graph_dict).encode()
    return run_graph(GraphSource("ragged.json", lambda: data), [Config(backend, backend)], SETTINGS,
                     Markers()).configs[0]


@pytest.mark.parametrize("kw", [{}, {"causal": True, "shared": "side", "multiplier": True}, {"stats": True},
                                {"backward": True}, {"backward": True, "causal": True},
                                {"paged": True, "causal": True}])
def test_torch_matches_the_reference(kw: dict[str, object]) -> None:
    pytest.importorskip("torch")
    c = _run(ragged_sdpa(**kw), "torch")   # type: ignore[arg-type]
    assert c.status == "ok" and c.validation == "passed", c.error   # type: ignore[attr-defined]


# ---------------------------------------------------------------- cuDNN: the plan and the session's buffers

def test_cudnn_plan_binds_each_ragged_tensor_to_its_offsets_and_derives_lengths() -> None:
    from hipdnn_trace.backends import cudnn_graph as cg

    graph = _graph(backward=True, shared="side", multiplier=True)
    plan = cg.plan(graph)
    by_name = {d.name: d for d in (*plan.inputs, *plan.outputs)}
    offsets = {d.key: d for d in plan.inputs if d.ragged_elements is not None}
    for name in ("q", "k", "v", "o", "do", "grad_query", "grad_key", "grad_value"):
        assert by_name[name].ragged_offset in offsets, name
    assert by_name["stats"].ragged_offset is None   # dense stats, as the graph declares it
    q_off = offsets[by_name["q"].ragged_offset]
    assert q_off.dims == (4, 1, 1, 1) and q_off.dtype == "INT32" and q_off.ragged_elements == (32, 32, 7)
    assert by_name["seq_len_q"].lengths_of == (32, 32, 7) and by_name["seq_len_kv"].lengths_of == (16, 16, 9)
    assert plan.ops[0].attrs["use_padding_mask"] is True
    assert plan.ops[0].tensors["seq_len_q"] == by_name["seq_len_q"].key


def test_cudnn_paged_plan_takes_seq_len_kv_and_ragged_q_and_o_only() -> None:
    from hipdnn_trace.backends import cudnn_graph as cg

    plan = cg.plan(_graph(paged=True))
    by_name = {d.name: d for d in (*plan.inputs, *plan.outputs)}
    assert by_name["q"].ragged_offset and by_name["output"].ragged_offset
    assert by_name["k"].ragged_offset is None and by_name["seq_len_kv"].lengths_of is None
    assert plan.ops[0].tensors["paged_attention_k_table"] == by_name["page_table_k"].key


def test_cudnn_repro_script_fills_offsets_at_full_length() -> None:
    from hipdnn_trace.backends import cudnn_graph as cg
    from hipdnn_trace.backends.cudnn_graph.script import cudnn_script

    text = cudnn_script(cg.plan(_graph()), title="t", deselect=(), engine=None, scalars={})
    assert "torch.tensor([0, 224, 448, 672], dtype=torch.int32)" in text       # q: 7 tokens of 32 each
    assert "torch.full([3, 1, 1, 1], 9, dtype=torch.int32)" in text            # seq_len_kv: S_max
    assert text.count(".set_ragged_offset(") == 4


class _Buffer:
    """A device buffer stand-in: what the session uploads, and what a kernel would have written."""

    def __init__(self) -> None:
        self.data: np.ndarray | None = None

    def upload(self, array: np.ndarray) -> None:
        self.data = np.array(array, copy=True)

    def fill(self, byte: int, stream: object) -> None:
        self.data = None

    def download(self, dtype: np.dtype, count: int) -> np.ndarray:
        assert self.data is not None
        return self.data.astype(dtype)[:count]


def _mocked_session(graph: Graph) -> object:
    """A CudnnSession without a GPU (mocked buffers and stream): only bind's and fetch's data movement."""
    from types import SimpleNamespace

    from hipdnn_trace.backends import cudnn_graph as cg
    from hipdnn_trace.backends.cudnn import CudnnSession

    s = CudnnSession.__new__(CudnnSession)
    s.graph, s.plan, s._elements, s._cuda_graph = graph, cg.plan(graph), {}, None
    s.options = SimpleNamespace(cuda_graph=False)
    s.stream = SimpleNamespace(handle=0, synchronize=lambda: None)
    s._buffers = {d.key: _Buffer() for d in s.plan.buffers}
    return s


def test_cudnn_session_packs_inputs_and_unpacks_outputs_mocked_gpu() -> None:
    pytest.importorskip("torch")
    graph = _graph(shared="side", multiplier=True)
    x = make_inputs(graph, 8)
    node = graph.nodes[0]
    s = _mocked_session(graph)
    s.bind(x)   # type: ignore[attr-defined]
    by_uid = {d.hipdnn_uid: d for d in s.plan.inputs if d.ragged_elements is None and d.lengths_of is None}  # type: ignore[attr-defined]
    q = graph.by_uid[node.inputs["q"]]
    tokens = x[q.ragged_offset_tensor_uid].reshape(-1).astype(int).tolist()   # type: ignore[index]
    flat = s._buffers[by_uid[q.uid].key].data   # type: ignore[attr-defined]
    for b, n in enumerate(ragged.lengths(tokens)):   # token units: sequence b from token tokens[b], [L, H, D]
        want = x[q.uid][b, :, :n].transpose(1, 0, 2).reshape(-1)
        np.testing.assert_array_equal(flat[tokens[b] * 32:tokens[b + 1] * 32], want)
    q_off = next(d for d in s.plan.inputs if d.key == by_uid[q.uid].ragged_offset)   # type: ignore[attr-defined]
    assert s._buffers[q_off.key].data.tolist() == [t * 32 for t in tokens]   # type: ignore[attr-defined]
    lens = next(d for d in s.plan.inputs if d.name == "seq_len_q")   # type: ignore[attr-defined]
    assert s._buffers[lens.key].data.tolist() == ragged.lengths(tokens)   # type: ignore[attr-defined]
    o = graph.by_uid[node.outputs["o"]]
    ref = executor.evaluate(graph, x).stored[o.uid]
    out_key = next(d.key for d in s.plan.outputs if d.hipdnn_uid == o.uid)   # type: ignore[attr-defined]
    s._buffers[out_key].data = ragged.pack(ref, o, tokens, np.full(o.storage_elements, np.nan, ref.dtype))  # type: ignore[attr-defined]
    got = s.fetch([o.uid])[o.uid]   # type: ignore[attr-defined]
    for b, n in enumerate(ragged.lengths(tokens)):
        np.testing.assert_array_equal(got[b, :, :n], ref[b, :, :n])


@pytest.mark.parametrize("kw", [{"causal": True}, {"backward": True, "shared": "side", "multiplier": True}])
def test_hipdnn_session_packs_as_the_offsets_say_with_stand_in_hipdnn_frontend(
        stand_in_frontend: object, tmp_path: object, kw: dict[str, object]) -> None:
    """The stand-in reads ragged tensors where their offsets say, as hipDNN does: a session that bound
    them at the batch stride would hand it other numbers and fail validation."""
    from pathlib import Path

    from hipdnn_trace.cli import main
    from hipdnn_trace.results.rundir import load_run

    stand_in_frontend("newest")   # type: ignore[operator]
    folder = Path(str(tmp_path))
    (folder / "ragged.json").write_text(json.dumps(ragged_sdpa(**kw)))   # type: ignore[arg-type]
    code = main(["run", str(folder / "ragged.json"), "--backend", "hipdnn", "--engine", "MIOPEN_ENGINE", "-w", "1",
                 "-i", "2", "--out", str(folder / "runs"), "--run-id", "r", "--quiet", "--no-trace"])
    run = load_run(folder / "runs" / "r")
    assert code == 0 and set(run.summary["validation"]) == {"passed"}, run.summary.to_dicts()


def test_paged_without_seq_len_kv_gives_every_sequence_max_seq_len_kv_keys() -> None:
    from hipdnn_trace.backends import cudnn_graph as cg

    raw = ragged_sdpa(paged=True)
    raw["nodes"][0]["inputs"]["seq_len_kv_tensor_uid"] = None
    raw["tensors"] = [t for t in raw["tensors"] if t["name"] != "seq_len_kv"]
    graph = parse_graph(raw, "paged.json")
    node = graph.nodes[0]
    x = make_inputs(graph, 1)
    lq, lkv = attention.seq_lengths(node, graph, {u: x[u] for u in attention.length_uids(node, graph)})
    assert lkv == [9, 9, 9] and lq[0] == 7
    fill = next(d for d in cg.plan(graph).inputs if d.name == "seq_len_kv")
    assert fill.fill == 9 and fill.dtype == "INT32" and fill.dims == (3, 1, 1, 1)
    c = _run(raw, "reference")
    assert c.status == "ok", c.error   # type: ignore[attr-defined]


def test_torch_follows_the_empty_row_contract_for_a_sequence_without_keys() -> None:
    """Offsets the harness would not draw (a sequence with no keys, one with no queries), bound by hand:
    torch gives what the reference gives on every defined row (O 0 and stats -inf without keys)."""
    pytest.importorskip("torch")
    from hipdnn_trace import backends
    from hipdnn_trace.backends.base import RunOptions

    graph = _graph(stats=True)
    node = graph.nodes[0]
    x = make_inputs(graph, 2)
    q, k = (graph.by_uid[node.inputs[p]] for p in ("q", "k"))
    o = graph.by_uid[node.outputs["o"]]
    for t, lens in ((q, [7, 0, 3]), (o, [7, 0, 3]), (k, [2, 5, 0]), (graph.by_uid[node.inputs["v"]], [2, 5, 0])):
        x[t.ragged_offset_tensor_uid] = np.asarray(ragged.offsets_for(lens, t), dtype=np.int32).reshape(4, 1, 1, 1)  # type: ignore[index]
    ref = executor.evaluate(graph, x).stored
    session = backends.get("torch").prepare(graph, None, RunOptions())
    session.bind(x)
    session.execute()
    got = session.fetch([t.uid for t in graph.output_tensors])
    stats = node.outputs["stats"]
    for b, n in ((0, 7), (2, 3)):
        np.testing.assert_allclose(got[o.uid][b, :, :n], ref[o.uid][b, :, :n], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[stats][b, :, :n], ref[stats][b, :, :n], rtol=1e-5, atol=1e-6)
    assert np.isneginf(got[stats][2, :, :3]).all() and not got[o.uid][2, :, :3].any()


def test_rows_past_each_sequence_are_left_out_of_validation() -> None:
    from hipdnn_trace.bench.attention_inputs import undefined_elements

    graph = _graph(backward=True)
    x = make_inputs(graph, 5)
    node = graph.nodes[0]
    lq, lkv = attention.seq_lengths(node, graph, {u: x[u] for u in attention.length_uids(node, graph)})
    masks = undefined_elements(graph, x)
    for port, lens in (("dq", lq), ("dk", lkv), ("dv", lkv)):
        mask = masks[node.outputs[port]]
        for b, n in enumerate(lens):
            assert not mask[b, :, :n].any() and mask[b, :, n:].all()


def test_torch_repro_script_refuses_ragged_graphs_with_the_reason() -> None:
    pytest.importorskip("torch")
    from hipdnn_trace.backends.torch_script import torch_script
    from hipdnn_trace.errors import UnsupportedError

    with pytest.raises(UnsupportedError, match="lengths that are data"):
        torch_script(_graph(), device="cpu", scalars={}, title="t")

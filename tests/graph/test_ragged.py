"""graph/ragged.py: hipDNN's ragged tensors (RFC 0014) -- offsets to lengths by hipDNN's rules, the packed
buffer and back, the load rules with the field named, offset tensors as graph inputs, and golden bundles
holding ragged tensors packed as hipDNN's .bin files do. The attention they feed:
tests/backends/test_ragged_offset_attention.py."""

from __future__ import annotations

import numpy as np
import pytest
from graph_dicts import ragged_sdpa

from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.graph import attention, golden, ragged
from hipdnn_trace.graph.load import parse_graph
from hipdnn_trace.graph.model import Graph


def _graph(**kw: object) -> Graph:
    return parse_graph(ragged_sdpa(**kw), "ragged.json")   # type: ignore[arg-type]


def test_offsets_follow_hipdnns_rules_and_the_multiplier() -> None:
    graph = _graph(shared="side", multiplier=True)
    x = make_inputs(graph, 1)
    node = graph.nodes[0]
    q = graph.by_uid[node.inputs["q"]]
    raw = x[q.ragged_offset_tensor_uid].reshape(-1).astype(int).tolist()   # type: ignore[index]
    lens = ragged.lengths(ragged.tokens(raw, q, 3))
    assert raw[0] == 0 and lens[0] == 7 and all(1 <= n <= 7 for n in lens)   # token units (multiplier H * D)
    assert make_inputs(graph, 1)[q.ragged_offset_tensor_uid].tolist() == x[q.ragged_offset_tensor_uid].tolist()
    assert ragged.offsets_for(lens, q) == raw


@pytest.mark.parametrize("values,match", [([1, 32, 64, 96], "offset\\[0\\] must be 0"),
                                          ([0, 33, 64, 96], "not a whole number of tokens"),
                                          ([0, 64, 32, 96], "must not decrease"),
                                          ([0, 8 * 32, 9 * 32, 10 * 32], "pass S_max")])
def test_bad_offsets_are_one_line_errors(values: list[int], match: str) -> None:
    graph = _graph()
    q = graph.by_uid[graph.nodes[0].inputs["q"]]
    with pytest.raises(ValueError, match=match):
        ragged.tokens(values, q, 3)


def test_pack_and_unpack_are_inverse_on_the_sequences() -> None:
    graph = _graph()
    q = graph.by_uid[graph.nodes[0].inputs["q"]]
    logical = np.random.default_rng(0).normal(size=q.dims)
    bounds = [0, 7, 9, 13]
    back = ragged.unpack(ragged.pack(logical, q, bounds, np.zeros(q.storage_elements)), q, bounds,
                         np.zeros(q.dims))
    for b, n in enumerate(ragged.lengths(bounds)):
        np.testing.assert_array_equal(back[b, :, :n], logical[b, :, :n])
        assert not back[b, :, n:].any()


def _edit(edit: object) -> str:
    raw = ragged_sdpa()
    edit(raw)   # type: ignore[operator]
    with pytest.raises(Exception) as info:
        parse_graph(raw, "bad.json")
    return str(info.value)


def _tensor(raw: dict, name: str) -> dict:
    return next(t for t in raw["tensors"] if t["name"] == name)


def test_load_refuses_ragged_forms_with_the_field_named() -> None:
    assert "o must carry ragged_offset_tensor_uid like q" in _edit(lambda r: _tensor(r, "output").pop(
        "ragged_offset_tensor_uid"))
    assert "must be int32 or int64, not float" in _edit(lambda r: _tensor(r, "q_ragged_offset").update(
        data_type="float"))
    assert "expected [B + 1, 1, 1, 1] = [4, 1, 1, 1]" in _edit(lambda r: _tensor(r, "q_ragged_offset").update(
        dims=[3, 1, 1, 1]))
    assert "not token-major" in _edit(lambda r: _tensor(r, "q").update(strides=[224, 56, 8, 1]))
    assert "is not a tensor of the graph" in _edit(lambda r: _tensor(r, "q").update(ragged_offset_tensor_uid=999))
    assert "plain graph input" in _edit(lambda r: _tensor(r, "k_ragged_offset").update(virtual=True))


def test_seq_len_with_ragged_offsets_is_refused() -> None:
    raw = ragged_sdpa()
    raw["tensors"].append({"uid": 77, "name": "seq_len_q", "dims": [3, 1, 1, 1], "strides": [1, 1, 1, 1],
                           "data_type": "int32", "virtual": False})
    raw["nodes"][0]["inputs"]["seq_len_q_tensor_uid"] = 77
    with pytest.raises(Exception, match="takes no seq_len_q"):
        parse_graph(raw, "lens.json")


def test_offset_tensors_are_graph_inputs_read_by_the_node() -> None:
    from hipdnn_trace.commands.inspect import tensor_role

    graph = _graph(shared="side")
    node = graph.nodes[0]
    q = graph.by_uid[node.inputs["q"]]
    assert graph.reads(node)["q.ragged_offset"] == q.ragged_offset_tensor_uid
    offsets = graph.by_uid[q.ragged_offset_tensor_uid]   # type: ignore[index]
    assert offsets in graph.input_tensors and tensor_role(graph, offsets) == "in"
    assert any("ragged (RFC 0014)" in n for n in attention.notes(node, graph))




def test_pack_into_a_torch_buffer_equals_numpy() -> None:
    torch = pytest.importorskip("torch")
    graph = _graph()
    q = graph.by_uid[graph.nodes[0].inputs["q"]]
    logical = np.random.default_rng(1).normal(size=q.dims)
    bounds = [0, 3, 10, 11]
    want = ragged.pack(logical, q, bounds, np.zeros(q.storage_elements))
    got = ragged.pack(torch.from_numpy(logical), q, bounds, torch.zeros(q.storage_elements, dtype=torch.float64))
    np.testing.assert_array_equal(got.numpy(), want)
    back = ragged.unpack(got, q, bounds, torch.zeros(q.dims, dtype=torch.float64))
    np.testing.assert_array_equal(back.numpy()[0, :, :3], logical[0, :, :3])


def test_golden_bundle_holds_ragged_tensors_packed_and_reads_them_back(tmp_path) -> None:
    graph = _graph(shared="side", multiplier=True)
    x = make_inputs(graph, 2)
    node = graph.nodes[0]
    q = graph.by_uid[node.inputs["q"]]
    tokens = x[q.ragged_offset_tensor_uid].reshape(-1).astype(int).tolist()   # type: ignore[index]
    o = graph.by_uid[node.outputs["o"]]
    path = golden.write_bundle(tmp_path, graph, {**x, o.uid: np.zeros(o.dims)})
    data = np.frombuffer(golden.tensor_path(path, q.uid).read_bytes(), dtype="<f4")
    for b, n in enumerate(ragged.lengths(tokens)):   # hipDNN's .bin: sequence b from token tokens[b]
        np.testing.assert_array_equal(data[tokens[b] * 32:tokens[b + 1] * 32],
                                      x[q.uid][b, :, :n].transpose(1, 0, 2).reshape(-1))
    _, back = golden.read_bundle(path)
    for b, n in enumerate(ragged.lengths(tokens)):
        np.testing.assert_array_equal(back[q.uid][b, :, :n], x[q.uid][b, :, :n])

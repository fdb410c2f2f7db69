"""dnn-providers' golden bundles spell half as ``float16`` (ROCm/rocm-libraries dnn-providers
integration-tests, generate_sdpa_fwd_golden.py @ 3005a4b1); read as hipDNN's ``half``, the same graph."""

from __future__ import annotations

import json

import pytest
from reliability_helpers import graph_json

from hipdnn_trace.errors import GraphError
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.write import graph_to_json


def _respelled(data: dict, old: str, new: str) -> dict:
    text = json.dumps(data).replace(f'"{old}"', f'"{new}"')
    return json.loads(text)


def test_float16_is_half_and_the_same_graph() -> None:
    half = graph_json("g", dtype="half")
    as_float16 = _respelled(half, "half", "float16")
    assert "float16" in json.dumps(as_float16)
    a = load_bytes(json.dumps(half).encode(), "half.json")
    b = load_bytes(json.dumps(as_float16).encode(), "float16.json")
    assert a.graph_id == b.graph_id
    assert {t.data_type for t in b.tensors} == {"half"}
    assert '"float16"' not in json.dumps(graph_to_json(b))   # written back in the frontend's spelling


def test_an_unknown_spelling_stays_a_one_line_error() -> None:
    with pytest.raises(GraphError, match=r"unknown data type 'float17'"):
        load_bytes(json.dumps(_respelled(graph_json("g", dtype="half"), "half", "float17")).encode(), "x.json")


def _sdpa_json(mma_core_mode: str) -> dict:
    b = GraphBuilder("attn", io="half")
    q, k, v = (b.tensor(n, [1, 2, 8, 16]) for n in ("Q", "K", "V"))
    b.sdpa(q, k, v, scale=0.25)
    data = b.to_json()
    data["nodes"][0]["attributes"]["mma_core_mode"] = mma_core_mode
    return data


# mma_core_mode holds a DataType: the frontend's graphs write the enum name ("UNSET": dnn-benchmarking
# graphs/sample_sdpa.json @ 72505df3), dnn-providers' generators the JSON string ("float":
# generate_sdpa_fwd_golden.py @ 3005a4b1); "half"/"float16" are the same type in either case.
@pytest.mark.parametrize("spelling", ["UNSET", "unset", "float", "FLOAT", "half", "HALF", "float16", "bfloat16"])
def test_every_mma_core_mode_spelling_is_read_and_kept(spelling: str) -> None:
    g = load_bytes(json.dumps(_sdpa_json(spelling)).encode(), "attn.json")
    assert g.nodes[0].params["mma_core_mode"] == spelling
    assert graph_to_json(g)["nodes"][0]["attributes"]["mma_core_mode"] == spelling   # written back as read


def test_an_unknown_mma_core_mode_stays_a_one_line_error() -> None:
    with pytest.raises(GraphError, match=r"attributes\.mma_core_mode: unknown mma_core_mode 'tf32'") as info:
        load_bytes(json.dumps(_sdpa_json("tf32")).encode(), "attn.json")
    assert "\n" not in str(info.value)

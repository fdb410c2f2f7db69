"""dnn-providers' golden bundles spell half as ``float16`` (ROCm/rocm-libraries dnn-providers
integration-tests, generate_sdpa_fwd_golden.py @ 3005a4b1); read as hipDNN's ``half``, the same graph."""

from __future__ import annotations

import json

import pytest
from reliability_helpers import graph_json

from hipdnn_trace.errors import GraphError
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

"""The newest hipDNN schema's fields are read, never refused, written back unchanged, and kept in or
out of ``graph_id`` as docs/hipdnn-format.md 1.2 and 1.4 say.

Field definitions (ROCm/rocm-libraries): graph ``id``, ``min_required_engine_api_version``,
``is_override_shape_enabled`` from ``projects/hipdnn/flatbuffers_sdk/schemas/graph.fbs`` @ 463c78a8 (all three
``cache_ignore``); tensor ``ragged_offset_tensor_uid``, ``ragged_offset_multiplier``, ``alignment``,
``is_runtime_pass_by_value`` from ``tensor_attributes.fbs`` @ 33f48644; SDPA ``implementation``
(``AttentionImplementation`` AUTO/COMPOSITE/UNIFIED) from ``sdpa_attributes.fbs`` @ 01b4ecd0. The orchestrator's
``test-graphs/*.json`` (@ 68df9330) write ``"is_override_shape_enabled": false`` on every graph.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from reliability_helpers import graph_json

from hipdnn_trace.errors import GraphError
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.graph.write import dumps, graph_to_json


def _load(data: dict, name: str = "g.json") -> Graph:
    return load_bytes(json.dumps(data).encode(), name)


def _round_trip(data: dict) -> tuple[Graph, Graph]:
    """load -> write -> load; the written text must carry the same JSON value as the first load's."""
    first = _load(data, "first.json")
    second = load_bytes(dumps(first).encode(), "second.json")
    assert graph_to_json(second) == graph_to_json(first)
    return first, second


GRAPH_FIELDS: dict[str, Any] = {
    "id": "3f2c9a4e-8b1d-4e6f-a0c2-5d7e9b1a3c4f",
    "min_required_engine_api_version": {"major": 1, "minor": 2, "patch": 0},
    "is_override_shape_enabled": True,
}


@pytest.mark.parametrize("key", sorted(GRAPH_FIELDS))
def test_graph_field_round_trips_and_leaves_graph_id_alone(key: str) -> None:
    plain = graph_json("g")
    data = {**plain, key: GRAPH_FIELDS[key]}
    first, second = _round_trip(data)
    assert first.extra[key] == GRAPH_FIELDS[key] == second.extra[key]
    assert json.loads(dumps(second))[key] == GRAPH_FIELDS[key]
    # cache_ignore in hipDNN's schema: a result for one value holds for all, so the id is the plain graph's
    assert first.graph_id == second.graph_id == _load(plain).graph_id


def test_a_graph_field_of_another_value_is_still_the_same_graph() -> None:
    a = _load({**graph_json("g"), "is_override_shape_enabled": False, "id": "00000000-0000-4000-8000-000000000001"})
    b = _load({**graph_json("g"), "is_override_shape_enabled": True, "id": "00000000-0000-4000-8000-000000000002"})
    assert a.graph_id == b.graph_id
    assert a.extra != b.extra   # kept apart all the same: written back as each file said


def _with_tensor_field(key: str, value: Any, *, index: int = 0) -> dict:
    data = graph_json("g")
    data["tensors"][index][key] = value
    return data


# (field, a value that differs from hipDNN's default, the Tensor property that reads it)
TENSOR_FIELDS = [
    ("alignment", 64, "alignment"),
    ("ragged_offset_multiplier", 8, "ragged_offset_multiplier"),
    ("is_runtime_pass_by_value", True, "is_runtime_pass_by_value"),
]


@pytest.mark.parametrize(("key", "value", "prop"), TENSOR_FIELDS)
def test_tensor_field_round_trips_and_changes_graph_id(key: str, value: Any, prop: str) -> None:
    first, second = _round_trip(_with_tensor_field(key, value))
    assert getattr(first.tensors[0], prop) == value == getattr(second.tensors[0], prop)
    # hipDNN folds every tensor field into its cache key (none is cache_ignore): so does graph_id
    assert first.graph_id == second.graph_id != _load(graph_json("g")).graph_id


def test_ragged_offset_tensor_uid_round_trips_and_changes_graph_id() -> None:
    data = graph_json("g")
    uid = max(t["uid"] for t in data["tensors"]) + 1
    data["tensors"].append({"uid": uid, "name": "offsets", "dims": [3], "strides": [1], "data_type": "int32",
                            "virtual": False})
    plain = _load(data)
    data["tensors"][0]["ragged_offset_tensor_uid"] = uid
    first, second = _round_trip(data)
    assert first.tensors[0].ragged_offset_tensor_uid == uid == second.tensors[0].ragged_offset_tensor_uid
    assert plain.tensors[0].ragged_offset_tensor_uid is None
    assert first.graph_id == second.graph_id != plain.graph_id


def test_schema_defaults_read_when_absent() -> None:
    t = _load(graph_json("g")).tensors[0]
    assert (t.alignment, t.ragged_offset_multiplier, t.is_runtime_pass_by_value, t.ragged_offset_tensor_uid) \
        == (16, 1, False, None)


def test_null_ragged_offset_tensor_uid_is_read() -> None:
    assert _load(_with_tensor_field("ragged_offset_tensor_uid", None)).tensors[0].ragged_offset_tensor_uid is None


@pytest.mark.parametrize(("key", "value", "problem"), [
    ("alignment", "16", r"tensors\[0\]\.alignment: expected an integer"),
    ("alignment", -1, r"tensors\[0\]\.alignment: -1 must be >= 0"),
    ("ragged_offset_multiplier", 0, r"tensors\[0\]\.ragged_offset_multiplier: 0 must be >= 1"),
    ("ragged_offset_tensor_uid", 1.5, r"tensors\[0\]\.ragged_offset_tensor_uid: expected an integer"),
    ("is_runtime_pass_by_value", 1, r"tensors\[0\]\.is_runtime_pass_by_value: expected true or false"),
])
def test_a_mistyped_tensor_field_is_a_one_line_error(key: str, value: Any, problem: str) -> None:
    with pytest.raises(GraphError, match=problem) as info:
        _load(_with_tensor_field(key, value))
    assert "\n" not in str(info.value)


def _sdpa(**attributes: Any) -> dict:
    b = GraphBuilder("attn", io="half")
    q, k, v = (b.tensor(n, [1, 2, 8, 16]) for n in ("Q", "K", "V"))
    b.sdpa(q, k, v, scale=1 / math.sqrt(16))
    data = b.to_json()
    data["nodes"][0]["attributes"].update(attributes)
    return data


@pytest.mark.parametrize("value", ["AUTO", "COMPOSITE", "UNIFIED", "unified"])
def test_sdpa_implementation_round_trips(value: str) -> None:
    first, second = _round_trip(_sdpa(implementation=value))
    assert first.nodes[0].params["implementation"] == value == second.nodes[0].params["implementation"]
    # not cache_ignore in sdpa_attributes.fbs: it picks hipDNN's kernel path, so it is part of graph_id
    if value != "AUTO":
        assert first.graph_id != _load(_sdpa(implementation="AUTO")).graph_id


def test_an_unknown_sdpa_implementation_is_a_one_line_error() -> None:
    with pytest.raises(GraphError, match=r"attributes\.implementation: unknown implementation 'FUSED' "
                                         r"\(hipDNN: AUTO, COMPOSITE, UNIFIED\)"):
        _load(_sdpa(implementation="FUSED"))


def test_the_orchestrators_graph_level_fields_load_together() -> None:
    """Every new field at once, as the newest frontend writes them (compact, keys sorted)."""
    data = {**graph_json("g"), **GRAPH_FIELDS}
    for t in data["tensors"]:
        t.update({"alignment": 16, "is_runtime_pass_by_value": False, "ragged_offset_multiplier": 1})
    first, second = _round_trip(data)
    assert first.graph_id == second.graph_id
    assert not first.warnings


@pytest.mark.parametrize(("key", "value", "problem"), [
    ("id", 42, r"\$\.id: expected a UUID string"),
    ("is_override_shape_enabled", "false", r"\$\.is_override_shape_enabled: expected true or false"),
])
def test_a_mistyped_graph_field_is_a_one_line_error(key: str, value: Any, problem: str) -> None:
    """hipDNN's own reader throws on these too (json/Graph.hpp @ 1e919aac)."""
    with pytest.raises(GraphError, match=problem) as info:
        _load({**graph_json("g"), key: value})
    assert "\n" not in str(info.value)

"""The JSON form of a graph and the graph_id hash over it.

What :class:`~hipdnn_trace.graph.model.Graph` (its ``graph_id``) and ``write.py`` (files) both need,
kept apart so neither imports the other: model -> canonical -> ops, and write -> canonical. Each key
goes back to the section it was read from (or, for built graphs, where hipDNN's serializer puts it),
so a loaded file round-trips to the same JSON value and hipDNN reads what we write.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from hipdnn_trace.graph import ops
from hipdnn_trace.graph.opspec import DERIVED, UID_SUFFIX

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Graph, Node, Tensor

_SECTION_ORDER = ("inputs", "outputs", "parameters", "attributes")

#: Graph keys kept and written back but left out of ``graph_id``: hipDNN marks each ``cache_ignore``
#: in its schema (``flatbuffers_sdk/schemas/graph.fbs`` @ 463c78a8), i.e. a result measured with one
#: value holds for every value. ``id`` names a graph, it does not describe it; the API floor and the
#: override-shape opt-in change what may run it, not what it computes (docs/hipdnn-format.md 1.2).
IDENTITY_NEUTRAL_KEYS = ("id", "min_required_engine_api_version", "is_override_shape_enabled")
#: node options that describe the op's cost (hipDNN RFC 0019's universal heuristic descriptor: JsonLogic of its
#: FLOPs and bytes), not what it computes: written back, not hashed, so a graph that carries them joins the
#: runs of the same graph without them
COST_MODEL_PARAMS = ("umd_flops", "umd_bytes")


def tensor_to_json(t: Tensor) -> dict[str, Any]:
    out: dict[str, Any] = {
        "uid": t.uid,
        "name": t.name,
        "dims": list(t.dims),
        "strides": list(t.strides),
        "data_type": t.data_type,
        "virtual": t.virtual,
    }
    if t.value_type is not None:
        out["value_type"] = t.value_type
        out["value"] = t.value
    out.update(t.extra)
    return out


def _default_section(node: Node, key: str, is_port: bool, is_output: bool) -> str:
    spec = ops.spec(node.type)
    if is_port:
        if spec is not None and spec.layout == "flat":
            return "node"
        return "outputs" if is_output else "inputs"
    if spec is not None and key in spec.options:
        return spec.options[key]
    return "attributes"


def node_to_json(node: Node, *, legacy: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"name": node.name, "type": node.type,
                           "compute_data_type": node.compute_data_type}
    if legacy and node.compute_data_type == "unset":
        del out["compute_data_type"]
    sections: dict[str, dict[str, Any]] = {s: {} for s in _SECTION_ORDER}
    flat: dict[str, Any] = {}

    def place(key: str, value: Any, is_port: bool, is_output: bool = False) -> None:
        where = node.param_sections.get(key) or _default_section(node, key, is_port, is_output)
        if where.startswith(DERIVED):   # a port read from a uid list: the list itself is a param
            return
        (flat if where == "node" else sections[where])[key] = value

    for port, uid in node.inputs.items():
        place(port + UID_SUFFIX, list(uid) if isinstance(uid, tuple) else uid, True)
    for key, value in node.params.items():
        place(key, value, False)
    for port, uid in node.outputs.items():
        place(port + UID_SUFFIX, uid, True, True)
    for name in _SECTION_ORDER:
        if sections[name] or (name in ("inputs", "outputs") and not flat):
            out[name] = sections[name]
    out.update(flat)
    return out


def graph_to_json(graph: Graph) -> dict[str, Any]:
    legacy = graph.legacy_keys
    out: dict[str, Any] = {
        "name": graph.name,
        "compute_type" if legacy else "compute_data_type": graph.compute_data_type,
        "io_type" if legacy else "io_data_type": graph.io_data_type,
        "intermediate_type" if legacy else "intermediate_data_type": graph.intermediate_data_type,
        "tensors": [tensor_to_json(t) for t in graph.tensors],
        "nodes": [node_to_json(n, legacy=legacy) for n in graph.nodes],
    }
    out.update(graph.extra)
    return out


def canonical(graph: Graph) -> str:
    """One string per graph: sorted keys, no whitespace. Key order and layout do not matter, nor do
    the :data:`IDENTITY_NEUTRAL_KEYS` and the nodes' :data:`COST_MODEL_PARAMS` (written back by
    ``graph_to_json``, not hashed)."""
    data = graph_to_json(graph)
    for key in IDENTITY_NEUTRAL_KEYS:
        data.pop(key, None)
    for node in data["nodes"]:
        for holder in (node, *(v for v in node.values() if isinstance(v, dict))):
            for key in COST_MODEL_PARAMS:
                holder.pop(key, None)
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def graph_id(graph: Graph) -> str:
    """16 hex digits of SHA-256 over the canonical JSON: joins runs across machines."""
    return hashlib.sha256(canonical(graph).encode()).hexdigest()[:16]

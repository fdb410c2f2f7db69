"""What hipDNN's node types are: their ports, options, shape rules and cost.

One :class:`OpSpec` per node ``type`` string, collected from the spec module of every op
family in ``graph/families.py``. The loader uses them to classify ports and check shapes,
``inspect`` and the harness use them for FLOPs and bytes, and the builder uses them to lay
options out where hipDNN puts them. Port names are written without hipDNN's ``_tensor_uid``
suffix.

Sources: hipDNN's JSON utilities (``hipdnn_data_sdk/utilities/json/*.hpp``) and
frontend attributes; docs/hipdnn-format.md has the details and citations.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from math import prod
from types import ModuleType
from typing import TYPE_CHECKING, Any

from hipdnn_trace.graph.dtypes import DTYPES
from hipdnn_trace.graph.families import FAMILIES, Absent, Family
from hipdnn_trace.graph.opspec import OpSpec

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Graph, Node

__all__ = ["FAMILY_OF", "OpSpec", "SPECS", "absent_refusal", "family_types", "graph_bytes", "graph_flops",
           "has_flop_formula", "node_flops", "node_notes", "spec"]

#: each family's spec module, by family name
SPEC_MODULES: dict[str, ModuleType] = {f.name: import_module(f.spec) for f in FAMILIES}

SPECS: dict[str, OpSpec] = {s.type: s for f in FAMILIES for s in SPEC_MODULES[f.name].SPECS}

#: the family of every node type
FAMILY_OF: dict[str, Family] = {s.type: f for f in FAMILIES for s in SPEC_MODULES[f.name].SPECS}


def family_types(family: Family) -> tuple[str, ...]:
    """The node types of ``family``, in its spec module's order."""
    return tuple(s.type for s in SPEC_MODULES[family.name].SPECS)


def absent_refusal(node: Node, piece: Absent, backend: str) -> str:
    """The one line ``backend`` gives for a node of a family it does not have: the spec module's
    own wording when it has one (``refusal(node, backend)``), else the entry's reason."""
    words = getattr(SPEC_MODULES[FAMILY_OF[node.type].name], "refusal", None)
    return words(node, backend) if words is not None else f"{node.op} {node.name!r}: {piece.reason}"


#: Node types hipDNN defines that hipdnn-trace loads but has no reference for yet.
#: (newest graph.fbs NodeAttributes union; docs/hipdnn-format.md section 2.0)
KNOWN_UNMODELLED: frozenset[str] = frozenset({
    "LayernormFpropAttributes",
})


def spec(node_type: str) -> OpSpec | None:
    return SPECS.get(node_type)


def node_flops(node: Node, graph: Graph, values: Mapping[int, Any] | None = None) -> float:
    """FLOPs of one node; ``values`` (input arrays by uid) lets data-dependent counts use
    the real numbers (attention's per-sequence lengths)."""
    s = SPECS.get(node.type)
    if not s or not s.flops:
        return 0.0
    if values is not None and s.flops_use_values:
        return float(s.flops(node, graph, dict(values)))   # type: ignore[call-arg]
    return float(s.flops(node, graph))


def has_flop_formula(node_type: str) -> bool:
    """Whether FLOPs of this node type are counted (a CustomOp's are not: they count as 0 in
    ``graph_flops``, which is then a lower bound)."""
    s = SPECS.get(node_type)
    return bool(s and s.flops)


def node_notes(node: Node, graph: Graph) -> list[str]:
    """Facts about a node a reader should know (defaults applied, how FLOPs were counted)."""
    s = SPECS.get(node.type)
    return list(s.notes(node, graph)) if s and s.notes else []


def graph_flops(graph: Graph, values: Mapping[int, Any] | None = None) -> float:
    """Analytical floating-point operations of one execution of the graph (with
    ``values``, counted from the bound inputs where the count depends on them)."""
    return sum(node_flops(n, graph, values) for n in graph.nodes)


def graph_bytes(graph: Graph) -> float:
    """Minimum device traffic: every non-virtual tensor a node touches, read or written once.

    Virtual tensors stay on chip in a fused kernel, so they are not counted; a real
    unfused execution moves more, which is what a low GB/s % of peak then shows.
    """
    touched = {u for n in graph.nodes for u in (*n.input_uids(), *n.output_uids())}
    total = 0.0
    for uid in touched:
        t = graph.by_uid.get(uid)
        if t is None or t.virtual or t.is_value:
            continue
        dt = DTYPES.get(t.data_type)
        total += prod(t.dims) * (dt.bits / 8 if dt else 4)
    return total

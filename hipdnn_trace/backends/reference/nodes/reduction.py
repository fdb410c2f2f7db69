"""Reduction nodes -> ``ops/reduction.py``; modes the reference lacks are refused."""

from __future__ import annotations

from hipdnn_trace.backends.reference.nodes._common import Handler, Inputs, Outputs, dims
from hipdnn_trace.backends.reference.ops.reduction import REDUCTION_MODES, reduce
from hipdnn_trace.graph.model import Graph, Node


def _reduction(node: Node, graph: Graph, x: Inputs) -> Outputs:
    return {"out": reduce(str(node.params.get("mode", "")), x["in"], out_shape=dims(graph, node, "out"))}


def check(node: Node, graph: Graph) -> str | None:
    mode = str(node.params.get("mode", "")).upper()
    if mode.removesuffix("_OP") not in REDUCTION_MODES:
        return f"unsupported reduction mode {mode}"
    return None


HANDLERS: dict[str, Handler] = {"ReductionAttributes": _reduction}

"""Matmul nodes -> ``ops/matmul.py``."""

from __future__ import annotations

from hipdnn_trace.backends.reference.nodes._common import Handler, Inputs, Outputs
from hipdnn_trace.backends.reference.ops.matmul import matmul
from hipdnn_trace.graph.model import Graph, Node


def _matmul(node: Node, graph: Graph, x: Inputs) -> Outputs:
    return {"c": matmul(x["a"], x["b"])}


HANDLERS: dict[str, Handler] = {"MatmulAttributes": _matmul}

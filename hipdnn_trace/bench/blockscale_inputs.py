"""Block-scale inputs with a domain: a dequantize's scale is a magnitude (e8m0 has no sign)."""

from __future__ import annotations

from hipdnn_trace.graph import blockscale
from hipdnn_trace.graph.model import Node


def domain(node: Node, port: str) -> str | None:
    return "positive" if node.type == blockscale.DEQUANTIZE and port == "scale" else None

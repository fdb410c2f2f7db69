"""MoE grouped matmul nodes (forward, weight gradient) -> ``ops/moe.py``."""

from __future__ import annotations

from hipdnn_trace.backends.reference.nodes._common import Handler, Inputs, Outputs, dims
from hipdnn_trace.backends.reference.ops.moe import moe_grouped_matmul, moe_grouped_matmul_backward
from hipdnn_trace.graph import moe
from hipdnn_trace.graph.model import Graph, Node


def _moe(node: Node, graph: Graph, x: Inputs) -> Outputs:
    return {"output": moe_grouped_matmul(
        x["token"], x["weight"], x["first_token_offset"], mode=moe.mode(node), top_k=int(moe.top_k(node)),
        token_index=x.get("token_index"), token_ks=x.get("token_ks"), output_rows=dims(graph, node, "output")[1])}


def _moe_backward(node: Node, graph: Graph, x: Inputs) -> Outputs:
    return {"dweight": moe_grouped_matmul_backward(x["doutput"], x["token"], x["first_token_offset"])}


HANDLERS: dict[str, Handler] = {moe.MOE: _moe, moe.MOE_BACKWARD: _moe_backward}

"""Resample (pooling) nodes, forward and backward -> ``ops/pooling.py``."""

from __future__ import annotations

from hipdnn_trace.backends.reference.nodes._common import Handler, Inputs, Outputs, dims
from hipdnn_trace.backends.reference.ops.pooling import pool_backward, pool_forward
from hipdnn_trace.graph import resample
from hipdnn_trace.graph.model import Graph, Node


def _fwd(node: Node, graph: Graph, x: Inputs) -> Outputs:
    y, index = pool_forward(x["x"], resample.pooling(node), with_index=node.outputs.get("index") is not None)
    return {"y": y, "index": index}


def _bwd(node: Node, graph: Graph, x: Inputs) -> Outputs:
    return {"dx": pool_backward(x["dy"], resample.pooling(node), dims(graph, node, "dx"), x.get("index"))}


HANDLERS: dict[str, Handler] = {resample.RESAMPLE_FWD: _fwd, resample.RESAMPLE_BWD: _bwd}

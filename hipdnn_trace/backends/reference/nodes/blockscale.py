"""Block-scaled quantize / dequantize nodes -> ``ops/blockscale.py``."""

from __future__ import annotations

from hipdnn_trace.backends.reference.nodes._common import Handler, Inputs, Outputs, compute_type
from hipdnn_trace.backends.reference.ops.blockscale import block_dequantize, block_quantize
from hipdnn_trace.backends.reference.ops.rounding import stored_values
from hipdnn_trace.graph import blockscale
from hipdnn_trace.graph.model import Graph, Node


def _quantize(node: Node, graph: Graph, x: Inputs) -> Outputs:
    y_type, scale_type = (graph.by_uid[node.outputs[p]].data_type for p in ("y", "scale"))
    y, scale = block_quantize(x["x"], int(node.params["block_size"]), blockscale.quantize_axis(node, graph),
                              y_type, scale_type, compute_type(node, graph))
    # the stored codes are the result: a device is compared with the values hipDNN stores, not with
    # x / scale before rounding (which no format can hold)
    return {"y": stored_values(y, y_type), "scale": scale}


def _dequantize(node: Node, graph: Graph, x: Inputs) -> Outputs:
    return {"y": block_dequantize(x["x"], x["scale"], blockscale.dequantize_blocks(node, graph),
                                  negative=bool(node.params.get("is_negative_scale")),
                                  compute=compute_type(node, graph))}


HANDLERS: dict[str, Handler] = {blockscale.QUANTIZE: _quantize, blockscale.DEQUANTIZE: _dequantize}

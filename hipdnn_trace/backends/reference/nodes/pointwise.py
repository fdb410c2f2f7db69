"""Pointwise nodes -> ``ops/pointwise.py``; modes the reference lacks are refused."""

from __future__ import annotations

from hipdnn_trace.backends.reference.nodes._common import Handler, Inputs, Outputs, dims
from hipdnn_trace.backends.reference.ops.pointwise import pointwise, pointwise_arity
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.model import Graph, Node


def _pointwise(node: Node, graph: Graph, x: Inputs) -> Outputs:
    mode = node.params.get("operation")
    if not isinstance(mode, str):
        raise UnsupportedError(f"pointwise node {node.name!r} has no operation")
    operands = [x[p] for p in ("in_0", "in_1", "in_2") if x.get(p) is not None]
    p = node.params
    out = pointwise(
        mode, operands,
        relu_lower_clip=p.get("relu_lower_clip"), relu_upper_clip=p.get("relu_upper_clip"),
        relu_lower_clip_slope=p.get("relu_lower_clip_slope"), swish_beta=p.get("swish_beta"),
        elu_alpha=p.get("elu_alpha"), softplus_beta=p.get("softplus_beta"),
        axis=p.get("axis_tensor_uid"), out_shape=dims(graph, node, "out_0"),
    )
    return {"out_0": out}


def check(node: Node, graph: Graph) -> str | None:
    """A mode the reference has no formula for."""
    try:
        pointwise_arity(str(node.params.get("operation", "")))
    except UnsupportedError as exc:
        return str(exc)
    return None


HANDLERS: dict[str, Handler] = {"PointwiseAttributes": _pointwise}

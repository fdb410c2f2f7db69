"""Convolution nodes (fprop, dgrad, wgrad) -> ``ops/conv.py``."""

from __future__ import annotations

from typing import Any

from hipdnn_trace.backends.reference.nodes._common import Handler, Inputs, Outputs, dims
from hipdnn_trace.backends.reference.ops.conv import conv_dgrad, conv_fwd, conv_wgrad
from hipdnn_trace.graph.model import Graph, Node


def _options(node: Node) -> dict[str, Any]:
    mode = str(node.params.get("conv_mode", "CROSS_CORRELATION")).upper()
    if mode == "UNSET":   # hipDNN's default mode is cross-correlation, like cuDNN's
        mode = "CROSS_CORRELATION"
    return {
        "pre_padding": node.params["pre_padding"],
        "post_padding": node.params["post_padding"],
        "stride": node.params["stride"],
        "dilation": node.params["dilation"],
        "mode": mode,
    }


def _fwd(node: Node, graph: Graph, x: Inputs) -> Outputs:
    return {"y": conv_fwd(x["x"], x["w"], **_options(node))}


def _dgrad(node: Node, graph: Graph, x: Inputs) -> Outputs:
    return {"dx": conv_dgrad(x["dy"], x["w"], x_shape=dims(graph, node, "dx"), **_options(node))}


def _wgrad(node: Node, graph: Graph, x: Inputs) -> Outputs:
    return {"dw": conv_wgrad(x["x"], x["dy"], w_shape=dims(graph, node, "dw"), **_options(node))}


HANDLERS: dict[str, Handler] = {
    "ConvolutionFwdAttributes": _fwd,
    "ConvolutionBwdAttributes": _dgrad,
    "ConvolutionWrwAttributes": _wgrad,
}

"""Convolution fprop, dgrad and wgrad -> ``conv_fprop`` / ``conv_dgrad`` / ``conv_wgrad``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hipdnn_trace.backends.cudnn_graph.builder import PlanFn, _Builder
from hipdnn_trace.backends.cudnn_graph.plan_types import EnumValue
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.model import Node


def conv(b: _Builder, node: Node) -> None:
    p = node.params
    rank = len(b.graph.by_uid[node.input_uids()[0]].dims)
    if rank < 4:
        raise UnsupportedError(f"{node.op} {node.name!r}: cuDNN convolutions need rank 4 or 5 tensors, got {rank}")
    mode = str(p.get("conv_mode", "CROSS_CORRELATION")).upper()
    attrs: dict[str, Any] = {"pre_padding": list(p["pre_padding"]), "post_padding": list(p["post_padding"]),
                             "stride": list(p["stride"]), "dilation": list(p["dilation"])}
    if mode == "CONVOLUTION":
        attrs["convolution_mode"] = EnumValue("convolution_mode", "CONVOLUTION")
    elif mode not in ("CROSS_CORRELATION", "UNSET"):
        raise UnsupportedError(f"{node.op} {node.name!r}: conv_mode {mode} unknown to cuDNN")
    if node.type == "ConvolutionFwdAttributes":
        ins = {"image": b.tensor(node.inputs["x"], "x"), "weight": b.tensor(node.inputs["w"], "w")}
        method, out = "conv_fprop", node.outputs["y"]
        operands = (node.inputs["x"], node.inputs["w"])
    elif node.type == "ConvolutionBwdAttributes":
        ins = {"loss": b.tensor(node.inputs["dy"], "dy"), "filter": b.tensor(node.inputs["w"], "w")}
        method, out = "conv_dgrad", node.outputs["dx"]
        operands = (node.inputs["dy"], node.inputs["w"])
    else:
        ins = {"image": b.tensor(node.inputs["x"], "x"), "loss": b.tensor(node.inputs["dy"], "dy")}
        method, out = "conv_wgrad", node.outputs["dw"]
        operands = (node.inputs["x"], node.inputs["dy"])
    note_fp32(b, operands)
    b.call(node, method, ins, [b.output(out)], attrs)


def note_fp32(b: _Builder, operands: Sequence[int]) -> None:
    if any(b.graph.by_uid[u].data_type == "float" for u in operands):
        b.plan.fp32_math = True


OPS: dict[str, PlanFn] = dict.fromkeys(("ConvolutionFwdAttributes", "ConvolutionBwdAttributes",
                                        "ConvolutionWrwAttributes"), conv)

"""MoE grouped matmul -> cuDNN's ``moe_grouped_matmul`` / ``moe_grouped_matmul_bwd``.

cuDNN's operation has hipDNN's ports and layout (token ``[1, T, K]``, weight ``[E, K, N]``,
first_token_offset ``[E, 1, 1]`` int32, routing ``[1, R, 1]``; frontend
``python/pygraph/pygraph.cpp``, test ``test_moe_grouped_matmul.py``). It needs cuDNN >= 9.18
for the forward and >= 9.22 (with cuBLASLt >= 13.5) for the backward; an older library's
refusal is reported as cuDNN's own reason. A batched offset table (G = batch x E groups) is
passed as it is, as cuDNN's own WoQ sample does (``samples/cpp/moe_grouped_matmul``).
"""

from __future__ import annotations

from hipdnn_trace.backends.cudnn_graph.builder import PlanFn, _Builder
from hipdnn_trace.backends.cudnn_graph.plan_types import EnumValue
from hipdnn_trace.graph import moe
from hipdnn_trace.graph.model import Node


def moe_grouped_matmul(b: _Builder, node: Node) -> None:
    i = node.inputs
    tensors = {"token": b.tensor(i["token"], "token"), "weight": b.tensor(i["weight"], "weight"),
               "first_token_offset": b.tensor(i["first_token_offset"], "first_token_offset"),
               "token_index": b.tensor(i.get("token_index"), "token_index"),
               "token_ks": b.tensor(i.get("token_ks"), "token_ks")}
    attrs = {"mode": EnumValue("moe_grouped_matmul_mode", moe.mode(node)), "top_k": int(moe.top_k(node))}
    b.call(node, "moe_grouped_matmul", tensors, [b.output(node.outputs["output"])], attrs)


def moe_grouped_matmul_backward(b: _Builder, node: Node) -> None:
    i = node.inputs
    tensors = {"doutput": b.tensor(i["doutput"], "doutput"), "token": b.tensor(i["token"], "token"),
               "first_token_offset": b.tensor(i["first_token_offset"], "first_token_offset")}
    b.call(node, "moe_grouped_matmul_bwd", tensors, [b.output(node.outputs["dweight"])])


OPS: dict[str, PlanFn] = {moe.MOE: moe_grouped_matmul, moe.MOE_BACKWARD: moe_grouped_matmul_backward}

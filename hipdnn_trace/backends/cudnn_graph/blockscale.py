"""Block-scale quantize / dequantize -> cuDNN's ``block_scale_quantize`` / ``block_scale_dequantize``.

Same options as hipDNN (frontend ``python/pygraph/pygraph.cpp``: quantize ``block_size`` int,
``axis``, ``transpose``; dequantize ``block_size`` list, ``is_negative_scale``). Axes move with
the rank lift (leading size-1 dims). cuDNN needs compute capability 10.x for these ops
(frontend ``test_block_scale_quantize.py``); elsewhere its refusal is reported as its reason.
fp4 tensors are packed two per byte on NVIDIA devices, which this backend does not pack yet:
refused before the library is asked.
"""

from __future__ import annotations

from hipdnn_trace.backends.cudnn_graph.builder import PlanFn, _Builder
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph import blockscale
from hipdnn_trace.graph.model import Node


def _no_packed_fp4(b: _Builder, node: Node) -> None:
    for uid in (*node.input_uids(), *node.output_uids()):
        t = b.graph.by_uid[uid]
        if t.data_type in ("fp4_e2m1", "fp6_e2m3", "fp6_e3m2"):
            raise UnsupportedError(f"{node.op} {node.name!r}: tensor {t.name!r} is {t.data_type}; the cudnn backend "
                                   "does not pack sub-byte tensors (two fp4 per byte) yet")


def block_quantize(b: _Builder, node: Node) -> None:
    _no_packed_fp4(b, node)
    x = b.graph.by_uid[node.inputs["x"]]
    lift = b.rank - len(x.dims)
    attrs = {"block_size": int(node.params["block_size"]),
             "axis": b.axis(blockscale.quantize_axis(node, b.graph) + lift),
             "transpose": bool(node.params.get("transpose", False))}
    outs = [b.output(node.outputs["y"]), b.output(node.outputs["scale"])]
    b.call(node, "block_scale_quantize", {"input": b.tensor(node.inputs["x"], "x")}, outs, attrs)


def block_dequantize(b: _Builder, node: Node) -> None:
    _no_packed_fp4(b, node)
    blocks = list(blockscale.dequantize_blocks(node, b.graph))
    while blocks and blocks[0] == 1:
        blocks.pop(0)
    attrs = {"block_size": blocks or [1], "is_negative_scale": bool(node.params.get("is_negative_scale", False))}
    tensors = {"input": b.tensor(node.inputs["x"], "x"), "descale": b.tensor(node.inputs["scale"], "scale")}
    b.call(node, "block_scale_dequantize", tensors, [b.output(node.outputs["y"])], attrs)


OPS: dict[str, PlanFn] = {blockscale.QUANTIZE: block_quantize, blockscale.DEQUANTIZE: block_dequantize}

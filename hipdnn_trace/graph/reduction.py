"""Reduction: hipDNN's modes, the shape rule (each dim kept or 1), FLOPs.

hipDNN's ``ReductionAttributes`` (docs/hipdnn-format.md 2.8, 3.8), its keys flat on the node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hipdnn_trace.graph.opspec import OpSpec, elementwise_flops, option_path, port_path, port_tensor
from hipdnn_trace.graph.option_types import BOOL_OR_NULL, STRING

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Graph, Node


#: ReductionMode strings (data_sdk upper case, flatbuffers_sdk lower case; schema names
#: MIN_OP / MAX_OP too). NOT_SET is not a reduction.
REDUCTION_MODES = ("ADD", "MUL", "MIN", "MAX", "MIN_OP", "MAX_OP", "AMAX", "AVG", "NORM1", "NORM2",
                   "MUL_NO_ZEROS")


def _reduction_check(node: Node, graph: Graph) -> list[tuple[str, str]]:
    if "mode" not in node.params:
        return [("", "missing required field 'mode'")]
    mode = node.params["mode"]
    if not isinstance(mode, str) or mode.upper() not in REDUCTION_MODES:
        return [(option_path(node, "mode", "node"),
                 f"unknown reduction mode {mode!r} (hipDNN: {', '.join(REDUCTION_MODES)})")]
    x, y = port_tensor(node, graph, "in"), port_tensor(node, graph, "out")
    if x is None or y is None:
        return []
    if len(x.dims) != len(y.dims) or any(o not in (1, i) for i, o in zip(x.dims, y.dims)):
        return [(port_path(node, "out"),
                 f"dims {list(y.dims)} are not a reduction of {list(x.dims)} (each dim kept or 1)")]
    return []


SPECS: tuple[OpSpec, ...] = (
    OpSpec(
        "ReductionAttributes", ("in",), ("out",),
        options={"mode": "node", "is_deterministic": "node"}, layout="flat",
        option_kinds={"mode": STRING, "is_deterministic": BOOL_OR_NULL},
        check=_reduction_check, flops=elementwise_flops(1.0, "in"),
    ),
)

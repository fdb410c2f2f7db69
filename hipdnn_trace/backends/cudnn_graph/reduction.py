"""Reduction -> ``reduction`` (float output only, as cuDNN 9.19 takes it)."""

from __future__ import annotations

from hipdnn_trace.backends.cudnn_graph.builder import PlanFn, _Builder
from hipdnn_trace.backends.cudnn_graph.plan_types import EnumValue
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.model import Node

_REDUCTION = {"ADD": "ADD", "MUL": "MUL", "MIN": "MIN", "MAX": "MAX", "AMAX": "AMAX", "AVG": "AVG",
              "NORM1": "NORM1", "NORM2": "NORM2", "MUL_NO_ZEROS": "MUL_NO_ZEROS", "MIN_OP": "MIN", "MAX_OP": "MAX"}


def reduction(b: _Builder, node: Node) -> None:
    mode = str(node.params.get("mode", "")).strip().upper()
    if mode not in _REDUCTION:
        raise UnsupportedError(f"reduction {node.name!r}: mode {mode or '?'} has no cuDNN equivalent")
    attrs = {"mode": EnumValue("reduction_mode", _REDUCTION[mode])}
    out_uid = node.outputs["out"]
    out_type = b.graph.by_uid[out_uid].data_type
    if out_type != "float":
        # Seen on an H200 (cuDNN 9.19): reductions need yType == FLOAT, and a reduction
        # output may feed no further op, so no cast can follow it.
        raise UnsupportedError(f"reduction {node.name!r}: cuDNN reductions write float only and cannot be "
                               f"followed by a cast (output is {out_type})")
    b.call(node, "reduction", {"input": b.tensor(node.inputs["in"], "in")}, [b.output(out_uid)], attrs)


OPS: dict[str, PlanFn] = {"ReductionAttributes": reduction}

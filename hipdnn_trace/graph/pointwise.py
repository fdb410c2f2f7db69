"""Pointwise: hipDNN's modes and their arity, the broadcast rule, options, FLOPs.

hipDNN's ``PointwiseAttributes`` (docs/hipdnn-format.md 2.2, 3.1): out_0 = mode(in_0[, in_1[, in_2]]),
inputs broadcast to the output (numpy's rule); every option key is written, null when unset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hipdnn_trace.graph.opspec import OpSpec, elementwise_flops, option_path, port_path, port_tensor
from hipdnn_trace.graph.option_types import INT_OR_NULL, NUMBER_OR_NULL, STRING

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Graph, Node


def broadcast_shape(shapes: Sequence[Sequence[int]]) -> tuple[int, ...] | None:
    """numpy broadcasting (align trailing dims; 1 stretches); None if incompatible."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(rank):
        sizes = {s[len(s) - rank + axis] for s in shapes if len(s) - rank + axis >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


#: hipDNN's PointwiseMode JSON strings -> number of tensor inputs (docs/hipdnn-format.md 2.2).
POINTWISE_ARITY: dict[str, int] = {
    **dict.fromkeys((
        "abs", "ceil", "elu_fwd", "erf", "exp", "floor", "gelu_approx_tanh_fwd", "gelu_fwd",
        "gen_index", "identity", "log", "logical_not", "neg", "reciprocal", "relu_fwd", "rsqrt",
        "sigmoid_fwd", "sin", "softplus_fwd", "sqrt", "swish_fwd", "tan", "tanh_fwd"), 1),
    **dict.fromkeys((
        "add", "add_square", "cmp_eq", "cmp_ge", "cmp_gt", "cmp_le", "cmp_lt", "cmp_neq", "div",
        "elu_bwd", "gelu_approx_tanh_bwd", "gelu_bwd", "logical_and", "logical_or", "max_op",
        "min_op", "mul", "relu_bwd", "sigmoid_bwd", "softplus_bwd", "sub", "swish_bwd",
        "tanh_bwd"), 2),
    "binary_select": 3,
}



def pointwise_mode(node: Node) -> str:
    """A pointwise node's mode as the key of :data:`POINTWISE_ARITY` (hipDNN writes it in any case)."""
    return str(node.params.get("operation", "")).strip().lower()


def _pointwise_mode(node: Node) -> list[tuple[str, str]]:
    """The operation must be a hipDNN mode (any case) with its number of inputs connected."""
    if "operation" not in node.params:
        return [("inputs", "missing required field 'operation'")]
    mode = node.params["operation"]
    where = option_path(node, "operation", "inputs")
    if not isinstance(mode, str) or mode.lower() not in POINTWISE_ARITY:
        return [(where, f"unknown pointwise operation {mode!r} (hipDNN modes: "
                 f"{', '.join(sorted(POINTWISE_ARITY))})")]
    arity = POINTWISE_ARITY[mode.lower()]
    given = [p for p in ("in_0", "in_1", "in_2") if node.inputs.get(p) is not None]
    if given != ["in_0", "in_1", "in_2"][:arity]:
        return [("inputs", f"{mode} takes {arity} input(s) (in_0..in_{arity - 1}), "
                 f"got {', '.join(given) or 'none'}")]
    return []


def _pointwise_check(node: Node, graph: Graph) -> list[tuple[str, str]]:
    problems = _pointwise_mode(node)
    out = port_tensor(node, graph, "out_0")
    if problems or out is None:
        return problems
    for port in ("in_0", "in_1", "in_2"):
        t = port_tensor(node, graph, port)
        if t is not None and broadcast_shape([t.dims, out.dims]) != tuple(out.dims):
            problems.append((port_path(node, port),
                             f"dims {list(t.dims)} do not broadcast to the output's {list(out.dims)}"))
    return problems


#: Every pointwise option; hipDNN requires each key to be present (null when unset).
POINTWISE_OPTIONS = ("operation", "relu_lower_clip", "relu_upper_clip", "relu_lower_clip_slope",
                     "axis_tensor_uid", "swish_beta", "elu_alpha", "softplus_beta")

SPECS: tuple[OpSpec, ...] = (
    OpSpec(
        "PointwiseAttributes", ("in_0",), ("out_0",), optional_inputs=("in_1", "in_2"),
        options={k: "inputs" for k in POINTWISE_OPTIONS},
        option_kinds={
            "operation": STRING, "axis_tensor_uid": INT_OR_NULL,
            **dict.fromkeys(("relu_lower_clip", "relu_upper_clip", "relu_lower_clip_slope", "swish_beta",
                             "elu_alpha", "softplus_beta"), NUMBER_OR_NULL),
        },
        uid_named_options=("axis_tensor_uid",),
        check=_pointwise_check, flops=elementwise_flops(1.0, "out_0"),
    ),
)

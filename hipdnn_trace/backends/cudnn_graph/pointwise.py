"""Pointwise modes -> ``cudnn.pointwise_mode`` calls."""

from __future__ import annotations

from typing import Any

from hipdnn_trace.backends.cudnn_graph.builder import PlanFn, _Builder
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.model import Node
from hipdnn_trace.graph.pointwise import pointwise_mode

_POINTWISE: dict[str, tuple[str, tuple[str, ...]]] = {
    **{m: (m, ("input",)) for m in ("abs", "ceil", "erf", "exp", "floor", "identity", "log", "logical_not", "neg",
                                    "reciprocal", "rsqrt", "sin", "sqrt", "tan")},
    "gelu_fwd": ("gelu", ("input",)),
    "gelu_approx_tanh_fwd": ("gelu_approx_tanh", ("input",)),
    "sigmoid_fwd": ("sigmoid", ("input",)),
    "tanh_fwd": ("tanh", ("input",)),
    "elu_fwd": ("elu", ("input",)),
    "softplus_fwd": ("softplus", ("input",)),
    "relu_fwd": ("relu", ("input",)),
    "swish_fwd": ("swish", ("input",)),
    "gen_index": ("gen_index", ("input",)),
    **{m: (m, ("a", "b")) for m in ("add", "add_square", "div", "logical_and", "logical_or", "mul", "sub")},
    "max_op": ("max", ("input0", "input1")),
    "min_op": ("min", ("input0", "input1")),
    **{m: (m, ("input", "comparison")) for m in ("cmp_eq", "cmp_ge", "cmp_gt", "cmp_le", "cmp_lt", "cmp_neq")},
    # backward activations: hipDNN's reference reads (in_0, in_1) = (dy, x)
    "relu_bwd": ("relu_backward", ("loss", "input")),
    "sigmoid_bwd": ("sigmoid_backward", ("loss", "input")),
    "tanh_bwd": ("tanh_backward", ("loss", "input")),
    "gelu_bwd": ("gelu_backward", ("loss", "input")),
    "gelu_approx_tanh_bwd": ("gelu_approx_tanh_backward", ("loss", "input")),
    "elu_bwd": ("elu_backward", ("loss", "input")),
    "softplus_bwd": ("softplus_backward", ("loss", "input")),
    "swish_bwd": ("swish_backward", ("loss", "input")),
    "binary_select": ("binary_select", ("input0", "input1", "mask")),
}
def pointwise(b: _Builder, node: Node) -> None:
    mode = pointwise_mode(node)
    if mode not in _POINTWISE:
        raise UnsupportedError(f"pointwise {node.name!r}: mode {mode or '?'} has no cuDNN equivalent")
    method, names = _POINTWISE[mode]
    p = node.params
    ports = [node.inputs.get(f"in_{i}") for i in range(len(names))]
    if any(u is None for u in ports):
        raise UnsupportedError(f"pointwise {node.name!r}: {mode} needs {len(names)} inputs")
    attrs: dict[str, Any] = {}
    if mode in ("relu_fwd", "relu_bwd"):
        for key, arg in (("relu_lower_clip", "lower_clip"), ("relu_upper_clip", "upper_clip"),
                         ("relu_lower_clip_slope", "negative_slope")):
            if p.get(key) is not None:
                attrs[arg] = float(p[key])
    elif mode in ("swish_fwd", "swish_bwd"):
        if p.get("swish_beta") is not None:
            attrs["swish_beta"] = float(p["swish_beta"])
    elif mode in ("elu_fwd", "elu_bwd") and p.get("elu_alpha") not in (None, 1.0):
        raise UnsupportedError(f"pointwise {node.name!r}: cuDNN's python elu has no alpha (got {p['elu_alpha']})")
    elif mode in ("softplus_fwd", "softplus_bwd") and p.get("softplus_beta") not in (None, 1.0):
        raise UnsupportedError(f"pointwise {node.name!r}: cuDNN's python softplus has no beta "
                               f"(got {p['softplus_beta']})")
    elif mode == "gen_index":
        axis = p.get("axis_tensor_uid")
        if axis is None:
            raise UnsupportedError(f"pointwise {node.name!r}: gen_index needs an axis")
        attrs["axis"] = b.axis(int(axis) + (b.rank - len(b.graph.by_uid[node.outputs["out_0"]].dims)))
    tensors = {name: b.tensor(uid, name) for name, uid in zip(names, ports)}
    b.call(node, method, tensors, [b.output(node.outputs["out_0"])], attrs)


OPS: dict[str, PlanFn] = {"PointwiseAttributes": pointwise}

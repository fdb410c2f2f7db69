"""hipDNN's pointwise modes in torch; backward modes read (in_0, in_1) = (dy, x)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F

from hipdnn_trace.backends.torch_ops._common import Ctx, OpFn, Values, f32
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.model import Graph, Node
from hipdnn_trace.graph.pointwise import pointwise_mode

# --------------------------------------------------------------------------- pointwise

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _relu_clips(p: Mapping[str, Any]) -> tuple[float, float | None, float]:
    lower = p.get("relu_lower_clip")
    slope = p.get("relu_lower_clip_slope")
    return (0.0 if lower is None else float(lower), None if p.get("relu_upper_clip") is None
            else float(p["relu_upper_clip"]), 0.0 if slope is None else float(slope))


def _relu_fwd(p: Mapping[str, Any], v: torch.Tensor) -> torch.Tensor:
    lower, upper, slope = _relu_clips(p)
    out = v if upper is None else torch.where(v >= upper, torch.full_like(v, upper), v)
    return torch.where(v <= lower, slope * (v - lower) + lower, out)


def _relu_bwd(p: Mapping[str, Any], dy: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    if all(p.get(k) is None for k in ("relu_lower_clip", "relu_upper_clip", "relu_lower_clip_slope")):
        return dy * (v > 0).to(dy.dtype)
    lower, upper, slope = _relu_clips(p)
    ones = torch.ones_like(v)
    local = torch.where(v <= lower, ones * slope, ones)
    if upper is not None:
        local = torch.where(v > upper, torch.zeros_like(v), local)
    return dy * local


def _beta(p: Mapping[str, Any], key: str) -> float:
    return 1.0 if p.get(key) is None else float(p[key])


def _gelu_tanh_bwd(dy: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    inner = _SQRT_2_OVER_PI * (v + 0.044715 * v ** 3)
    t = torch.tanh(inner)
    d_inner = _SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * v * v)
    return dy * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * d_inner)


def _gelu_bwd(dy: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    cdf = 0.5 * (1.0 + torch.erf(v / math.sqrt(2.0)))
    pdf = torch.exp(-0.5 * v * v) / math.sqrt(2.0 * math.pi)
    return dy * (cdf + v * pdf)


def _flag(b: torch.Tensor) -> torch.Tensor:
    return b.to(torch.float32)


def _swish_bwd(p: Mapping[str, Any], dy: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    beta = _beta(p, "swish_beta")
    s = torch.sigmoid(beta * v)
    return dy * (s + beta * v * s * (1.0 - s))


def _elu_bwd(p: Mapping[str, Any], dy: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    alpha = _beta(p, "elu_alpha")
    return dy * torch.where(v > 0, torch.ones_like(v), alpha * torch.exp(torch.clamp(v, max=0.0)))


PointwiseFn = Callable[..., torch.Tensor]
POINTWISE: dict[str, PointwiseFn] = {
    "abs": lambda p, a: torch.abs(a),
    "ceil": lambda p, a: torch.ceil(a),
    "erf": lambda p, a: torch.erf(a),
    "exp": lambda p, a: torch.exp(a),
    "floor": lambda p, a: torch.floor(a),
    "identity": lambda p, a: a,
    "log": lambda p, a: torch.log(a),
    "logical_not": lambda p, a: _flag(a == 0),
    "neg": lambda p, a: -a,
    "reciprocal": lambda p, a: torch.reciprocal(a),
    "rsqrt": lambda p, a: torch.rsqrt(a),
    "sin": lambda p, a: torch.sin(a),
    "sqrt": lambda p, a: torch.sqrt(a),
    "tan": lambda p, a: torch.tan(a),
    "tanh_fwd": lambda p, a: torch.tanh(a),
    "sigmoid_fwd": lambda p, a: torch.sigmoid(a),
    "gelu_fwd": lambda p, a: F.gelu(a),
    "gelu_approx_tanh_fwd": lambda p, a: F.gelu(a, approximate="tanh"),
    "swish_fwd": lambda p, a: a * torch.sigmoid(_beta(p, "swish_beta") * a),
    "elu_fwd": lambda p, a: F.elu(a, alpha=_beta(p, "elu_alpha")),
    "softplus_fwd": lambda p, a: F.softplus(a, beta=_beta(p, "softplus_beta")),
    "relu_fwd": _relu_fwd,
    "add": lambda p, a, b: a + b,
    "add_square": lambda p, a, b: a + b * b,
    "sub": lambda p, a, b: a - b,
    "mul": lambda p, a, b: a * b,
    "div": lambda p, a, b: a / b,
    "max_op": lambda p, a, b: torch.maximum(a, b),
    "min_op": lambda p, a, b: torch.minimum(a, b),
    "cmp_eq": lambda p, a, b: _flag(a == b),
    "cmp_ge": lambda p, a, b: _flag(a >= b),
    "cmp_gt": lambda p, a, b: _flag(a > b),
    "cmp_le": lambda p, a, b: _flag(a <= b),
    "cmp_lt": lambda p, a, b: _flag(a < b),
    "cmp_neq": lambda p, a, b: _flag(a != b),
    "logical_and": lambda p, a, b: _flag((a != 0) & (b != 0)),
    "logical_or": lambda p, a, b: _flag((a != 0) | (b != 0)),
    # backward activations: (in_0, in_1) = (dy, x), as the float64 reference reads them
    "relu_bwd": _relu_bwd,
    "sigmoid_bwd": lambda p, dy, a: dy * torch.sigmoid(a) * (1.0 - torch.sigmoid(a)),
    "tanh_bwd": lambda p, dy, a: dy * (1.0 - torch.tanh(a) ** 2),
    "gelu_bwd": lambda p, dy, a: _gelu_bwd(dy, a),
    "gelu_approx_tanh_bwd": lambda p, dy, a: _gelu_tanh_bwd(dy, a),
    "swish_bwd": _swish_bwd,
    "elu_bwd": _elu_bwd,
    "softplus_bwd": lambda p, dy, a: dy * torch.sigmoid(_beta(p, "softplus_beta") * a),
    "binary_select": lambda p, a, b, m: torch.where(m != 0, a, b),
}
def pointwise(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    mode = pointwise_mode(node)
    out_dims = ctx.out_dims(node, "out_0")
    if mode == "gen_index":
        axis = node.params.get("axis_tensor_uid")
        if axis is None:
            raise UnsupportedError(f"pointwise {node.name!r}: gen_index needs an axis")
        axis = int(axis) % len(out_dims)
        shape = [1] * len(out_dims)
        shape[axis] = out_dims[axis]
        idx = torch.arange(out_dims[axis], device=ctx.device, dtype=torch.float32).reshape(shape)
        return {"out_0": idx.expand(out_dims).to(ctx.out_dtype(node, "out_0"))}
    fn = POINTWISE[mode]
    operands = [f32(x[p]) for p in ("in_0", "in_1", "in_2") if x.get(p) is not None]
    out = fn(node.params, *operands)
    if tuple(out.shape) != out_dims:
        out = out.expand(out_dims)
    return {"out_0": out.to(ctx.out_dtype(node, "out_0"))}


def check(node: Node, graph: Graph) -> str | None:
    mode = pointwise_mode(node)
    if mode not in POINTWISE and mode != "gen_index":
        return f"pointwise mode {mode} is not mapped to torch"
    return None


OPS: dict[str, OpFn] = {"PointwiseAttributes": pointwise}

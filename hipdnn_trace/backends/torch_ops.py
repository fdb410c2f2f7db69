"""hipDNN node semantics in eager PyTorch (CUDA, ROCm and CPU builds alike).

Each function takes a node's input tensors (torch, logical dims) and returns its
outputs by port name. Semantics follow docs/hipdnn-format.md and the float64
reference (``backends/reference``): asymmetric convolution padding through
``F.pad``, dgrad/wgrad through ``torch.nn.grad``, batchnorm with inv_variance
(1/sqrt(var + eps)) as its saved statistic, hipDNN's grouped matmul batches,
relu with clips and slope, and backward activations reading (in_0, in_1) = (dy, x).

Precision: convolutions and matmuls run in their operands' type (tensor cores on a
GPU, fp32 accumulation); everything else computes in float32 and is rounded once to
the output tensor's type. On the CPU, half and bfloat16 operands are widened to
float32 first (CPU kernels for them are slow or missing).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.model import Graph, Node
from hipdnn_trace.graph.ops import norm_forward_phase, pointwise_mode

Values = Mapping[str, "torch.Tensor | None"]
OpFn = Callable[[Node, Graph, Values, "Ctx"], dict[str, torch.Tensor]]

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float": torch.float32, "half": torch.float16, "bfloat16": torch.bfloat16, "double": torch.float64,
    "int8": torch.int8, "uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64, "boolean": torch.bool,
}
for _name, _attr in (("fp8_e4m3", "float8_e4m3fn"), ("fp8_e5m2", "float8_e5m2"),
                     ("fp8_e4m3_fnuz", "float8_e4m3fnuz"), ("fp8_e5m2_fnuz", "float8_e5m2fnuz")):
    if hasattr(torch, _attr):
        TORCH_DTYPES[_name] = getattr(torch, _attr)


class Ctx:
    """Per-session facts an op needs: device kind, output dtypes, scalar values."""

    def __init__(self, graph: Graph, device: torch.device, scalars: Mapping[int, float]) -> None:
        self.graph = graph
        self.device = device
        self.cpu = device.type == "cpu"
        self.scalars = dict(scalars)

    def out_dtype(self, node: Node, port: str) -> torch.dtype:
        return TORCH_DTYPES[self.graph.by_uid[node.outputs[port]].data_type]

    def out_dims(self, node: Node, port: str) -> tuple[int, ...]:
        return tuple(self.graph.by_uid[node.outputs[port]].dims)

    def scalar(self, node: Node, port: str, default: float | None = None) -> float:
        uid = node.inputs.get(port)
        if uid is None:
            if default is None:
                raise UnsupportedError(f"{node.op} {node.name!r}: {port} is required")
            return default
        return float(self.scalars[uid])

    def mma(self, *tensors: torch.Tensor) -> list[torch.Tensor]:
        """Operands of a conv/matmul in one type: theirs on a GPU, float32 on the CPU."""
        types = {t.dtype for t in tensors}
        if self.cpu and types & {torch.float16, torch.bfloat16}:
            return [t.float() for t in tensors]
        if len(types) > 1:
            return [t.float() for t in tensors]
        return list(tensors)


def f32(t: torch.Tensor) -> torch.Tensor:
    return t if t.dtype in (torch.float32, torch.float64) else t.float()


# --------------------------------------------------------------------------- convolution

def _conv_params(node: Node) -> tuple[list[int], list[int], list[int], list[int], bool]:
    p = node.params
    mode = str(p.get("conv_mode", "CROSS_CORRELATION")).upper()
    return list(p["pre_padding"]), list(p["post_padding"]), list(p["stride"]), list(p["dilation"]), \
        mode == "CONVOLUTION"


def _pad_spec(pre: Sequence[int], post: Sequence[int]) -> list[int]:
    """F.pad's order: last dim first, (before, after) per dim."""
    out: list[int] = []
    for a, b in zip(reversed(pre), reversed(post)):
        out += [a, b]
    return out


def _conv_fn(rank: int) -> Callable[..., torch.Tensor]:
    fns = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}
    if rank not in fns:
        raise UnsupportedError(f"convolution of rank {rank} (torch has 1-d to 3-d)")
    return fns[rank]


def _grad_fns(rank: int) -> tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor]]:
    g = torch.nn.grad
    fns = {3: (g.conv1d_input, g.conv1d_weight), 4: (g.conv2d_input, g.conv2d_weight),
           5: (g.conv3d_input, g.conv3d_weight)}
    if rank not in fns:
        raise UnsupportedError(f"convolution of rank {rank} (torch has 1-d to 3-d)")
    return fns[rank]


def conv_fwd(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    pre, post, stride, dil, flip = _conv_params(node)
    inp, w = ctx.mma(x["x"], x["w"])
    if flip:
        w = w.flip(list(range(2, w.dim())))
    groups = inp.shape[1] // w.shape[1]
    if pre == post:
        y = _conv_fn(inp.dim())(inp, w, None, stride, pre, dil, groups)
    else:
        y = _conv_fn(inp.dim())(F.pad(inp, _pad_spec(pre, post)), w, None, stride, 0, dil, groups)
    return {"y": y.to(ctx.out_dtype(node, "y"))}


def conv_dgrad(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    pre, post, stride, dil, flip = _conv_params(node)
    dy, w = ctx.mma(x["dy"], x["w"])
    if flip:
        w = w.flip(list(range(2, w.dim())))
    groups_dims = ctx.out_dims(node, "dx")
    groups = groups_dims[1] // w.shape[1]
    input_grad, _ = _grad_fns(dy.dim())
    if pre == post:
        dx = input_grad(list(groups_dims), w, dy, stride, pre, dil, groups)
    else:
        padded = [*groups_dims[:2], *(d + a + b for d, a, b in zip(groups_dims[2:], pre, post))]
        full = input_grad(padded, w, dy, stride, 0, dil, groups)
        index = [slice(None), slice(None)] + [slice(a, a + d) for a, d in zip(pre, groups_dims[2:])]
        dx = full[tuple(index)]
    return {"dx": dx.to(ctx.out_dtype(node, "dx"))}


def conv_wgrad(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    pre, post, stride, dil, flip = _conv_params(node)
    inp, dy = ctx.mma(x["x"], x["dy"])
    w_dims = ctx.out_dims(node, "dw")
    groups = inp.shape[1] // w_dims[1]
    _, weight_grad = _grad_fns(inp.dim())
    if pre == post:
        dw = weight_grad(inp, list(w_dims), dy, stride, pre, dil, groups)
    else:
        dw = weight_grad(F.pad(inp, _pad_spec(pre, post)), list(w_dims), dy, stride, 0, dil, groups)
    if flip:
        dw = dw.flip(list(range(2, dw.dim())))
    return {"dw": dw.to(ctx.out_dtype(node, "dw"))}


# --------------------------------------------------------------------------- matmul

def _grouped_batch(t: torch.Tensor, batch: Sequence[int]) -> torch.Tensor:
    """hipDNN batch rule: a batch dim smaller than the output's repeats each slice in place."""
    for axis, want in enumerate(batch):
        have = t.shape[axis]
        if have not in (1, want):
            t = t.repeat_interleave(want // have, dim=axis)
    return t


_FLOAT_OUT_BMM: list[bool] = []   # does torch.bmm take out_dtype here? (probed once)


def _matmul_float_out(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """half/bf16 operands, fp32 result without rounding through half: hipDNN's float
    intermediate after a matmul. ``torch.bmm(..., out_dtype=float32)`` where torch has it
    (tensor cores, fp32 store), else fp32 operands."""
    if _FLOAT_OUT_BMM != [False]:
        batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        (m, k), n = a.shape[-2:], b.shape[-1]
        try:
            c = torch.bmm(a.expand(*batch, m, k).reshape(-1, m, k), b.expand(*batch, k, n).reshape(-1, k, n),
                          out_dtype=torch.float32)
            _FLOAT_OUT_BMM[:] = [True]
            return c.reshape(*batch, m, n)
        except (TypeError, RuntimeError):
            _FLOAT_OUT_BMM[:] = [False]
    return torch.matmul(a.float(), b.float())


def matmul(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    a, b = ctx.mma(x["a"], x["b"])
    batch = ctx.out_dims(node, "c")[:-2]
    a, b = _grouped_batch(a, batch), _grouped_batch(b, batch)
    out = ctx.out_dtype(node, "c")
    if out == torch.float32 and a.dtype in (torch.float16, torch.bfloat16):
        return {"c": _matmul_float_out(a, b)}
    return {"c": torch.matmul(a, b).to(out)}


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


# --------------------------------------------------------------------------- norms

def _channel(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else f32(t).reshape(-1)


def batchnorm_inference(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    inp = f32(x["x"])
    shape = [1, inp.shape[1]] + [1] * (inp.dim() - 2)
    mean, inv, scale, bias = (f32(x[k]).reshape(shape) for k in ("mean", "inv_variance", "scale", "bias"))
    return {"y": ((inp - mean) * inv * scale + bias).to(ctx.out_dtype(node, "y"))}


def batchnorm_inference_variance(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    inp = f32(x["x"])
    shape = [1, inp.shape[1]] + [1] * (inp.dim() - 2)
    mean, var, scale, bias = (f32(x[k]).reshape(shape) for k in ("mean", "variance", "scale", "bias"))
    inv = torch.rsqrt(var + ctx.scalar(node, "epsilon"))
    return {"y": ((inp - mean) * inv * scale + bias).to(ctx.out_dtype(node, "y"))}


def batchnorm_train(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    if node.inputs.get("peer_stats"):
        raise UnsupportedError(f"batchnorm {node.name!r}: peer stats are not supported")
    inp = x["x"] if not ctx.cpu else f32(x["x"])
    c = inp.shape[1]
    stat_shape = [1, c] + [1] * (inp.dim() - 2)
    running = x.get("prev_running_mean") is not None and x.get("prev_running_variance") is not None
    momentum = ctx.scalar(node, "momentum", 0.1)
    eps = ctx.scalar(node, "epsilon")
    next_mean = _channel(x["prev_running_mean"]).clone() if running else None
    next_var = _channel(x["prev_running_variance"]).clone() if running else None
    y, mean, invstd = torch.ops.aten.native_batch_norm(inp, _channel(x["scale"]), _channel(x["bias"]),
                                                       next_mean, next_var, True, momentum, eps)
    out = {"y": y.to(ctx.out_dtype(node, "y"))}
    for port, value in (("mean", mean), ("inv_variance", invstd), ("next_running_mean", next_mean),
                        ("next_running_variance", next_var)):
        if node.outputs.get(port) is not None and value is not None:
            out[port] = value.reshape(stat_shape).to(ctx.out_dtype(node, port))
    return out


def batchnorm_backward(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    if node.inputs.get("peer_stats"):
        raise UnsupportedError(f"batchnorm backward {node.name!r}: peer stats are not supported")
    dy, inp = x["dy"], x["x"]
    if ctx.cpu or dy.dtype != inp.dtype:
        dy, inp = f32(dy), f32(inp)
    c = inp.shape[1]
    stat_shape = [1, c] + [1] * (inp.dim() - 2)
    mean, inv = _channel(x.get("mean")), _channel(x.get("inv_variance"))
    if mean is None or inv is None:
        axes = [0, *range(2, inp.dim())]
        xf = f32(inp)
        mean = xf.mean(dim=axes)
        inv = torch.rsqrt(xf.var(dim=axes, unbiased=False) + 1e-5)
    dx, dscale, dbias = torch.ops.aten.native_batch_norm_backward(
        dy, inp, _channel(x["scale"]), None, None, mean, inv, True, 0.0, [True, True, True])
    out = {"dx": dx.to(ctx.out_dtype(node, "dx"))}
    for port, value in (("dscale", dscale), ("dbias", dbias)):
        if node.outputs.get(port) is not None:
            out[port] = value.reshape(stat_shape).to(ctx.out_dtype(node, port))
    return out


def layernorm(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    count = node.params.get("normalized_dim_count")
    inp = f32(x["x"])
    if not isinstance(count, int) or not 1 <= count <= inp.dim():
        raise UnsupportedError(f"layernorm {node.name!r}: normalized_dim_count {count!r} is not usable")
    norm_shape = list(inp.shape[inp.dim() - count:])
    scale = None if x.get("scale") is None else f32(x["scale"]).reshape(norm_shape)
    bias = None if x.get("bias") is None else f32(x["bias"]).reshape(norm_shape)
    y, mean, rstd = torch.ops.aten.native_layer_norm(inp, norm_shape, scale, bias, ctx.scalar(node, "epsilon"))
    out = {"y": y.to(ctx.out_dtype(node, "y"))}
    if norm_forward_phase(node) != "INFERENCE":
        for port, value in (("mean", mean), ("inv_variance", rstd)):
            if node.outputs.get(port) is not None:
                out[port] = value.reshape(ctx.out_dims(node, port)).to(ctx.out_dtype(node, port))
    return out


def rmsnorm(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    from hipdnn_trace.backends.reference.ops.rmsnorm import rmsnorm_start_axis

    inp = f32(x["x"])
    count = node.params.get("normalized_dim_count")
    inv_uid = node.outputs.get("inv_rms")
    if count is None and inv_uid is not None:
        stats = graph.by_uid[inv_uid].dims
        reduced = [a for a, (xd, sd) in enumerate(zip(inp.shape, stats)) if sd == 1 and xd > 1]
        if reduced and reduced == list(range(reduced[0], inp.dim())):
            count = inp.dim() - reduced[0]
    scale = f32(x["scale"])
    start = rmsnorm_start_axis(tuple(inp.shape), tuple(scale.shape), count)
    axes = list(range(start, inp.dim()))
    inv = torch.rsqrt(inp.pow(2).mean(dim=axes, keepdim=True) + ctx.scalar(node, "epsilon"))
    y = inp * inv * scale.reshape([1] * (inp.dim() - scale.dim()) + list(scale.shape))
    if x.get("bias") is not None:
        bias = f32(x["bias"])
        y = y + bias.reshape([1] * (inp.dim() - bias.dim()) + list(bias.shape))
    out = {"y": y.to(ctx.out_dtype(node, "y"))}
    if inv_uid is not None and norm_forward_phase(node) != "INFERENCE":
        out["inv_rms"] = inv.to(ctx.out_dtype(node, "inv_rms"))
    return out


# --------------------------------------------------------------------------- reduction

def _reduce(mode: str, v: torch.Tensor, axes: list[int]) -> torch.Tensor:
    if mode == "ADD":
        return v.sum(dim=axes, keepdim=True)
    if mode == "MUL":
        return _reduce_loop(torch.prod, v, axes)
    if mode in ("MIN", "MIN_OP"):
        return v.amin(dim=axes, keepdim=True)
    if mode in ("MAX", "MAX_OP"):
        return v.amax(dim=axes, keepdim=True)
    if mode == "AMAX":
        return v.abs().amax(dim=axes, keepdim=True)
    if mode == "AVG":
        return v.mean(dim=axes, keepdim=True)
    if mode == "NORM1":
        return v.abs().sum(dim=axes, keepdim=True)
    if mode == "NORM2":
        return v.pow(2).sum(dim=axes, keepdim=True).sqrt()
    if mode == "MUL_NO_ZEROS":
        return _reduce("MUL", torch.where(v == 0, torch.ones_like(v), v), axes)
    raise UnsupportedError(f"reduction mode {mode} is not a hipDNN mode")


def _reduce_loop(fn: Callable[..., torch.Tensor], v: torch.Tensor, axes: list[int]) -> torch.Tensor:
    for axis in axes:
        v = fn(v, dim=axis, keepdim=True)
    return v


def reduction(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    inp = f32(x["in"])
    out_dims = ctx.out_dims(node, "out")
    axes = [a for a, (i, o) in enumerate(zip(inp.shape, out_dims)) if o == 1 and i > 1]
    mode = str(node.params.get("mode", "")).strip().upper()
    result = _reduce(mode, inp, axes) if axes else inp
    return {"out": result.to(ctx.out_dtype(node, "out"))}


OPS: dict[str, OpFn] = {
    "ConvolutionFwdAttributes": conv_fwd,
    "ConvolutionBwdAttributes": conv_dgrad,
    "ConvolutionWrwAttributes": conv_wgrad,
    "MatmulAttributes": matmul,
    "PointwiseAttributes": pointwise,
    "BatchnormInferenceAttributes": batchnorm_inference,
    "BatchnormInferenceAttributesVarianceExt": batchnorm_inference_variance,
    "BatchnormAttributes": batchnorm_train,
    "BatchnormBackwardAttributes": batchnorm_backward,
    "LayernormAttributes": layernorm,
    "RMSNormAttributes": rmsnorm,
    "ReductionAttributes": reduction,
}

REDUCTION_MODES = {"ADD", "MUL", "MIN", "MAX", "MIN_OP", "MAX_OP", "AMAX", "AVG", "NORM1", "NORM2", "MUL_NO_ZEROS"}


def check(graph: Graph) -> str | None:
    """Why eager torch cannot run ``graph`` (one line), or None."""
    for t in graph.tensors:
        if not t.is_value and t.data_type not in TORCH_DTYPES:
            return f"tensor {t.name!r}: data type {t.data_type} has no torch equivalent"
    for node in graph.nodes:
        if node.type not in OPS:
            return f"op {node.op} is not mapped to torch"
        if node.type == "PointwiseAttributes":
            mode = pointwise_mode(node)
            if mode not in POINTWISE and mode != "gen_index":
                return f"pointwise mode {mode} is not mapped to torch"
        if node.type == "ReductionAttributes":
            mode = str(node.params.get("mode", "")).strip().upper()
            if mode not in REDUCTION_MODES:
                return f"reduction mode {mode} is not mapped to torch"
        if node.type in ("BatchnormAttributes", "BatchnormBackwardAttributes") and node.inputs.get("peer_stats"):
            return f"{node.op} {node.name!r}: peer stats are not supported"
        if node.type.startswith("Convolution"):
            rank = len(graph.by_uid[node.input_uids()[0]].dims)
            if rank not in (3, 4, 5):
                return f"{node.op} {node.name!r}: rank {rank} convolution"
    return None

"""Batchnorm, layernorm and RMSNorm in torch, float32 math rounded once to the output type."""

from __future__ import annotations

import torch

from hipdnn_trace.backends.torch_ops._common import Ctx, OpFn, Values, f32
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.model import Graph, Node
from hipdnn_trace.graph.norms import norm_forward_phase, rmsnorm_refusal

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
    from hipdnn_trace.graph.norms import rmsnorm_start

    inp = f32(x["x"])
    scale = f32(x["scale"])
    start = rmsnorm_start(node, graph)
    axes = list(range(start, inp.dim()))
    inv = torch.rsqrt(inp.pow(2).mean(dim=axes, keepdim=True) + ctx.scalar(node, "epsilon"))
    y = inp * inv * scale.reshape([1] * (inp.dim() - scale.dim()) + list(scale.shape))
    if x.get("bias") is not None:
        bias = f32(x["bias"])
        y = y + bias.reshape([1] * (inp.dim() - bias.dim()) + list(bias.shape))
    out = {"y": y.to(ctx.out_dtype(node, "y"))}
    if node.outputs.get("inv_rms") is not None and norm_forward_phase(node) != "INFERENCE":
        out["inv_rms"] = inv.to(ctx.out_dtype(node, "inv_rms"))
    return out


def _norm_backward_parts(node: Node, graph: Graph, x: Values) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                                         int, list[int], list[int]]:
    """(dy, x, scale broadcast over x, first normalized axis, normalized axes, batch axes), float32."""
    from hipdnn_trace.graph.norms import norm_backward_start

    start = norm_backward_start(node, graph)
    if start is None:
        raise UnsupportedError(f"{node.op} {node.name!r}: normalized dims cannot be told")
    dy, inp = f32(x["dy"]), f32(x["x"])          # type: ignore[arg-type]
    scale = f32(x["scale"]).reshape(inp.shape[start:])   # type: ignore[arg-type]
    return dy, inp, scale, start, list(range(start, inp.dim())), list(range(start))


def _norm_backward_out(node: Node, ctx: Ctx, dx: torch.Tensor, dscale: torch.Tensor,
                       dbias: torch.Tensor) -> dict[str, torch.Tensor]:
    out = {"dx": dx.to(ctx.out_dtype(node, "dx"))}
    for port, value in (("dscale", dscale), ("dbias", dbias)):
        if node.outputs.get(port) is not None:
            out[port] = value.reshape(ctx.out_dims(node, port)).to(ctx.out_dtype(node, port))
    return out


def layernorm_backward(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    """The same formula as the float64 reference (saved mean / inv_variance), in float32."""
    dy, inp, scale, start, axes, batch = _norm_backward_parts(node, graph, x)
    stat = list(inp.shape[:start]) + [1] * len(axes)
    if x.get("mean") is not None and x.get("inv_variance") is not None:
        mean, inv = f32(x["mean"]).reshape(stat), f32(x["inv_variance"]).reshape(stat)   # type: ignore[arg-type]
    else:
        mean = inp.mean(dim=axes, keepdim=True)
        inv = torch.rsqrt((inp - mean).pow(2).mean(dim=axes, keepdim=True) + ctx.scalar(node, "epsilon", 1e-5))
    xhat = (inp - mean) * inv
    g = dy * scale
    dx = inv * (g - g.mean(dim=axes, keepdim=True) - xhat * (g * xhat).mean(dim=axes, keepdim=True))
    return _norm_backward_out(node, ctx, dx, (dy * xhat).sum(dim=batch), dy.sum(dim=batch))


def rmsnorm_backward(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    """dx = r g - x r^3 mean(g x) with the saved r = inv_rms and g = dy * scale, in float32."""
    dy, inp, scale, start, axes, batch = _norm_backward_parts(node, graph, x)
    r = f32(x["inv_rms"]).reshape(list(inp.shape[:start]) + [1] * len(axes))   # type: ignore[arg-type]
    g = dy * scale
    dx = r * g - inp * r.pow(3) * (g * inp).mean(dim=axes, keepdim=True)
    return _norm_backward_out(node, ctx, dx, (dy * inp * r).sum(dim=batch), dy.sum(dim=batch))


def check(node: Node, graph: Graph) -> str | None:
    """Batchnorm's peer stats (multi-GPU) and RMSNorm whose normalized dims cannot be told."""
    if node.type in ("BatchnormAttributes", "BatchnormBackwardAttributes") and node.inputs.get("peer_stats"):
        return f"{node.op} {node.name!r}: peer stats are not supported"
    return rmsnorm_refusal(node, graph) if node.type == "RMSNormAttributes" else None


OPS: dict[str, OpFn] = {
    "BatchnormInferenceAttributes": batchnorm_inference,
    "BatchnormInferenceAttributesVarianceExt": batchnorm_inference_variance,
    "BatchnormAttributes": batchnorm_train,
    "BatchnormBackwardAttributes": batchnorm_backward,
    "LayernormAttributes": layernorm,
    "RMSNormAttributes": rmsnorm,
    "LayernormBackwardAttributes": layernorm_backward,
    "RMSNormBackwardAttributes": rmsnorm_backward,
}

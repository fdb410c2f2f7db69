"""Pooling (hipDNN's resample) in torch: explicit padding, then torch's pooling kernels.

Padding is applied with ``F.pad`` (-inf for NEG_INF_PAD max pooling, 0 otherwise) so any
pre/post padding hipDNN allows works (torch's own ``padding`` is symmetric and at most half
the window). torch's max-pool indices address the padded plane; they are mapped back to x's
plane, -1 where a pad won, as hipDNN's index says. EXCLUDE_PADDING divides the window sums
by the real-element counts of a pooled mask; the backward is the adjoint of the forward
(autograd of the same expression).
"""

from __future__ import annotations

from math import prod

import torch
import torch.nn.functional as F

from hipdnn_trace.backends.torch_ops._common import Ctx, OpFn, Values, f32
from hipdnn_trace.graph import resample
from hipdnn_trace.graph.model import Graph, Node

_MAX = {2: F.max_pool2d, 3: F.max_pool3d}
_AVG = {2: F.avg_pool2d, 3: F.avg_pool3d}


def _pad(x: torch.Tensor, p: resample.Pooling, value: float) -> torch.Tensor:
    widths = [w for a, b in reversed(list(zip(p.pre, p.post))) for w in (a, b)]   # last axis first
    return F.pad(x, widths, value=value)


def _average(x: torch.Tensor, p: resample.Pooling) -> torch.Tensor:
    nsp = x.dim() - 2
    sums = _AVG[nsp](_pad(x, p, 0.0), p.window, p.stride) * prod(p.window)
    if p.mode == "AVGPOOL_INCLUDE_PADDING":
        return sums / prod(p.window)
    ones = torch.ones((1, 1, *x.shape[2:]), dtype=x.dtype, device=x.device)
    counts = _AVG[nsp](_pad(ones, p, 0.0), p.window, p.stride) * prod(p.window)
    return sums / counts.clamp(min=1.0)


def _plane_index(padded_index: torch.Tensor, spatial: tuple[int, ...], p: resample.Pooling) -> torch.Tensor:
    """Flat index in the padded plane -> flat index in x's plane, -1 for a pad."""
    padded = [s + a + b for s, a, b in zip(spatial, p.pre, p.post)]
    rest, flat = padded_index, torch.zeros_like(padded_index)
    coords = []
    for size in reversed(padded):
        coords.append(rest % size)
        rest = rest // size
    inside = torch.ones_like(padded_index, dtype=torch.bool)
    for coord, size, pre in zip(reversed(coords), spatial, p.pre):
        real = coord - pre
        inside &= (real >= 0) & (real < size)
        flat = flat * size + real
    return torch.where(inside, flat, torch.full_like(flat, -1))


def resample_fwd(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    p, inp = resample.pooling(node), x["x"]
    out: dict[str, torch.Tensor] = {}
    if p.mode == "MAXPOOL":
        fill = float("-inf") if p.padding_mode == "NEG_INF_PAD" else 0.0
        y, index = _MAX[inp.dim() - 2](_pad(inp, p, fill), p.window, p.stride, return_indices=True)
        if node.outputs.get("index") is not None:
            out["index"] = _plane_index(index, tuple(inp.shape[2:]), p).to(ctx.out_dtype(node, "index"))
    else:
        y = _average(f32(inp) if ctx.cpu else inp, p)
    out["y"] = y.to(ctx.out_dtype(node, "y"))
    return out


def resample_bwd(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    p, dy = resample.pooling(node), f32(x["dy"])
    dims = ctx.out_dims(node, "dx")
    if p.mode == "MAXPOOL":
        plane = prod(dims[2:])
        index = x["index"].to(torch.int64).reshape(dims[0] * dims[1], -1)
        index = torch.where(index >= 0, index, torch.full_like(index, plane))   # pad winners go nowhere
        dx = torch.zeros(dims[0] * dims[1], plane + 1, dtype=dy.dtype, device=dy.device)
        dx.scatter_add_(1, index, dy.reshape(dims[0] * dims[1], -1))
        return {"dx": dx[:, :-1].reshape(dims).to(ctx.out_dtype(node, "dx"))}
    probe = torch.zeros(dims, dtype=dy.dtype, device=dy.device, requires_grad=True)
    with torch.enable_grad():
        (dx,) = torch.autograd.grad(_average(probe, p), probe, dy)
    return {"dx": dx.to(ctx.out_dtype(node, "dx"))}


OPS: dict[str, OpFn] = {resample.RESAMPLE_FWD: resample_fwd, resample.RESAMPLE_BWD: resample_bwd}

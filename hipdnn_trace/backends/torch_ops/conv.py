"""Convolution forward, dgrad and wgrad in torch (asymmetric padding through F.pad)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from hipdnn_trace.backends.torch_ops._common import Ctx, OpFn, Values, stored
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.model import Graph, Node

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
    return {"y": stored(y, ctx.out_dtype(node, "y"))}


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
    return {"dx": stored(dx, ctx.out_dtype(node, "dx"))}


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
    return {"dw": stored(dw, ctx.out_dtype(node, "dw"))}


def check(node: Node, graph: Graph) -> str | None:
    """torch convolves 1-3 spatial dims (tensors of rank 3 to 5)."""
    rank = len(graph.by_uid[node.input_uids()[0]].dims)
    return None if rank in (3, 4, 5) else f"{node.op} {node.name!r}: rank {rank} convolution"


OPS: dict[str, OpFn] = {
    "ConvolutionFwdAttributes": conv_fwd,
    "ConvolutionBwdAttributes": conv_dgrad,
    "ConvolutionWrwAttributes": conv_wgrad,
}

"""hipDNN's reduction modes in torch."""

from __future__ import annotations

from collections.abc import Callable

import torch

from hipdnn_trace.backends.torch_ops._common import Ctx, OpFn, Values, f32
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.model import Graph, Node

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



REDUCTION_MODES = {"ADD", "MUL", "MIN", "MAX", "MIN_OP", "MAX_OP", "AMAX", "AVG", "NORM1", "NORM2", "MUL_NO_ZEROS"}


def check(node: Node, graph: Graph) -> str | None:
    mode = str(node.params.get("mode", "")).strip().upper()
    return None if mode in REDUCTION_MODES else f"reduction mode {mode} is not mapped to torch"


OPS: dict[str, OpFn] = {"ReductionAttributes": reduction}

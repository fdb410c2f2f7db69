"""Matmul with hipDNN's grouped batch rule in torch."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from hipdnn_trace.backends.torch_ops._common import Ctx, OpFn, Values, stored
from hipdnn_trace.graph.model import Graph, Node

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
    return {"c": stored(torch.matmul(a, b), out)}


OPS: dict[str, OpFn] = {"MatmulAttributes": matmul}

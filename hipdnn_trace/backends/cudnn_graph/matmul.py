"""Matmul -> ``matmul`` (hipDNN's grouped batches through broadcast strides)."""

from __future__ import annotations

from collections.abc import Sequence

from hipdnn_trace.backends.cudnn_graph.builder import PlanFn, _Builder
from hipdnn_trace.backends.cudnn_graph.conv import note_fp32
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.model import Node


def matmul(b: _Builder, node: Node) -> None:
    a, bb = node.inputs["a"], node.inputs["b"]
    ta, tb = b.graph.by_uid[a], b.graph.by_uid[bb]
    for i, (x, y) in enumerate(zip(ta.dims[:-2], tb.dims[:-2])):
        if x != y and 1 not in (x, y):
            raise UnsupportedError(f"matmul {node.name!r}: batch dim {i} is {x} vs {y}; cuDNN broadcasts only "
                                   "size-1 batch dims, not hipDNN's grouped batches")
    note_fp32(b, (a, bb))
    _broadcast_batch(b, (a, bb), node.outputs["c"])
    b.call(node, "matmul", {"A": b.tensor(a, "a"), "B": b.tensor(bb, "b")}, [b.output(node.outputs["c"])])


def _broadcast_batch(b: _Builder, operands: Sequence[int], out_uid: int) -> None:
    """A size-1 batch dim of an operand becomes the output's size with stride 0.

    cuDNN's matmul engines refuse implicit batch broadcasting ("batch dimensions of A,
    B and D need to be the same"); a stride-0 batch says the same thing explicitly and
    reads the same memory.
    """
    out_dims, _ = b.geom(b.graph.by_uid[out_uid])
    for uid in operands:
        dims, strides = b.geom(b.graph.by_uid[uid])
        batch = len(dims) - 2
        if any(dims[i] == 1 and out_dims[i] > 1 for i in range(batch)):
            new_d = tuple(out_dims[i] if dims[i] == 1 and out_dims[i] > 1 else dims[i] for i in range(batch))
            new_s = tuple(0 if dims[i] == 1 and out_dims[i] > 1 else strides[i] for i in range(batch))
            b.geometry[uid] = (new_d + tuple(dims[batch:]), new_s + tuple(strides[batch:]))


# hipDNN mode -> (pygraph method, cuDNN tensor kwargs in in_0, in_1, in_2 order)


OPS: dict[str, PlanFn] = {"MatmulAttributes": matmul}

"""Matmul: ports, hipDNN's batch broadcast rule, shape rule, FLOPs.

hipDNN's ``MatmulAttributes`` (docs/hipdnn-format.md 2.4, 3.7): c = a @ b over the last two dims, batch
dims broadcast (size 1) or grouped (one size divides the other).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import TYPE_CHECKING

from hipdnn_trace.graph.opspec import OpSpec, port_path, port_tensor

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Graph, Node


def matmul_batch_dims(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    """hipDNN's batch rule: per axis the larger size, and one size must divide the other
    (size-1 broadcast and grouped repeat, e.g. 8 A slices sharing 2 B slices)."""
    out = []
    for x, y in zip(a, b):
        big, small = max(x, y), min(x, y)
        if big % small:
            return None
        out.append(big)
    return tuple(out)


def _matmul_check(node: Node, graph: Graph) -> list[tuple[str, str]]:
    a, b, c = (port_tensor(node, graph, p) for p in ("a", "b", "c"))
    if a is None or b is None or c is None:
        return []
    if not (len(a.dims) == len(b.dims) == len(c.dims) >= 2):
        return [(port_path(node, "a"), f"matmul tensors need the same rank >= 2 (a {len(a.dims)}, "
                 f"b {len(b.dims)}, c {len(c.dims)})")]
    (m, k), (k2, n) = a.dims[-2:], b.dims[-2:]
    if k != k2:
        return [(port_path(node, "b"), f"inner dims differ: a is {list(a.dims)}, b is {list(b.dims)}")]
    batch = matmul_batch_dims(a.dims[:-2], b.dims[:-2])
    if batch is None:
        return [(port_path(node, "b"),
                 f"batch dims {list(a.dims[:-2])} and {list(b.dims[:-2])} do not broadcast")]
    expect = (*batch, m, n)
    if tuple(c.dims) != expect:
        return [(port_path(node, "c"), f"dims {list(c.dims)} do not match a @ b = {list(expect)}")]
    return []


def _matmul_flops(node: Node, graph: Graph) -> float:
    a, c = port_tensor(node, graph, "a"), port_tensor(node, graph, "c")
    return 2.0 * prod(c.dims) * a.dims[-1] if a and c else 0.0


SPECS: tuple[OpSpec, ...] = (
    OpSpec("MatmulAttributes", ("a", "b"), ("c",), check=_matmul_check, flops=_matmul_flops),
)

"""What every family's node handlers share: the handler type, one-value inputs, a port's dims."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from hipdnn_trace.backends.reference import xp as shim
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.model import Graph, Node

Inputs = Mapping[str, np.ndarray | None]
Outputs = dict[str, np.ndarray | None]
Handler = Callable[[Node, Graph, Inputs], Outputs]


def scalar(arr: np.ndarray | None, what: str) -> float | None:
    """A one-value input (epsilon, momentum, scale) as a float; None when unconnected."""
    if arr is None:
        return None
    flat = np.asarray(shim.to_numpy(arr), dtype=np.float64).reshape(-1)
    if flat.size != 1:
        raise UnsupportedError(f"{what} must be a single value, got {flat.size} elements")
    return float(flat[0])


def dims(graph: Graph, node: Node, port: str) -> tuple[int, ...]:
    """The dims of the tensor on ``port`` (an output's first, as the executor shapes results)."""
    uid = node.outputs.get(port, node.inputs.get(port))
    return tuple(graph.by_uid[uid].dims)   # type: ignore[index]


def compute_type(node: Node, graph: Graph) -> str:
    """The node's compute type, the graph's when the node leaves it unset."""
    compute = node.compute_data_type
    return graph.compute_data_type if compute in ("unset", "", None) else compute

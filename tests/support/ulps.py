"""How many units in the last place two float arrays of one type are apart, and which inputs of a
graph are derived statistics (computed in float64 from other inputs, so a device's summation order
may move them by one unit of their type against the host's)."""

from __future__ import annotations

import numpy as np

from hipdnn_trace.graph.model import Graph

_INT = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
#: (node type, input port) of the inputs bench/*_inputs.py compute from other inputs in float64
DERIVED_PORTS = {("LayernormBackwardAttributes", "mean"), ("LayernormBackwardAttributes", "inv_variance"),
                 ("RMSNormBackwardAttributes", "inv_rms")}


def ulps_apart(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per element, the number of representable values of the arrays' float type between a and b
    (0 for equal bits and for +0 / -0): sign-magnitude bits mapped to one ordered integer line."""
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    signed = _INT[a.dtype.itemsize]
    top = np.int64(np.iinfo(signed).min)

    def ordered(x: np.ndarray) -> np.ndarray:
        raw = np.ascontiguousarray(x).view(signed).astype(np.int64)
        return np.where(raw < 0, top - raw, raw)   # negative floats: mirror below zero

    return np.abs(ordered(a) - ordered(b))


def derived_statistics(graph: Graph) -> set[int]:
    """uids of the saved statistics a norm backward's inputs are computed from (DERIVED_PORTS)."""
    return {uid for node in graph.nodes for port, uid in node.inputs.items()
            if (node.type, port) in DERIVED_PORTS and isinstance(uid, int)}

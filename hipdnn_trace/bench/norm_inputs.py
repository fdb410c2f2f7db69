"""Normalization inputs with a domain or a meaning: variances and inverse variances are positive,
and a layernorm/RMSNorm backward's saved statistics are computed from its x, never random."""

from __future__ import annotations

from typing import Any

import numpy as np

from hipdnn_trace.bench.device_arrays import host_array
from hipdnn_trace.graph.model import Graph, Node

#: (node type, port) of the inputs that must be > 0
POSITIVE_PORTS = {
    ("BatchnormInferenceAttributes", "inv_variance"),
    ("BatchnormAttributes", "prev_running_variance"),
    ("BatchnormBackwardAttributes", "inv_variance"),
    ("BatchnormInferenceAttributesVarianceExt", "variance"),
}

#: epsilon the saved statistics of a norm backward are computed with (hipDNN's reference default)
SAVED_STATS_EPSILON = 1e-5


def domain(node: Node, port: str) -> str | None:
    return "positive" if (node.type, port) in POSITIVE_PORTS else None


def derived(graph: Graph, inputs: dict[int, Any], seed: int, device: Any) -> dict[int, np.ndarray]:
    """A layernorm/RMSNorm backward's saved mean, inv_variance or inv_rms, computed from its x
    (as the forward would have saved them), rounded to their types (host arrays)."""
    from hipdnn_trace.backends.reference.ops.rounding import round_to
    from hipdnn_trace.graph.norms import norm_backward_start

    out: dict[int, np.ndarray] = {}
    for node in graph.nodes:
        if node.type not in ("LayernormBackwardAttributes", "RMSNormBackwardAttributes"):
            continue
        start = norm_backward_start(node, graph)
        x_uid = node.inputs.get("x")
        if start is None or not isinstance(x_uid, int) or x_uid not in inputs:
            continue
        x = np.asarray(host_array(inputs[x_uid], graph.by_uid[x_uid]), dtype=np.float64)
        axes = tuple(range(start, x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        values = {
            "mean": mean,
            "inv_variance": 1.0 / np.sqrt(np.square(x - mean).mean(axis=axes, keepdims=True) + SAVED_STATS_EPSILON),
            "inv_rms": 1.0 / np.sqrt(np.square(x).mean(axis=axes, keepdims=True) + SAVED_STATS_EPSILON),
        }
        for port, value in values.items():
            uid = node.inputs.get(port)
            if isinstance(uid, int) and uid in inputs:
                t = graph.by_uid[uid]
                out[uid] = round_to(value.reshape(t.dims), t.data_type)
    return out

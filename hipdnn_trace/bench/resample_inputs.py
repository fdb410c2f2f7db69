"""Pooling inputs with meaning: a max-pool backward's index is the argmax of a forward."""

from __future__ import annotations

from typing import Any

import numpy as np

from hipdnn_trace.bench import counter_rng
from hipdnn_trace.graph import resample
from hipdnn_trace.graph.model import Graph


def derived(graph: Graph, inputs: dict[int, Any], seed: int, device: Any) -> dict[int, np.ndarray]:
    """A max-pool backward's index, computed from a seeded x of dx's shape, so every index lies in
    its window as a real forward's would (host arrays, rounded to the index's type)."""
    from hipdnn_trace.backends.reference.ops.pooling import pool_forward
    from hipdnn_trace.backends.reference.ops.rounding import round_to

    out: dict[int, np.ndarray] = {}
    for node in graph.nodes:
        uid = node.inputs.get("index")
        if node.type != resample.RESAMPLE_BWD or not isinstance(uid, int):
            continue
        dx = graph.by_uid[node.outputs["dx"]]
        x = counter_rng.drawn(dx.dims, "float", "any", counter_rng.Stream.of(seed, graph.graph_id, dx.uid))
        _, index = pool_forward(x.astype(np.float64), resample.pooling(node), with_index=True)
        out[uid] = round_to(index.astype(np.float64), graph.by_uid[uid].data_type)
    return out

"""Deterministic graph inputs from a seed.

Values exercise signs and magnitudes (a normal spread over four binary orders),
not only [0, 1), so sign bugs and scale bugs show up in validation. Ports whose
meaning needs a domain (variances, log/sqrt arguments, divisors) get one. Every
array is generated in float64 and rounded once to the tensor's type: the
reference and the device see the same bits.
"""

from __future__ import annotations

import hashlib

import numpy as np

from hipdnn_trace.bench import attention_inputs, moe_inputs
from hipdnn_trace.graph import dtypes
from hipdnn_trace.graph.dtypes import scalar_value
from hipdnn_trace.graph.model import Graph, Node, Tensor

#: Domains: "any" (both signs), "positive" (> 0, e.g. variances), "nonzero" (|x| >= 0.25).
POSITIVE_PORTS = {
    ("BatchnormInferenceAttributes", "inv_variance"),
    ("BatchnormAttributes", "prev_running_variance"),
    ("BatchnormBackwardAttributes", "inv_variance"),
    ("BlockScaleDequantizeAttributes", "scale"),
    ("BatchnormInferenceAttributesVarianceExt", "variance"),   # e8m0 has no sign; a scale is a magnitude
}
#: Ports that carry a hyper-parameter rather than data, with the value they get
#: when the graph passes them as ordinary tensors instead of by-value scalars.
CONSTANT_PORTS = {"epsilon": 1e-5, "momentum": 0.1}
POSITIVE_MODES = {"log", "sqrt", "rsqrt"}
NONZERO_MODES = {"div", "reciprocal"}


def _domain(graph: Graph, uid: int) -> str:
    for node in graph.nodes:
        for port, u in node.inputs.items():
            if u != uid:
                continue
            if (node.type, port) in POSITIVE_PORTS:
                return "positive"
            if port in CONSTANT_PORTS:
                return port
            if node.type == "PointwiseAttributes":
                mode = str(node.params.get("operation", "")).lower()   # hipDNN accepts any case
                if mode in POSITIVE_MODES and port == "in_0":
                    return "positive"
                if mode in NONZERO_MODES and (port == "in_1" or mode == "reciprocal"):
                    return "nonzero"
    return "any"


def _seed_for(seed: int, graph_id: str, uid: int) -> np.random.Generator:
    """Independent stream per (seed, graph, tensor): adding a tensor changes no other."""
    digest = hashlib.sha256(f"{seed}:{graph_id}:{uid}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _values(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, domain: str) -> np.ndarray:
    info = dtypes.lookup(dtype)
    if not info.is_float:
        lo, hi = {"uint8": (0, 16), "boolean": (0, 2)}.get(dtype, (-8, 9))
        return rng.integers(lo, hi, size=shape).astype(np.float64)
    base = rng.standard_normal(shape) * np.exp2(rng.uniform(-2.0, 2.0, size=shape))
    if domain == "positive":
        return np.abs(base) + 0.5
    if domain in CONSTANT_PORTS:
        return np.full(shape, CONSTANT_PORTS[domain])
    if domain == "nonzero":
        return np.copysign(np.abs(base) + 0.25, base)
    return base


def make_input(graph: Graph, tensor: Tensor, seed: int) -> np.ndarray:
    """One input tensor: logical dims, in the tensor's own dtype."""
    from hipdnn_trace.backends.reference.ops.rounding import round_to

    def rng_for(uid: int) -> np.random.Generator:
        return _seed_for(seed, graph.graph_id, uid)

    values = attention_inputs.metadata_value(graph, tensor, rng_for)
    if values is None:
        values = moe_inputs.metadata_value(graph, tensor, rng_for)
    if values is None:
        values = _values(rng_for(tensor.uid), tuple(tensor.dims), tensor.data_type, _domain(graph, tensor.uid))
    return round_to(values, tensor.data_type)


def make_inputs(graph: Graph, seed: int) -> dict[int, np.ndarray]:
    """Every tensor the caller must supply, keyed by uid.

    Inputs that are another op's results in real use (an attention backward's O and
    stats) are computed from the generated ones rather than drawn.
    """
    inputs = {t.uid: make_input(graph, t, seed) for t in graph.input_tensors}
    if attention_inputs.attention_nodes(graph):
        inputs.update(attention_inputs.forward_results(graph, inputs))
    inputs.update(_saved_norm_statistics(graph, inputs))
    inputs.update(_pooling_indices(graph, seed))
    return inputs


def _pooling_indices(graph: Graph, seed: int) -> dict[int, np.ndarray]:
    """A max-pool backward's index is the argmax of a forward over some x: computed from a
    seeded x of dx's shape, so every index lies in its window as a real forward's would."""
    from hipdnn_trace.backends.reference.ops.pooling import pool_forward
    from hipdnn_trace.backends.reference.ops.rounding import round_to
    from hipdnn_trace.graph import resample

    out: dict[int, np.ndarray] = {}
    for node in graph.nodes:
        uid = node.inputs.get("index")
        if node.type != resample.RESAMPLE_BWD or not isinstance(uid, int):
            continue
        dx = graph.by_uid[node.outputs["dx"]]
        x = _values(_seed_for(seed, graph.graph_id, dx.uid), tuple(dx.dims), "float", "any")
        _, index = pool_forward(x, resample.pooling(node), with_index=True)
        out[uid] = round_to(index.astype(np.float64), graph.by_uid[uid].data_type)
    return out


#: epsilon the saved statistics of a norm backward are computed with (hipDNN's reference default)
SAVED_STATS_EPSILON = 1e-5


def _saved_norm_statistics(graph: Graph, inputs: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    """A layernorm/RMSNorm backward's saved mean, inv_variance or inv_rms, computed from its x
    (as the forward would have saved them), rounded to their types; never random."""
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
        x = np.asarray(inputs[x_uid], dtype=np.float64)
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


def node_scalar(graph: Graph, node: Node, port: str) -> float | None:
    """A by-value scalar input of a node, or None if the port is not a by-value tensor."""
    uid = node.inputs.get(port)
    if isinstance(uid, int):
        t = graph.by_uid[uid]
        if t.is_value:
            return scalar_value(t)
    return None

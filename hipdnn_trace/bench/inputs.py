"""Deterministic graph inputs from a seed.

Values exercise signs and magnitudes (a normal spread over four binary orders),
not only [0, 1), so sign bugs and scale bugs show up in validation. Ports whose
meaning needs a domain (variances, log/sqrt arguments, divisors) get one. Drawn
values come from the counter-based generator (``counter_rng``, :data:`GENERATOR`):
element i of a tensor depends only on (seed, graph, uid, i), is made on the host in
parallel chunks or on a GPU with the same bits, and is already in the tensor's type.
Inputs with meaning (lengths, page tables, routing, constants, saved statistics,
pooling indices) are made on the host and uploaded; an attention backward's O and
stats are computed where the inputs live.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from hipdnn_trace.bench import attention_inputs, counter_rng, device_arrays, moe_inputs
from hipdnn_trace.bench.counter_rng import GENERATOR
from hipdnn_trace.bench.device_arrays import host_array
from hipdnn_trace.graph import dtypes
from hipdnn_trace.graph.model import Graph, Tensor

__all__ = ["GENERATOR", "drawn", "host_array", "make_input", "make_inputs"]

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
    """PCG64 stream per (seed, graph, tensor) for inputs with meaning (lengths, page tables,
    routing): small, made on the host, uploaded; adding a tensor changes no other."""
    digest = hashlib.sha256(f"{seed}:{graph_id}:{uid}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _table_domain(domain: str) -> str:
    return domain if domain in counter_rng.DOMAINS else "any"


def drawn(dims: Sequence[int], dtype: str, domain: str, stream: counter_rng.Stream) -> np.ndarray:
    """Counter-generated values (host): element i depends only on (stream, i); ``dtype``'s numpy type."""
    values = counter_rng.table(_table_domain(domain), dtype)
    out = np.empty(math.prod(dims), dtype=np.float64 if dtype == "double" else values.dtype)
    counter_rng.fill(out, stream, values, wide=dtype in counter_rng.WIDE)
    return out.reshape(tuple(dims))


def _meaningful(graph: Graph, tensor: Tensor, seed: int, domain: str) -> np.ndarray | None:
    """The host value of an input with meaning (metadata, a constant), else None (drawn)."""
    from hipdnn_trace.backends.reference.ops.rounding import round_to

    def rng_for(uid: int) -> np.random.Generator:
        return _seed_for(seed, graph.graph_id, uid)

    values = attention_inputs.metadata_value(graph, tensor, rng_for)
    if values is None:
        values = moe_inputs.metadata_value(graph, tensor, rng_for)
    if values is None and domain in CONSTANT_PORTS and dtypes.lookup(tensor.data_type).is_float:
        values = np.full(tuple(tensor.dims), CONSTANT_PORTS[domain])
    return None if values is None else round_to(values, tensor.data_type)


def make_input(graph: Graph, tensor: Tensor, seed: int, *, device: Any = None) -> Any:
    """One input tensor: logical dims, in the tensor's own dtype; on ``device`` (a torch device)
    as a torch tensor when given, bitwise the host's. Types torch has no dtype for stay host arrays."""
    domain = _domain(graph, tensor.uid)
    host = _meaningful(graph, tensor, seed, domain)
    stream = counter_rng.Stream.of(seed, graph.graph_id, tensor.uid)
    if host is None and _on_device(tensor, device):
        return device_arrays.drawn(tensor, stream, _table_domain(domain), device)
    if host is None:
        host = drawn(tensor.dims, tensor.data_type, domain, stream)
    return _placed(host, tensor, device)


def _on_device(tensor: Tensor, device: Any) -> bool:
    return device is not None and device_arrays.torch_dtype(tensor.data_type) is not None


def _placed(host: np.ndarray, tensor: Tensor, device: Any) -> Any:
    """A host-made value where the caller wants it: uploaded to ``device`` when torch has its type."""
    return device_arrays.upload(host, tensor, device) if _on_device(tensor, device) else host


def make_inputs(graph: Graph, seed: int, *, device: Any = None) -> dict[int, Any]:
    """Every tensor the caller must supply, keyed by uid: host numpy arrays, or with ``device``
    torch tensors there (``host_array`` brings one back).

    Inputs that are another op's results in real use (an attention backward's O and
    stats) are computed from the generated ones rather than drawn; with a device, on it.
    """
    inputs = {t.uid: make_input(graph, t, seed, device=device) for t in graph.input_tensors}
    if attention_inputs.attention_nodes(graph):
        inputs.update(attention_inputs.forward_results(graph, inputs, device=device))
    derived = {**_saved_norm_statistics(graph, inputs), **_pooling_indices(graph, seed)}
    inputs.update({uid: _placed(value, graph.by_uid[uid], device) for uid, value in derived.items()})
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
        x = drawn(dx.dims, "float", "any", counter_rng.Stream.of(seed, graph.graph_id, dx.uid))
        _, index = pool_forward(x.astype(np.float64), resample.pooling(node), with_index=True)
        out[uid] = round_to(index.astype(np.float64), graph.by_uid[uid].data_type)
    return out


#: epsilon the saved statistics of a norm backward are computed with (hipDNN's reference default)
SAVED_STATS_EPSILON = 1e-5


def _saved_norm_statistics(graph: Graph, inputs: dict[int, Any]) -> dict[int, np.ndarray]:
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

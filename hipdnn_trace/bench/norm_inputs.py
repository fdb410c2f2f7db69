"""Normalization inputs with a domain or a meaning: variances and inverse variances are positive,
and a layernorm/RMSNorm backward's saved statistics are computed from its x, never random."""

from __future__ import annotations

from typing import Any

import numpy as np

from hipdnn_trace.bench import device_arrays
from hipdnn_trace.bench.device_arrays import host_array
from hipdnn_trace.graph.model import Graph, Node, Tensor

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


def derived(graph: Graph, inputs: dict[int, Any], seed: int, device: Any) -> dict[int, Any]:
    """A layernorm/RMSNorm backward's saved mean, inv_variance or inv_rms, computed from its x
    (as the forward would have saved them), rounded to their types.

    The float64 statistics are computed where x is: a host x with numpy (bit for bit as always), a
    device x (a torch tensor) with torch on its device, rounded there when torch stores the type as
    a device input (``device_arrays.stored``; copying an LLM-size x to the host cost ~1 s a graph).
    A different summation order may move a statistic by one unit in the last place of its type.
    """
    from hipdnn_trace.graph.norms import norm_backward_start

    out: dict[int, Any] = {}
    for node in graph.nodes:
        if node.type not in ("LayernormBackwardAttributes", "RMSNormBackwardAttributes"):
            continue
        start = norm_backward_start(node, graph)
        x_uid = node.inputs.get("x")
        if start is None or not isinstance(x_uid, int) or x_uid not in inputs:
            continue
        wanted = {port: uid for port in ("mean", "inv_variance", "inv_rms")
                  if isinstance(uid := node.inputs.get(port), int) and uid in inputs}
        if not wanted:
            continue
        values = _statistics(_float64(inputs[x_uid], graph.by_uid[x_uid]), start, set(wanted))
        out.update({uid: device_arrays.stored(values[port], graph.by_uid[uid]) for port, uid in wanted.items()})
    return out


def _float64(value: Any, tensor: Tensor) -> Any:
    """x as float64 where it is: a device tensor of a torch floating type stays there, anything else
    (a host array, fp4 codes) is the host array's float64 copy."""
    from hipdnn_trace.backends.reference import xp as shim

    on_device = not isinstance(value, np.ndarray) and shim.is_torch(shim.namespace(value))
    if on_device and value.is_floating_point() and value.dtype == device_arrays.torch_dtype(tensor.data_type):
        import torch

        return value.to(torch.float64)
    return np.asarray(host_array(value, tensor), dtype=np.float64)


def _statistics(x: Any, start: int, ports: set[str]) -> dict[str, Any]:
    """The float64 saved statistics in ``ports`` of x over its axes from ``start``, in x's namespace."""
    from hipdnn_trace.backends.reference import xp as shim

    xp = shim.namespace(x)
    axes = tuple(range(start, x.ndim))
    values: dict[str, Any] = {}
    if ports & {"mean", "inv_variance"}:
        mean = xp.mean(x, axis=axes, keepdims=True)
        values["mean"] = mean
        if "inv_variance" in ports:
            variance = xp.mean(xp.square(x - mean), axis=axes, keepdims=True)
            values["inv_variance"] = 1.0 / xp.sqrt(variance + SAVED_STATS_EPSILON)
    if "inv_rms" in ports:
        values["inv_rms"] = 1.0 / xp.sqrt(xp.mean(xp.square(x), axis=axes, keepdims=True) + SAVED_STATS_EPSILON)
    return values

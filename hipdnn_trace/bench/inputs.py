"""Deterministic graph inputs from a seed.

Values exercise signs and magnitudes (a normal spread over four binary orders),
not only [0, 1), so sign bugs and scale bugs show up in validation. Ports whose
meaning needs a domain (variances, log/sqrt arguments, divisors) get one. Drawn
values come from the counter-based generator (``counter_rng``, :data:`GENERATOR`):
element i of a tensor depends only on (seed, graph, uid, i), is made on the host in
parallel chunks or on a GPU with the same bits, and is already in the tensor's type.
Inputs with meaning (lengths, page tables, routing, constants, pooling indices) are
made on the host and uploaded; inputs computed from others (a norm backward's saved
statistics, an attention backward's O and stats) are computed and rounded where the
inputs live.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from importlib import import_module
from types import ModuleType
from typing import Any

import numpy as np

from hipdnn_trace.bench import counter_rng, device_arrays
from hipdnn_trace.bench.counter_rng import GENERATOR, drawn
from hipdnn_trace.bench.device_arrays import host_array
from hipdnn_trace.graph import dtypes
from hipdnn_trace.graph.families import FAMILIES, Absent
from hipdnn_trace.graph.model import Graph, Node, Tensor
from hipdnn_trace.graph.ops import family_types

__all__ = ["GENERATOR", "drawn", "host_array", "make_input", "make_inputs"]

#: each family's input rules (the ``inputs`` entries of ``graph/families.py``), in registry order
RULES: tuple[ModuleType, ...] = tuple(import_module(f.inputs) for f in FAMILIES if not isinstance(f.inputs, Absent))


def _domain_rules() -> dict[str, Callable[[Node, str], str | None]]:
    """Node type -> its family's ``domain(node, port)``, for the families that have one."""
    rules: dict[str, Callable[[Node, str], str | None]] = {}
    for family in FAMILIES:
        domain = None if isinstance(family.inputs, Absent) else getattr(import_module(family.inputs), "domain", None)
        if domain is not None:
            rules.update(dict.fromkeys(family_types(family), domain))
    return rules


_DOMAINS = _domain_rules()

#: Ports that carry a hyper-parameter rather than data, with the value they get
#: when the graph passes them as ordinary tensors instead of by-value scalars.
CONSTANT_PORTS = {"epsilon": 1e-5, "momentum": 0.1}


def _domain(graph: Graph, uid: int) -> str:
    """Domains: "any" (both signs), "positive" (> 0, e.g. variances), "nonzero" (|x| >= 0.25), or a
    constant port's name; the first reader with a rule decides."""
    for node in graph.nodes:
        for port, u in node.inputs.items():
            if u != uid:
                continue
            rule = _DOMAINS.get(node.type)
            domain = rule(node, port) if rule is not None else None
            if domain:
                return domain
            if port in CONSTANT_PORTS:
                return port
    return "any"


def _seed_for(seed: int, graph_id: str, uid: int) -> np.random.Generator:
    """PCG64 stream per (seed, graph, tensor) for inputs with meaning (lengths, page tables,
    routing): small, made on the host, uploaded; adding a tensor changes no other."""
    digest = hashlib.sha256(f"{seed}:{graph_id}:{uid}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _meaningful(graph: Graph, tensor: Tensor, seed: int, domain: str) -> np.ndarray | None:
    """The host value of an input with meaning (metadata, a constant), else None (drawn)."""
    from hipdnn_trace.backends.reference.ops.rounding import round_to

    def rng_for(uid: int) -> np.random.Generator:
        return _seed_for(seed, graph.graph_id, uid)

    values = None
    for rules in RULES:
        if values is None and hasattr(rules, "metadata_value"):
            values = rules.metadata_value(graph, tensor, rng_for)
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
        return device_arrays.drawn(tensor, stream, counter_rng.table_domain(domain), device)
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
    for rules in RULES:
        if hasattr(rules, "derived"):
            made = rules.derived(graph, inputs, seed, device)
            inputs.update({uid: _placed(value, graph.by_uid[uid], device) if isinstance(value, np.ndarray) else value
                           for uid, value in made.items()})
    return inputs

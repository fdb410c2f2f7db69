"""Walk a graph node by node with the float64 reference ops.

The node handlers are each family's ``reference/nodes`` module (named in ``graph/families.py``);
this module collects them and walks the graph.

Each node reads its inputs as stored (rounded to their tensor types, as a real
implementation would see them), computes in float64, and its outputs are rounded
to their tensors' types before the next node reads them. The unrounded float64
results are kept too: they are the oracle that validation compares against.

``device="cuda"`` runs the same op code on torch float64 tensors on the GPU for every node (the
ops are written against the Array API; ``xp.py`` holds what the standard lacks). Inputs move to
the device once; by default each result comes back to the host as float64 (the exact oracle) with
its value rounded to its tensor's type (on the device where that gives the host's bits,
``rounding.round_in``; else on the host with the same numpy code as on the CPU). With
``keep_on_device`` results stay on the device, rounded there with the same bits
(``rounding.round_in``), and only the graph's outputs are returned, as device tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hipdnn_trace.backends.family_tables import layer_tables
from hipdnn_trace.backends.reference import ops as ref, xp as shim
from hipdnn_trace.backends.reference.nodes._common import Handler
from hipdnn_trace.backends.reference.ops._arrays import f64, size
from hipdnn_trace.backends.reference.ops.rounding import TORCH_EXACT
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph import dtypes, ops
from hipdnn_trace.graph.dtypes import scalar_value
from hipdnn_trace.graph.load import execution_order
from hipdnn_trace.graph.model import Graph, Node
from hipdnn_trace.graph.ops import absent_refusal

#: why the reference refuses a node of a family it has (one line), or None
Check = Callable[[Node, Graph], "str | None"]


@dataclass
class Evaluation:
    """Every produced tensor: ``exact`` in float64, ``stored`` in its own dtype (numpy arrays); with
    ``keep_on_device``, the graph's outputs only, as device tensors (stored in
    ``xp.torch_storage_dtype``), so a validator on the device needs no host copy."""

    exact: dict[int, Any]
    stored: dict[int, Any]
    #: where each node ran, by node name: "cpu" or the device (e.g. "cuda:0")
    placement: dict[str, str] = field(default_factory=dict)


_TABLES = layer_tables("reference", "HANDLERS")   # graph/families.py's reference entries
HANDLERS: dict[str, Handler] = _TABLES.ops
_CHECKS, _ABSENT = _TABLES.checks, _TABLES.absent


def check(graph: Graph) -> str | None:
    """Why the reference cannot run ``graph`` (one line), or None if it can."""
    for tensor in graph.tensors:
        if dtypes.lookup(tensor.data_type).numpy is None:
            return f"tensor {tensor.name!r}: data type {tensor.data_type} has no host form"
    for node in graph.nodes:
        if node.type in _ABSENT:
            return absent_refusal(node, _ABSENT[node.type], "the float64 reference")
        if node.type not in HANDLERS:
            return f"unsupported op {node.op}"
        spec = ops.spec(node.type)
        known = set(spec.all_inputs) | set(spec.all_outputs) if spec else set()
        extra = [p for p, u in {**node.inputs, **node.outputs}.items()
                 if p not in known and u not in (None, ())]
        if extra:
            return f"{node.op} node {node.name!r}: port(s) {', '.join(extra)} not modelled"
        family_check = _CHECKS.get(node.type)
        reason = family_check(node, graph) if family_check is not None else None
        if reason:
            return reason
    return None


#: ops whose float64 math runs in the device namespace: every family (each op module is
#: namespace-generic), so a graph never falls back to the host when a device is there
DEVICE_OPS: frozenset[str] = frozenset(HANDLERS)


def evaluate(graph: Graph, inputs: Mapping[int, Any], *, device: str = "cpu", xp: Any = None,
             keep_on_device: bool = False) -> Evaluation:
    """Run every node; inputs are logical arrays keyed by uid, in their tensors' dtypes.

    ``device``: "cpu" (numpy) or "cuda" (torch float64 on the GPU); ``xp``, an Array API
    namespace to run the ops in instead (the tests pass array-api-strict, or torch for its CPU).
    Results are numpy arrays of every produced tensor, unless ``keep_on_device`` (a torch target):
    then inputs may be torch tensors on the device in their storage dtypes (numpy ones are uploaded
    once), stored values are rounded there, and ``exact`` (float64) and ``stored`` (the storage dtype,
    ``xp.torch_storage_dtype``) hold device tensors of the graph's outputs only. On the CPU
    (numpy), ``keep_on_device`` changes nothing: the host is where the arrays are.
    """
    if xp is None and device == "cpu":
        return _evaluate_host(graph, _on_host(graph, inputs))
    target = shim.Target.of(device) if xp is None else shim.Target(xp, None, getattr(xp, "__name__", "xp"))
    if keep_on_device:
        if not shim.is_torch(target.xp):
            raise ValueError(f"keep_on_device needs a torch device, not {target.label}")
        return _evaluate_resident(graph, inputs, target)
    return _evaluate_on(graph, _on_host(graph, inputs), target)


def _on_host(graph: Graph, inputs: Mapping[int, Any]) -> dict[int, np.ndarray]:
    """Inputs as host arrays: torch tensors come back in their tensors' numpy dtypes, bit for bit."""
    return {u: a if isinstance(a, np.ndarray) or not shim.is_torch(shim.namespace(a))
            else shim.storage_to_numpy(a, graph.by_uid[u].data_type) for u, a in inputs.items()}


def _handler(node: Node) -> Handler:
    handler = HANDLERS.get(node.type)
    if handler is None:
        raise UnsupportedError(f"unsupported op {node.op}")
    return handler


def _result(node: Node, graph: Graph, results: Mapping[str, Any], port: str, uid: int) -> Any:
    """Output ``port``'s value, shaped like its tensor (any namespace)."""
    value = results.get(port)
    if value is None:
        raise UnsupportedError(f"{node.op} node {node.name!r} cannot produce output {port}")
    tensor = graph.by_uid[uid]
    if tuple(value.shape) != tuple(tensor.dims):
        if size(value) != tensor.numel:
            raise UnsupportedError(f"{node.op} computed shape {tuple(value.shape)} for {tensor.name!r} "
                                   f"of dims {list(tensor.dims)}")
        value = shim.namespace(value).reshape(value, tuple(tensor.dims))
    return value


def _values(graph: Graph) -> dict[int, np.ndarray]:
    """The pass-by-value scalars (epsilon, momentum...) as float64 host arrays."""
    return {t.uid: np.full(t.dims, scalar_value(t), dtype=np.float64) for t in graph.value_tensors}


def _last_reads(graph: Graph, order: list[int]) -> dict[int, int]:
    """The step of each tensor's last reader (tensors nobody reads are absent)."""
    return {uid: step for step, index in enumerate(order)
            for uid in graph.reads(graph.nodes[index]).values()}


def _drop_read(held: dict[int, Any], last_read: Mapping[int, int], step: int) -> None:
    """Forget the device copies no node after ``step`` reads."""
    for uid in [u for u in held if last_read.get(u, -1) <= step]:
        del held[uid]


def _evaluate_host(graph: Graph, inputs: Mapping[int, np.ndarray]) -> Evaluation:
    stored: dict[int, np.ndarray] = {**inputs, **_values(graph)}
    exact: dict[int, np.ndarray] = {}
    placement: dict[str, str] = {}
    for index in execution_order(graph):
        node = graph.nodes[index]
        handler = _handler(node)
        args: dict[str, np.ndarray | None] = {}
        for port, uid in graph.reads(node).items():
            if uid not in stored:
                raise UnsupportedError(f"input {port} (uid {uid}) of {node.name!r} was not bound")
            args[port] = stored[uid]
        results = handler(node, graph, args)
        for port, uid in node.outputs.items():
            if uid is None:
                continue
            value = results.get(port)
            if value is not None:
                value = np.asarray(value, dtype=np.float64)
            value = _result(node, graph, {port: value}, port, uid)
            exact[uid] = value
            stored[uid] = ref.round_to(value, graph.by_uid[uid].data_type)
        placement[node.name] = "cpu"
    return Evaluation(exact, {u: a for u, a in stored.items() if u in exact}, placement)


def _evaluate_on(graph: Graph, inputs: Mapping[int, np.ndarray], target: shim.Target) -> Evaluation:
    """Every node in ``target``'s namespace; every result comes back to the host (exact float64) with
    its stored value, and is on the device again only while a later node reads it. On a torch target
    inputs go up in their storage dtypes (a quarter of float64's bytes for bfloat16, each reader
    converting) and results are rounded there when ``round_in`` gives ``round_to``'s bits (only the
    stored bytes come back, no host rounding pass); elsewhere as float64, rounded on the host. A
    device copy is dropped after its last reader."""
    order = execution_order(graph)
    host: dict[int, np.ndarray] = {**inputs, **_values(graph)}
    last_read = _last_reads(graph, order)
    on_device: dict[int, Any] = {}
    exact: dict[int, np.ndarray] = {}
    placement: dict[str, str] = {}
    torch_target = shim.is_torch(target.xp)
    for step, index in enumerate(order):
        node = graph.nodes[index]
        read = _bound(node, graph, host)
        for uid in read:
            if uid not in on_device:
                on_device[uid] = _upload(graph, uid, host[uid], target) if torch_target \
                    else shim.from_numpy(target.xp, host[uid], target.device)
        results = _run(node, graph, {uid: f64(on_device[uid]) for uid in read})
        _bring_back(graph, results, exact, host, on_device, torch_target)
        placement[node.name] = target.label
        _drop_read(on_device, last_read, step)
    return Evaluation(exact, {u: a for u, a in host.items() if u in exact}, placement)


def _bring_back(graph: Graph, results: Mapping[int, Any], exact: dict[int, np.ndarray],
                host: dict[int, np.ndarray], on_device: dict[int, Any], torch_target: bool) -> None:
    """Device results to the host (exact), with their stored values: rounded on a torch device where
    that is ``round_to``'s bits (and kept there for a later reader), else on the host (float64 ones
    stay on the device: stored == exact). Nothing else of them outlives this call."""
    for uid, value in results.items():
        tensor = graph.by_uid[uid]
        exact[uid] = np.asarray(shim.to_numpy(value), dtype=np.float64)
        if torch_target and tensor.data_type in TORCH_EXACT:
            stored = ref.round_in(value, tensor.data_type)
            host[uid] = shim.storage_to_numpy(stored, tensor.data_type)
            on_device[uid] = stored
            continue
        host[uid] = ref.round_to(exact[uid], tensor.data_type)
        if tensor.data_type == "double":
            on_device[uid] = value


def _bound(node: Node, graph: Graph, have: Mapping[int, Any]) -> list[int]:
    """The uids ``node`` reads (``Graph.reads``: ragged offsets too), each checked to be bound."""
    uids = []
    for port, uid in graph.reads(node).items():
        if uid not in have:
            raise UnsupportedError(f"input {port} (uid {uid}) of {node.name!r} was not bound")
        uids.append(uid)
    return uids


def _run(node: Node, graph: Graph, values: Mapping[int, Any]) -> dict[int, Any]:
    """``node``'s outputs by uid, shaped like their tensors, from float64 ``values`` by uid (in a
    function of its own, so its arguments and temporaries are freed when it returns)."""
    args = {port: values[uid] for port, uid in graph.reads(node).items()}
    results = _handler(node)(node, graph, args)
    return {uid: _result(node, graph, results, port, uid) for port, uid in node.outputs.items() if uid is not None}


def _evaluate_resident(graph: Graph, inputs: Mapping[int, Any], target: shim.Target) -> Evaluation:
    """Every node on a torch device, every result stays there: each is rounded to its type on the
    device (``rounding.round_in``), kept in its storage dtype while a later node reads it (read as
    float64 by each reader) and, for the graph's outputs only, returned as exact and stored tensors."""
    order = execution_order(graph)
    state = _Resident(graph, target, _last_reads(graph, order), {**inputs, **_values(graph)})
    placement: dict[str, str] = {}
    for step, index in enumerate(order):
        node = graph.nodes[index]
        state.keep(step, _run(node, graph, state.read(node)))
        placement[node.name] = target.label
        _drop_read(state.live, state.last_read, step)
    return Evaluation(state.exact, state.stored, placement)


@dataclass
class _Resident:
    """What a device-resident evaluation holds: inputs not uploaded yet, stored values later nodes
    read, and the graph outputs' exact and stored tensors. Nothing else outlives its node."""

    graph: Graph
    target: shim.Target
    last_read: dict[int, int]
    waiting: dict[int, Any]
    live: dict[int, Any] = field(default_factory=dict)
    exact: dict[int, Any] = field(default_factory=dict)
    stored: dict[int, Any] = field(default_factory=dict)

    def read(self, node: Node) -> dict[int, Any]:
        """The float64 values ``node`` reads (one conversion per tensor, freed after the node);
        an input is uploaded at its first reader."""
        for uid in _bound(node, self.graph, {**self.waiting, **self.live}):
            if uid not in self.live:
                self.live[uid] = _upload(self.graph, uid, self.waiting.pop(uid), self.target)
        return {uid: f64(self.live[uid]) for uid in set(self.graph.reads(node).values())}

    def keep(self, step: int, results: Mapping[int, Any]) -> None:
        """Round each result on the device; keep it where an output or a later reader needs it."""
        outputs = {t.uid for t in self.graph.output_tensors}
        for uid, value in results.items():
            exact = f64(value)
            stored = ref.round_in(exact, self.graph.by_uid[uid].data_type)
            if uid in outputs:
                self.exact[uid], self.stored[uid] = exact, stored
            if self.last_read.get(uid, -1) > step:
                self.live[uid] = stored


def _upload(graph: Graph, uid: int, value: Any, target: shim.Target) -> Any:
    """An input on the device: a torch tensor as it is (moved if elsewhere), a host array in its
    tensor's storage dtype when it has that dtype, else as its float64 values."""
    if not isinstance(value, np.ndarray):
        return value.to(target.device if target.device is not None else "cpu")
    name = graph.by_uid[uid].data_type
    if dtypes.lookup(name).numpy == value.dtype:
        return shim.to_storage(value, name, target.device)
    return shim.from_numpy(target.xp, value, target.device)

"""The shape of an op description, shared by every op family's spec module.

:class:`OpSpec` says what a hipDNN node type is: its ports, where its options sit in
the JSON, its shape rule and its cost. Each family's spec module (named by its entry in
``graph/families.py``) holds its specs and ``graph/ops.py`` collects them; this module
holds only the type and the small port and rule helpers the families' rules share, so no
family imports another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Graph, Node, Tensor

#: hipDNN's suffix of a port's JSON key (``x_tensor_uid``); ports are named without it.
UID_SUFFIX = "_tensor_uid"

#: Section marker of a port the loader derived from a uid list (``derived:input_tensor_uids[0]``):
#: messages name the list entry, and the writer leaves the port out (the list is written as read).
DERIVED = "derived:"

ShapeCheck = Callable[["Node", "Graph"], "list[tuple[str, str]]"]   # -> [(json path suffix, problem)]
FlopCount = Callable[["Node", "Graph"], float]
Notes = Callable[["Node", "Graph"], "list[str]"]                    # facts inspect shows a reader
#: an option value -> None when it is of the kind, else what was expected (``graph/option_types.py``)
OptionKind = Callable[[Any], "str | None"]


@dataclass(frozen=True)
class OpSpec:
    type: str
    inputs: tuple[str, ...]                 # required input ports
    outputs: tuple[str, ...]                # required output ports
    optional_inputs: tuple[str, ...] = ()
    optional_outputs: tuple[str, ...] = ()
    list_inputs: tuple[str, ...] = ()       # ports holding a list of uids (peer stats)
    options: Mapping[str, str] = field(default_factory=dict)   # option -> section it is written in
    option_kinds: Mapping[str, OptionKind] = field(default_factory=dict)  # option -> its JSON type, checked at load
    layout: str = "nested"                  # "nested": inputs/outputs dicts; "flat": keys on the node
    uid_named_options: tuple[str, ...] = () # keys ending in _tensor_uid that are not tensors
    uid_lists: Mapping[str, str] = field(default_factory=dict)  # list key -> port prefix (CustomOp)
    check: ShapeCheck | None = None
    flops: FlopCount | None = None
    notes: Notes | None = None              # defaults and counting rules worth saying in inspect
    flops_use_values: bool = False          # flops(node, graph, values) counts from bound inputs

    @property
    def all_inputs(self) -> tuple[str, ...]:
        return self.inputs + self.optional_inputs + self.list_inputs

    @property
    def all_outputs(self) -> tuple[str, ...]:
        return self.outputs + self.optional_outputs


def port_tensor(node: Node, graph: Graph, port: str) -> Tensor | None:
    """The tensor connected to ``port`` (input or output), or None when unconnected."""
    uid = node.inputs.get(port, node.outputs.get(port))
    if isinstance(uid, int):
        return graph.by_uid.get(uid)
    return None


def option_path(node: Node, key: str, default: str) -> str:
    """JSON path of an option inside its node (``attributes.causal_mask``, or the bare key)."""
    section = node.param_sections.get(key, default)
    if section.startswith(DERIVED):
        return section.removeprefix(DERIVED)
    return key if section == "node" else f"{section}.{key}"


def port_path(node: Node, port: str) -> str:
    """JSON path of a port's uid key inside its node."""
    section = "outputs" if port in node.outputs and port not in node.inputs else "inputs"
    return option_path(node, port + UID_SUFFIX, section)


def same_dims(ports: Sequence[str], like: str) -> ShapeCheck:
    """A shape rule: each of ``ports`` has ``like``'s dims."""
    def check(node: Node, graph: Graph) -> list[tuple[str, str]]:
        ref = port_tensor(node, graph, like)
        if ref is None:
            return []
        return [
            (port_path(node, p), f"dims {list(t.dims)} differ from {like}'s {list(ref.dims)}")
            for p in ports if (t := port_tensor(node, graph, p)) is not None and tuple(t.dims) != tuple(ref.dims)
        ]
    return check


def all_of(*checks: ShapeCheck) -> ShapeCheck:
    """A shape rule made of several, every problem of each reported."""
    def check(node: Node, graph: Graph) -> list[tuple[str, str]]:
        return [p for c in checks for p in c(node, graph)]
    return check


def elementwise_flops(per_element: float, port: str) -> FlopCount:
    """A FLOP count of ``per_element`` operations per element of ``port``'s tensor."""
    def flops(node: Node, graph: Graph) -> float:
        t = port_tensor(node, graph, port)
        return per_element * prod(t.dims) if t else 0.0
    return flops

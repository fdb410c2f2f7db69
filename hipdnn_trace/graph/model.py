"""The hipDNN graph as plain data.

A :class:`Graph` is what a hipDNN JSON file says, with nothing executed or
allocated: tensors (uid, dims, strides, type), nodes (op type, named input and
output ports pointing at tensor uids, options). Nodes keep where each option sat
in the file (``inputs``, ``parameters`` or ``attributes``) so writing back gives
the same layout hipDNN wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from math import prod
from typing import Any

from hipdnn_trace.graph.canonical import graph_id
from hipdnn_trace.graph.layout import layout_name, storage_elements
from hipdnn_trace.graph.opspec import UID_SUFFIX
from hipdnn_trace.graph.test_names import sanitize, suite_name

__all__ = ["RAGGED_SUFFIX", "UID_SUFFIX", "Graph", "Node", "Tensor", "source_stem"]

#: The pseudo-port a node reads a ragged offset tensor through: ``q`` + this (``q.ragged_offset``).
RAGGED_SUFFIX = ".ragged_offset"


def source_stem(source: str) -> str:
    """``dir/conv.json`` -> ``conv``; an archive member ``suite.tar.gz:dir/conv.json`` -> ``conv``.
    An integration-test bundle ``{tier}/.../{Name}/{Name}.json`` -> dnn-providers' test name,
    ``{tier}_..._{Name}.{Name}`` (graph/test_names.py; every bundle is ``Small.json``: the stem alone names
    none of them)."""
    parts = source.replace("\\", "/").rsplit(":", 1)[-1].split("/")
    last = parts[-1]
    stem = last[:-5] if last.lower().endswith(".json") else last
    folders = parts[:-1]
    suite = suite_name(folders) if stem and folders and folders[-1] == stem else None
    return f"{suite}.{sanitize(stem)}" if suite else stem or source


@dataclass(frozen=True)
class Tensor:
    """One tensor of a graph, as hipDNN describes it."""

    uid: int
    name: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    data_type: str
    virtual: bool = False
    value_type: str | None = None     # set for pass-by-value scalars (e.g. epsilon)
    value: float | int | bool | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)   # alignment, ragged offsets... kept as read

    @property
    def is_value(self) -> bool:
        """A scalar whose value lives in the graph, not in a buffer."""
        return self.value_type is not None

    @property
    def numel(self) -> int:
        return prod(self.dims)

    # The newest schema's tensor fields (tensor_attributes.fbs @ 33f48644) live in ``extra`` as read, so
    # they are written back unchanged; these read them with hipDNN's schema defaults.
    @property
    def ragged_offset_tensor_uid(self) -> int | None:
        """The uid of the per-batch offsets into this packed (ragged) tensor; None when dense."""
        return self.extra.get("ragged_offset_tensor_uid")

    @property
    def ragged_offset_multiplier(self) -> int:
        """Element offset = stored ragged offset x this (schema default 1: offsets in elements)."""
        return int(self.extra.get("ragged_offset_multiplier", 1))

    @property
    def alignment(self) -> int:
        """The buffer's promised byte alignment (schema default 16)."""
        return int(self.extra.get("alignment", 16))

    @property
    def is_runtime_pass_by_value(self) -> bool:
        """A scalar handed to the kernel at execute time rather than as a buffer (default false)."""
        return bool(self.extra.get("is_runtime_pass_by_value", False))

    @property
    def storage_elements(self) -> int:
        """Elements a buffer needs for these dims and strides (max offset + 1)."""
        return storage_elements(self.dims, self.strides)

    @property
    def layout(self) -> str:
        """A short name for the memory layout: NCHW-style, NHWC-style, or the stride order."""
        return layout_name(self.dims, self.strides)


@dataclass(frozen=True)
class Node:
    """One operation. Ports are named without hipDNN's ``_tensor_uid`` suffix."""

    name: str
    type: str                                   # e.g. "ConvolutionFwdAttributes"
    compute_data_type: str
    inputs: Mapping[str, int | None | tuple[int, ...]]   # port -> uid (None: not connected;
    outputs: Mapping[str, int | None]                    # a tuple for list ports like peer_stats)
    params: Mapping[str, Any] = field(default_factory=dict)
    # where each JSON key (option, or port + "_tensor_uid") sat in the file:
    # "inputs", "outputs", "parameters", "attributes" or "node" (on the node itself)
    param_sections: Mapping[str, str] = field(default_factory=dict)

    @property
    def op(self) -> str:
        """The op name without hipDNN's ``Attributes`` suffix (``ConvolutionFwd``)."""
        return self.type.removesuffix("Attributes")

    def input_uids(self) -> list[int]:
        uids: list[int] = []
        for u in self.inputs.values():
            if isinstance(u, tuple):
                uids.extend(u)
            elif u is not None:
                uids.append(u)
        return uids

    def output_uids(self) -> list[int]:
        return [u for u in self.outputs.values() if u is not None]


@dataclass(frozen=True)
class Graph:
    """A whole hipDNN graph. ``source`` names where it came from, for messages."""

    name: str
    compute_data_type: str
    io_data_type: str
    intermediate_data_type: str
    tensors: tuple[Tensor, ...]
    nodes: tuple[Node, ...]
    source: str = "<memory>"
    extra: Mapping[str, Any] = field(default_factory=dict)   # top-level keys we do not model
    legacy_keys: bool = False   # oldest hipDNN: compute_type/io_type/intermediate_type, no node types
    warnings: tuple[str, ...] = ()   # unknown fields read past with allow_unknown (JSON path: problem)

    @cached_property
    def by_uid(self) -> dict[int, Tensor]:
        return {t.uid: t for t in self.tensors}

    def tensor(self, uid: int) -> Tensor:
        return self.by_uid[uid]

    @cached_property
    def produced_uids(self) -> frozenset[int]:
        return frozenset(u for n in self.nodes for u in n.output_uids())

    def reads(self, node: Node) -> dict[str, int]:
        """Port -> uid of every tensor ``node`` reads: its connected single-tensor inputs, and the ragged
        offset tensor (hipDNN RFC 0014) each of its tensors names, as port ``<port>.ragged_offset``: not a
        port of the node in the file, but the node's executor reads it (docs/hipdnn-format.md 3.10)."""
        out = {p: u for p, u in node.inputs.items() if isinstance(u, int)}
        for port, uid in (*node.inputs.items(), *node.outputs.items()):
            t = self.by_uid.get(uid) if isinstance(uid, int) else None
            if t is not None and isinstance(t.ragged_offset_tensor_uid, int):
                out[port + RAGGED_SUFFIX] = t.ragged_offset_tensor_uid
        return out

    @cached_property
    def input_tensors(self) -> tuple[Tensor, ...]:
        """Tensors the caller must supply: read by a node (ragged offsets included), produced by none,
        not by value."""
        read = {u for n in self.nodes for u in (*n.input_uids(), *self.reads(n).values())}
        return tuple(
            t for t in self.tensors
            if t.uid in read and t.uid not in self.produced_uids and not t.is_value
        )

    @cached_property
    def value_tensors(self) -> tuple[Tensor, ...]:
        return tuple(t for t in self.tensors if t.is_value)

    @cached_property
    def output_tensors(self) -> tuple[Tensor, ...]:
        """Tensors the graph hands back: produced by a node and not virtual."""
        return tuple(t for t in self.tensors if t.uid in self.produced_uids and not t.virtual)

    @cached_property
    def graph_id(self) -> str:
        """16 hex digits of SHA-256 over the canonical JSON (``canonical.graph_id``)."""
        return graph_id(self)

    @property
    def label(self) -> str:
        """The name every output shows: the JSON's ``name``, or the file's stem when that is blank
        (upstream graphs often leave it empty, and a blank name leaves rows nobody can tell apart).
        ``name`` itself stays as the file says: the graph_id and the written-back JSON use it."""
        return self.name if self.name.strip() else source_stem(self.source)

    @property
    def ops(self) -> list[str]:
        return [n.op for n in self.nodes]

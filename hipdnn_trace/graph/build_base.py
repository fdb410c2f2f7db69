"""The core every GraphBuilder mixin builds on: tensors, uids, layouts, nodes, and the checked result.

Each op family's builder methods live in a mixin of their own (``graph/build_<family>.py``, named
by the family's entry in ``graph/families.py``); they subclass :class:`BuilderBase` for the
helpers below, and ``graph/build.py`` puts them together as ``GraphBuilder``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hipdnn_trace.graph import dtypes
from hipdnn_trace.graph.layout import channels_last_order, packed_strides, stride_order
from hipdnn_trace.graph.load import parse_graph
from hipdnn_trace.graph.model import Graph, Node, Tensor
from hipdnn_trace.graph.write import graph_to_json

#: Layout names -> (rank or None for any rank, channels last?)
_LAYOUTS: dict[str, tuple[int | None, bool]] = {
    "NCW": (3, False), "NWC": (3, True),
    "NCHW": (4, False), "NHWC": (4, True),
    "NCDHW": (5, False), "NDHWC": (5, True),
    "packed": (None, False), "row_major": (None, False), "channels_first": (None, False),
    "channels_last": (None, True),
}

#: hipDNN writes every tensor with this flag in the versions that require it
#: (docs/hipdnn-format.md 1.4); readers that do not know it ignore it.
_TENSOR_EXTRA = {"is_runtime_pass_by_value": False}

_VALUE_TYPE_OF = {dtype: value_type for value_type, dtype in dtypes.VALUE_TYPES.items()}


class BuilderBase:
    """Accumulates tensors and nodes; :meth:`build` checks and returns the Graph."""

    def __init__(self, name: str, *, io: str = "float", compute: str = "float",
                 intermediate: str = "float") -> None:
        for what, dt in (("io", io), ("compute", compute), ("intermediate", intermediate)):
            if dt not in dtypes.DTYPES:
                raise ValueError(f"{what} type {dt!r} is not a hipDNN data type")
        self.name = name
        self.io = io
        self.compute = compute
        self.intermediate = intermediate
        self._tensors: list[Tensor] = []
        self._nodes: list[Node] = []
        self._names: set[str] = set()
        self._next_uid = 1

    # ------------------------------------------------------------ tensors

    def _unique(self, name: str) -> str:
        if name not in self._names:
            self._names.add(name)
            return name
        k = 1
        while f"{name}_{k}" in self._names:
            k += 1
        self._names.add(f"{name}_{k}")
        return f"{name}_{k}"

    def _add(self, name: str, dims: Sequence[int], strides: Sequence[int], dtype: str,
             virtual: bool, value_type: str | None = None, value: Any = None) -> Tensor:
        if dtype not in dtypes.DTYPES:
            raise ValueError(f"tensor {name!r}: {dtype!r} is not a hipDNN data type")
        t = Tensor(self._next_uid, self._unique(name), tuple(int(d) for d in dims),
                   tuple(int(s) for s in strides), dtype, virtual, value_type, value,
                   dict(_TENSOR_EXTRA))
        self._next_uid += 1
        self._tensors.append(t)
        return t

    def _own(self, t: Tensor | None, what: str) -> None:
        if t is None:
            return
        if not isinstance(t, Tensor) or t.uid >= self._next_uid or self._tensors[t.uid - 1] is not t:
            raise ValueError(f"{what} is not a tensor of graph {self.name!r}")

    @staticmethod
    def _strides(dims: Sequence[int], layout: str | None, strides: Sequence[int] | None) -> tuple[int, ...]:
        if strides is not None:
            if layout is not None:
                raise ValueError("give layout or strides, not both")
            if len(strides) != len(dims):
                raise ValueError(f"strides {list(strides)} and dims {list(dims)} differ in rank")
            return tuple(strides)
        rank = len(dims)
        rank_needed, last = _LAYOUTS.get(layout or "packed", (-1, False))
        if rank_needed == -1:
            raise ValueError(f"unknown layout {layout!r} (choose from {', '.join(_LAYOUTS)})")
        if rank_needed is not None and rank_needed != rank:
            raise ValueError(f"layout {layout} is for rank {rank_needed}, dims {list(dims)} have rank {rank}")
        return packed_strides(dims, channels_last_order(rank) if last else None)

    def tensor(self, name: str, dims: Sequence[int], *, dtype: str | None = None,
               layout: str | None = None, strides: Sequence[int] | None = None,
               virtual: bool = False) -> Tensor:
        """A graph input (or any tensor you wire yourself). dtype defaults to the io type;
        layout is NCHW-style packed unless ``layout`` ("NHWC", "channels_last", ...) or
        explicit ``strides`` (padded, transposed) say otherwise."""
        return self._add(name, dims, self._strides(dims, layout, strides), dtype or self.io, virtual)

    def scalar(self, name: str, value: float | int | bool, dtype: str = "float") -> Tensor:
        """A pass-by-value scalar (epsilon, momentum...): dims [1], value in the graph."""
        if dtype not in _VALUE_TYPE_OF:
            raise ValueError(f"no hipDNN value type holds a {dtype!r} scalar")
        return self._add(name, [1], [1], dtype, False, _VALUE_TYPE_OF[dtype], value)

    def _output(self, name: str, dims: Sequence[int], like: Tensor | None, *, dtype: str | None,
                virtual: bool, layout: str | None) -> Tensor:
        """An op's output: dtype defaults to intermediate (virtual) or io; layout follows ``like``."""
        dtype = dtype or (self.intermediate if virtual else self.io)
        if layout is not None or like is None or len(like.dims) != len(dims):
            strides = self._strides(dims, layout, None)
        else:
            strides = packed_strides(dims, stride_order(like.strides))
        return self._add(name, dims, strides, dtype, virtual)

    # -------------------------------------------------------------- nodes

    def _node(self, node_type: str, node_name: str, inputs: dict[str, Any], outputs: dict[str, Any],
              params: dict[str, Any], compute: str | None) -> None:
        for port, t in inputs.items():
            if isinstance(t, Tensor):
                self._own(t, f"{node_name} input {port}")
        ins = {p: (t.uid if isinstance(t, Tensor) else t) for p, t in inputs.items()}
        outs = {p: (t.uid if isinstance(t, Tensor) else t) for p, t in outputs.items()}
        self._nodes.append(Node(node_name, node_type, compute or self.compute, ins, outs, params))

    def _name(self, kind: str, name: str | None) -> str:
        """The node's name: given, or ``<kind>_<index>``."""
        return name or f"{kind}_{len(self._nodes)}"

    # -------------------------------------------------------------- output

    def to_json(self) -> dict[str, Any]:
        """The hipDNN JSON value of the graph so far (unchecked)."""
        draft = Graph(self.name, self.compute, self.io, self.intermediate,
                      tuple(self._tensors), tuple(self._nodes), source=self.name)
        return graph_to_json(draft)

    def build(self) -> Graph:
        """The checked Graph, exactly as loading its JSON file would give it."""
        return parse_graph(self.to_json(), source=self.name)

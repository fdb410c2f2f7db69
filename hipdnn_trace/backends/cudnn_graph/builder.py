"""The translation state: which cuDNN tensor holds which hipDNN tensor, and the calls so far."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from hipdnn_trace.backends.cudnn_graph.geometry import (
    ELEMENTWISE_TYPES,
    channels_last_permutation,
    coalesce,
    collapse_batch,
    lift,
    target_rank,
    unit_strides_packed,
)
from hipdnn_trace.backends.cudnn_graph.plan_types import (
    DTYPES,
    OpCall,
    OutputDecl,
    Plan,
    TensorDecl,
    _dtype,
    _graph_dtype,
)
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.model import Graph, Node, Tensor
from hipdnn_trace.graph.pointwise import pointwise_mode


class _Builder:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.plan = Plan(io=_graph_dtype(graph.io_data_type), intermediate=_graph_dtype(graph.intermediate_data_type),
                         compute=_graph_dtype(graph.compute_data_type))
        self.rank = target_rank(graph)
        self.geometry: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self._next_uid = 1
        self._keys: dict[int, str] = {}          # hipDNN uid -> key of what holds it
        self._synthetic = 0
        self.perm: tuple[int, ...] | None = None
        self.merged: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self.ragged: dict[int, str] = {}         # hipDNN uid -> key of its ragged offset tensor
        self._collapse_single_matmul()
        self._coalesce_elementwise()
        self._permute_elementwise()

    def _collapse_single_matmul(self) -> None:
        g = self.graph
        if len(g.nodes) != 1 or g.nodes[0].type != "MatmulAttributes":
            return
        tensors = [g.by_uid[u] for u in g.nodes[0].input_uids() + g.nodes[0].output_uids()]
        if max(len(t.dims) for t in tensors) <= 3:
            return
        collapsed = {t.uid: collapse_batch(t.dims, t.strides) for t in tensors}
        batches = {t.uid: tuple(d for d in t.dims[:-2]) for t in tensors}
        shapes = {b for b in batches.values()}
        ones = tuple(1 for _ in next(iter(shapes)))
        full = [b for b in shapes if b != ones]
        if all(c is not None for c in collapsed.values()) and len(set(full)) <= 1:
            self.geometry.update({u: c for u, c in collapsed.items() if c is not None})
            self.rank = 3
            self.plan.notes.append("matmul batch dims collapsed into one (contiguous in every operand)")

    def _elementwise(self) -> bool:
        g = self.graph
        return bool(g.nodes) and all(n.type in ELEMENTWISE_TYPES or self._composed_bn(n) for n in g.nodes)

    def _coalesce_elementwise(self) -> None:
        """Merge axes that are contiguous in every tensor (and broadcast or reduced alike).

        Done for graphs with a reduction: cuDNN's reduction engines take row or column
        reductions only (seen on an H200, cuDNN 9.19); an NCHW tensor
        reduced over H and W becomes a [N*C, H*W] row reduction this way. Memory and
        meaning are unchanged: merged axes address memory exactly like one axis.
        """
        g = self.graph
        if not self._elementwise() or not any(n.type == "ReductionAttributes" for n in g.nodes) or any(
                pointwise_mode(n) == "gen_index" for n in g.nodes if n.type == "PointwiseAttributes"):
            return
        real = [t for t in g.tensors if not t.is_value]
        rank = max(len(t.dims) for t in real)
        shapes = {t.uid: lift(t.dims, t.strides, rank) for t in real}
        merged = coalesce(shapes)
        if merged is None:
            return
        new_rank = len(next(iter(merged.values()))[0])
        if new_rank < rank:
            self.merged = merged
            self.rank = max(4, new_rank)
            self.plan.notes.append(f"elementwise graph: {rank} axes coalesced into {new_rank} (contiguous in "
                                   "every tensor)")

    def _permute_elementwise(self) -> None:
        g = self.graph
        if not self._elementwise():
            return
        anchor = max((t for t in g.tensors if not t.is_value), key=lambda t: (t.numel, -t.uid))
        dims, strides = self.merged.get(anchor.uid, (anchor.dims, anchor.strides))
        dims, strides = lift(dims, strides, self.rank)
        perm = channels_last_permutation(dims, strides)
        self.perm = perm
        if perm != tuple(range(self.rank)):
            self.plan.notes.append(f"elementwise graph shown to cuDNN with axes permuted {list(perm)} "
                                   "(its innermost axis in the channel slot); memory unchanged")

    def _composed_bn(self, node: Node) -> bool:
        """Batchnorm inference on a layout cuDNN's batchnorm engine rejects: lowered to pointwise."""
        if node.type != "BatchnormInferenceAttributes":
            return False
        x = self.graph.by_uid[node.inputs["x"]]
        from hipdnn_trace.graph.layout import channels_last_order, packed_strides

        return tuple(x.strides) != packed_strides(x.dims, channels_last_order(len(x.dims)))

    def axis(self, logical: int) -> int:
        """Where logical axis ``logical`` (after lifting) sits in cuDNN's view."""
        return self.perm.index(logical) if self.perm is not None else logical

    def uid(self) -> int:
        u = self._next_uid
        self._next_uid += 1
        return u

    def geom(self, t: Tensor) -> tuple[tuple[int, ...], tuple[int, ...]]:
        if t.uid in self.geometry:
            return self.geometry[t.uid]
        if t.is_value:
            return (1,) * self.rank, (1,) * self.rank
        dims, strides = lift(*self.merged.get(t.uid, (t.dims, t.strides)), self.rank)
        if self.perm is not None:
            dims, strides = tuple(dims[a] for a in self.perm), tuple(strides[a] for a in self.perm)
            strides = unit_strides_packed(dims, strides)
        return dims, strides

    def tensor(self, uid: int | None, what: str) -> str | None:
        """Key of the cuDNN tensor holding hipDNN tensor ``uid`` (declared on first use)."""
        if uid is None:
            return None
        if uid in self._keys:
            return self._keys[uid]
        t = self.graph.by_uid[uid]
        dims, strides = self.geom(t)
        key = f"t{uid}"
        if t.is_value:
            decl = TensorDecl(key, self.uid(), t.name, dims, strides, _scalar_dtype(t),
                              hipdnn_uid=uid, by_value=t.value)
        else:
            decl = TensorDecl(key, self.uid(), t.name, dims, strides, _dtype(t.data_type, f"tensor {t.name!r}"),
                              hipdnn_uid=uid, ragged_offset=self.ragged.get(uid))
        self.plan.inputs.append(decl)
        self._keys[uid] = key
        return key

    def scalar(self, uid: int | None, default: float | None, what: str) -> str | None:
        """A pass-by-value scalar from a value tensor, a one-element input, or a default."""
        if uid is None:
            if default is None:
                return None
            return self.constant_scalar(default, what)
        if uid in self._keys:
            return self._keys[uid]
        t = self.graph.by_uid[uid]
        if t.is_value:
            return self.tensor(uid, what)
        if t.numel != 1:
            raise UnsupportedError(f"{what} {t.name!r} must hold one value, has {t.numel}")
        key = f"t{uid}"
        decl = TensorDecl(key, self.uid(), t.name, (1,) * self.rank, (1,) * self.rank, "FLOAT",
                          hipdnn_uid=uid, by_value_from_input=True)
        self.plan.inputs.append(decl)
        self._keys[uid] = key
        return key

    def constant_scalar(self, value: float, what: str) -> str:
        self._synthetic += 1
        key = f"c{self._synthetic}"
        self.plan.inputs.append(TensorDecl(key, self.uid(), f"{what}_default", (1,) * self.rank, (1,) * self.rank,
                                           "FLOAT", by_value=float(value)))
        return key

    def constant_like(self, like: str, value: float, name: str) -> str:
        """A device tensor filled with ``value``, shaped like input ``like`` (zero bias)."""
        ref = next(t for t in self.plan.inputs if t.key == like)
        self._synthetic += 1
        key = f"c{self._synthetic}"
        self.plan.inputs.append(TensorDecl(key, self.uid(), name, ref.dims, ref.strides, ref.dtype, fill=value))
        return key

    def output(self, uid: int | None, like: str | None = None, *, name: str = "", dtype: str | None = None) -> str:
        """Key for an op output: hipDNN tensor ``uid``, or a scratch output shaped like ``like``."""
        if uid is not None:
            t = self.graph.by_uid[uid]
            dims, strides = self.geom(t)
            decl = OutputDecl(f"t{uid}", self.uid(), t.name, dims, strides,
                              _dtype(t.data_type, f"tensor {t.name!r}"), virtual=t.virtual, hipdnn_uid=uid,
                              ragged_offset=self.ragged.get(uid))
            self._keys[uid] = decl.key
        else:
            src = next(x for x in (*self.plan.inputs, *self.plan.outputs) if x.key == like)
            self._synthetic += 1
            decl = OutputDecl(f"s{self._synthetic}", self.uid(), name or f"scratch{self._synthetic}",
                              src.dims, src.strides, dtype or "FLOAT", virtual=False)
        self.plan.outputs.append(decl)
        return decl.key

    def virtual(self, like_uid: int, name: str) -> str:
        """A fused intermediate with the geometry of hipDNN tensor ``like_uid``, float."""
        t = self.graph.by_uid[like_uid]
        dims, strides = self.geom(t)
        self._synthetic += 1
        decl = OutputDecl(f"v{self._synthetic}", self.uid(), name, dims, strides, "FLOAT", virtual=True)
        self.plan.outputs.append(decl)
        return decl.key

    def call(self, node: Node, method: str, tensors: Mapping[str, str | None], outputs: Sequence[str | None],
             attrs: Mapping[str, Any] | None = None, suffix: str = "",
             output_kwargs: Mapping[str, str] | None = None) -> None:
        compute = node.compute_data_type
        self.plan.ops.append(OpCall(
            method=method, name=f"{node.name}{suffix}", tensors=dict(tensors), attrs=dict(attrs or {}),
            outputs=tuple(outputs), compute=None if compute in ("unset", "", None) else _dtype(compute, node.name),
            node=node.name, output_kwargs=dict(output_kwargs or {}),
        ))

    def reshaped(self, uid: int, dims: Sequence[int], what: str, *, output: bool = False,
                 cast: str | None = None) -> str:
        """Key of hipDNN tensor ``uid`` declared with other dims of the same packed memory
        (a [B] length vector as cuDNN's [B, 1, 1, 1]); UnsupportedError when the memory differs.
        ``cast`` (an input's hipDNN type, e.g. "float"): cuDNN takes the tensor in that type, so the
        buffer holds the graph's values converted to it (exactly, for a wider type)."""
        from hipdnn_trace.graph.layout import packed_strides

        t = self.graph.by_uid[uid]
        live = [(d, s) for d, s in zip(t.dims, t.strides) if d > 1]
        packed = [(d, s) for d, s in zip(t.dims, packed_strides(t.dims)) if d > 1]
        if live != packed or t.numel != int(np.prod(dims)):
            raise UnsupportedError(f"{what} {t.name!r}: dims {list(t.dims)} / strides {list(t.strides)} are not "
                                   f"a packed {list(dims)} tensor as cuDNN takes it")
        strides = packed_strides(dims)
        key = f"t{uid}"
        if output:
            decl = OutputDecl(key, self.uid(), t.name, tuple(dims), tuple(strides),
                              _dtype(t.data_type, f"tensor {t.name!r}"), virtual=t.virtual, hipdnn_uid=uid)
            self.plan.outputs.append(decl)
        else:
            kind = cast if cast is not None and cast != t.data_type else None
            self.plan.inputs.append(TensorDecl(key, self.uid(), t.name, tuple(dims), tuple(strides),
                                               _dtype(kind or t.data_type, f"tensor {t.name!r}"), hipdnn_uid=uid,
                                               cast=kind))
        self._keys[uid] = key
        return key


def _scalar_dtype(t: Tensor) -> str:
    if t.data_type in ("int32", "int64", "boolean"):
        return DTYPES[t.data_type]
    return "FLOAT"   # cuDNN's norm/batchnorm scalars are float whatever precision the graph stored


# --------------------------------------------------------------------------- ops


#: one family's translation of a node: adds its tensors and calls to the builder's plan, or raises
#: UnsupportedError with the reason (each ``cudnn_graph`` family module's ``OPS`` maps node types to one)
PlanFn = Callable[[_Builder, Node], None]

"""hipDNN graph -> a plan of cuDNN frontend calls, as plain data.

The plan names every tensor, every ``cudnn.pygraph`` method call with its keyword
arguments, and every output's dims/strides/type, without importing cuDNN: whether
a graph is expressible is decided here (and tested on any machine), and
``backends.cudnn`` only replays the plan against the real library.

Translation rules (docs/nvidia.md has the table):

* Tensors keep hipDNN's dims, strides and types. cuDNN wants equal ranks across a
  graph (and rank >= 3 for matmul, >= 4 for norms and pointwise), so lower-rank
  tensors get leading size-1 dims; that changes no broadcasting and no matmul batch.
  A single 4-d+ matmul whose batch dims are contiguous in every operand is
  collapsed to one batch dim instead.
* Scalars (epsilon, momentum) become pass-by-value host tensors.
* Op outputs take the dims/strides/type of their hipDNN tensor; non-virtual ones
  are graph outputs, virtual ones stay fused. Outputs cuDNN always produces but the
  graph does not ask for (batchnorm's saved stats) get scratch buffers.
* Pointwise ``*_bwd`` modes take (in_0, in_1) = (dy, x), the order hipDNN's float64
  reference uses; ``loss`` = dy, ``input`` = x for cuDNN.
* fp32 convolutions and matmuls must not use TF32 (it fails hipDNN's fp32
  tolerances): the plan says so (``fp32_math``) and the session deselects engines
  carrying the tensor-core / down-convert numerical notes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.load import execution_order
from hipdnn_trace.graph.model import Graph, Node, Tensor
from hipdnn_trace.graph.ops import norm_forward_phase, pointwise_mode

#: hipDNN data type -> cudnn.data_type member.
DTYPES: dict[str, str] = {
    "float": "FLOAT", "half": "HALF", "bfloat16": "BFLOAT16", "double": "DOUBLE",
    "int8": "INT8", "int32": "INT32", "int64": "INT64", "uint8": "UINT8", "boolean": "BOOLEAN",
    "fp8_e4m3": "FP8_E4M3", "fp8_e5m2": "FP8_E5M2",
}

CONV_TYPES = ("ConvolutionFwdAttributes", "ConvolutionBwdAttributes", "ConvolutionWrwAttributes")


@dataclass(frozen=True)
class EnumValue:
    """A cuDNN python enum member named by family and member (``reduction_mode.ADD``)."""

    family: str
    member: str


@dataclass(frozen=True)
class TensorDecl:
    """A tensor the caller provides: a device buffer, a by-value scalar, or a constant."""

    key: str
    uid: int                         # cuDNN uid (1, 2, ...): hipDNN uids may be 0 or negative
    name: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str                       # cudnn.data_type member
    hipdnn_uid: int | None = None    # bound from this hipDNN tensor
    by_value: float | int | None = None   # pass-by-value host scalar (graph constant)
    by_value_from_input: bool = False     # pass-by-value scalar read from the bound input
    fill: float | None = None        # a device constant the plan synthesizes (zero bias)

    @property
    def is_scalar(self) -> bool:
        return self.by_value is not None or self.by_value_from_input


@dataclass(frozen=True)
class OutputDecl:
    """One op output: its cuDNN uid, geometry, and whether a buffer backs it."""

    key: str
    uid: int
    name: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str
    virtual: bool
    hipdnn_uid: int | None = None    # None: scratch output nobody fetches


@dataclass(frozen=True)
class OpCall:
    """``getattr(pygraph, method)(**tensors, **attrs, name=..., compute_data_type=...)``."""

    method: str
    name: str
    tensors: Mapping[str, str | None]     # kwarg -> tensor key (None: not passed)
    attrs: Mapping[str, Any]
    outputs: tuple[str | None, ...]       # output keys in the method's return order
    compute: str | None = None
    node: str = ""


@dataclass
class Plan:
    io: str | None
    intermediate: str | None
    compute: str | None
    inputs: list[TensorDecl] = field(default_factory=list)
    ops: list[OpCall] = field(default_factory=list)
    outputs: list[OutputDecl] = field(default_factory=list)
    fp32_math: bool = False
    notes: list[str] = field(default_factory=list)

    def output(self, key: str) -> OutputDecl:
        return next(o for o in self.outputs if o.key == key)

    @property
    def buffers(self) -> list[TensorDecl | OutputDecl]:
        """Everything that needs a device buffer."""
        return [t for t in self.inputs if not t.is_scalar] + [o for o in self.outputs if not o.virtual]


def _dtype(name: str, what: str) -> str:
    if name not in DTYPES:
        raise UnsupportedError(f"{what}: data type {name} has no cuDNN equivalent")
    return DTYPES[name]


def _graph_dtype(name: str) -> str | None:
    return None if name in ("unset", "", None) else _dtype(name, "graph")


# --------------------------------------------------------------------------- geometry

def _extent(dims: Sequence[int], strides: Sequence[int]) -> int:
    return max([d * s for d, s in zip(dims, strides)] + [1])


def lift(dims: Sequence[int], strides: Sequence[int], rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Prepend size-1 dims up to ``rank`` (their strides span the whole tensor)."""
    extra = rank - len(dims)
    if extra <= 0:
        return tuple(dims), tuple(strides)
    step = _extent(dims, strides)
    return (1,) * extra + tuple(dims), (step,) * extra + tuple(strides)


def collapse_batch(dims: Sequence[int], strides: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """[..batch.., M, N] -> [B, M, N] when the batch dims address memory as one dim."""
    batch_d, batch_s = list(dims[:-2]), list(strides[:-2])
    total = 1
    for d in batch_d:
        total *= d
    live = [(d, s) for d, s in zip(batch_d, batch_s) if d > 1]
    for (_, s_out), (d_in, s_in) in zip(live, live[1:]):
        if s_out != s_in * d_in:
            return None
    stride = live[-1][1] if live else _extent(dims[-2:], strides[-2:])
    return (total, *dims[-2:]), (stride, *strides[-2:])


#: Node types whose semantics do not depend on which logical axis is which, as long as every
#: tensor is permuted the same way (batchnorm inference is lowered to pointwise ops here).
ELEMENTWISE_TYPES = {"PointwiseAttributes", "ReductionAttributes", "BatchnormInferenceAttributesVarianceExt"}


def channels_last_permutation(dims: Sequence[int], strides: Sequence[int]) -> tuple[int, ...]:
    """Axis order that makes a tensor look N-spatial-C packed to cuDNN (innermost axis as dim 1).

    cuDNN's pointwise and reduction engines accept "NHWC"-ordered tensors with C = dim 1 > 1;
    an elementwise graph means the same under any axis permutation applied to all its
    tensors, so a row-major [.., H, W] or NCHW graph is shown to cuDNN with its innermost
    axis in the channel slot. Memory and results are unchanged.
    """
    order = sorted(range(len(dims)), key=lambda a: (-strides[a] if dims[a] > 1 else 1, a))
    live = [a for a in order if dims[a] > 1]
    inner = live[-1] if live else order[-1]
    rest = [a for a in order if a != inner]
    return (rest[0], inner, *rest[1:]) if rest else (inner,)


def coalesce(shapes: Mapping[int, tuple[Sequence[int], Sequence[int]]]
             ) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]] | None:
    """Merge axes (equal-rank tensors keyed by uid) that every tensor addresses as one.

    Axes are walked in the memory order of the largest tensor; the next axis joins the
    current group when, in every tensor, both are size 1, or both are full-size and
    the group's innermost stride equals the axis's stride times its size. Axes of
    size 1 everywhere are dropped. None when the tensors do not share one axis order.
    """
    items = list(shapes.items())
    rank = len(items[0][1][0])
    full = [max(d[a] for _, (d, _) in items) for a in range(rank)]
    anchor = max(items, key=lambda kv: np.prod(kv[1][0]))[1]
    order = [a for a in sorted(range(rank), key=lambda a: (-anchor[1][a], a)) if full[a] > 1]
    if not order:
        return None
    groups: list[list[int]] = [[order[0]]]
    for b in order[1:]:
        a = groups[-1][-1]
        ok = True
        for _, (dims, strides) in items:
            both_one = all(dims[x] == 1 for x in groups[-1]) and dims[b] == 1
            both_full = all(dims[x] == full[x] for x in groups[-1]) and dims[b] == full[b] \
                and strides[a] == strides[b] * dims[b]
            if not (both_one or both_full):
                ok = False
                break
        if ok:
            groups[-1].append(b)
        else:
            groups.append([b])
    out = {}
    for uid, (dims, strides) in items:
        nd, ns = [], []
        for grp in groups:
            inner = grp[-1]
            if all(dims[x] == 1 for x in grp):
                nd.append(1)
                ns.append(1)
            elif all(dims[x] == full[x] for x in grp):
                nd.append(int(np.prod([full[x] for x in grp])))
                ns.append(int(strides[inner]))
            else:
                return None
        out[uid] = (tuple(nd), tuple(ns))
    return out


def unit_strides_packed(dims: Sequence[int], strides: Sequence[int]) -> tuple[int, ...]:
    """Strides of size-1 axes rewritten as a packed N-spatial-C tensor would have them.

    A size-1 axis addresses nothing, so its stride is free; cuDNN's layout checks still
    compare it ("fully packed"), so give it the value packing implies in the storage
    order N, spatial..., C (C = dim 1 innermost).
    """
    rank = len(dims)
    storage = [0, *range(2, rank), 1] if rank >= 3 else list(range(rank))
    out = list(strides)
    span = 1
    for axis in reversed(storage):
        if dims[axis] == 1:
            out[axis] = span
        else:
            span = out[axis] * dims[axis]
    return tuple(out)


def _target_rank(graph: Graph) -> int:
    types = {n.type for n in graph.nodes}
    top = max((len(t.dims) for t in graph.tensors if not t.is_value), default=1)
    if types & set(CONV_TYPES):
        return top
    if "MatmulAttributes" in types:
        return max(3, top)
    return max(4, top)


# --------------------------------------------------------------------------- builder

class _Builder:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.plan = Plan(io=_graph_dtype(graph.io_data_type), intermediate=_graph_dtype(graph.intermediate_data_type),
                         compute=_graph_dtype(graph.compute_data_type))
        self.rank = _target_rank(graph)
        self.geometry: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self._next_uid = 1
        self._keys: dict[int, str] = {}          # hipDNN uid -> key of what holds it
        self._synthetic = 0
        self.perm: tuple[int, ...] | None = None
        self.merged: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
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
                              hipdnn_uid=uid)
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
                              _dtype(t.data_type, f"tensor {t.name!r}"), virtual=t.virtual, hipdnn_uid=uid)
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
             attrs: Mapping[str, Any] | None = None, suffix: str = "") -> None:
        compute = node.compute_data_type
        self.plan.ops.append(OpCall(
            method=method, name=f"{node.name}{suffix}", tensors=dict(tensors), attrs=dict(attrs or {}),
            outputs=tuple(outputs), compute=None if compute in ("unset", "", None) else _dtype(compute, node.name),
            node=node.name,
        ))


def _scalar_dtype(t: Tensor) -> str:
    if t.data_type in ("int32", "int64", "boolean"):
        return DTYPES[t.data_type]
    return "FLOAT"   # cuDNN's norm/batchnorm scalars are float whatever precision the graph stored


# --------------------------------------------------------------------------- ops

def _conv(b: _Builder, node: Node) -> None:
    p = node.params
    rank = len(b.graph.by_uid[node.input_uids()[0]].dims)
    if rank < 4:
        raise UnsupportedError(f"{node.op} {node.name!r}: cuDNN convolutions need rank 4 or 5 tensors, got {rank}")
    mode = str(p.get("conv_mode", "CROSS_CORRELATION")).upper()
    attrs: dict[str, Any] = {"pre_padding": list(p["pre_padding"]), "post_padding": list(p["post_padding"]),
                             "stride": list(p["stride"]), "dilation": list(p["dilation"])}
    if mode == "CONVOLUTION":
        attrs["convolution_mode"] = EnumValue("convolution_mode", "CONVOLUTION")
    elif mode not in ("CROSS_CORRELATION", "UNSET"):
        raise UnsupportedError(f"{node.op} {node.name!r}: conv_mode {mode} unknown to cuDNN")
    if node.type == "ConvolutionFwdAttributes":
        ins = {"image": b.tensor(node.inputs["x"], "x"), "weight": b.tensor(node.inputs["w"], "w")}
        method, out = "conv_fprop", node.outputs["y"]
        operands = (node.inputs["x"], node.inputs["w"])
    elif node.type == "ConvolutionBwdAttributes":
        ins = {"loss": b.tensor(node.inputs["dy"], "dy"), "filter": b.tensor(node.inputs["w"], "w")}
        method, out = "conv_dgrad", node.outputs["dx"]
        operands = (node.inputs["dy"], node.inputs["w"])
    else:
        ins = {"image": b.tensor(node.inputs["x"], "x"), "loss": b.tensor(node.inputs["dy"], "dy")}
        method, out = "conv_wgrad", node.outputs["dw"]
        operands = (node.inputs["x"], node.inputs["dy"])
    _note_fp32(b, operands)
    b.call(node, method, ins, [b.output(out)], attrs)


def _note_fp32(b: _Builder, operands: Sequence[int]) -> None:
    if any(b.graph.by_uid[u].data_type == "float" for u in operands):
        b.plan.fp32_math = True


def _matmul(b: _Builder, node: Node) -> None:
    a, bb = node.inputs["a"], node.inputs["b"]
    ta, tb = b.graph.by_uid[a], b.graph.by_uid[bb]
    for i, (x, y) in enumerate(zip(ta.dims[:-2], tb.dims[:-2])):
        if x != y and 1 not in (x, y):
            raise UnsupportedError(f"matmul {node.name!r}: batch dim {i} is {x} vs {y}; cuDNN broadcasts only "
                                   "size-1 batch dims, not hipDNN's grouped batches")
    _note_fp32(b, (a, bb))
    _broadcast_batch(b, (a, bb), node.outputs["c"])
    b.call(node, "matmul", {"A": b.tensor(a, "a"), "B": b.tensor(bb, "b")}, [b.output(node.outputs["c"])])


def _broadcast_batch(b: _Builder, operands: Sequence[int], out_uid: int) -> None:
    """A size-1 batch dim of an operand becomes the output's size with stride 0.

    cuDNN's matmul engines refuse implicit batch broadcasting ("batch dimensions of A,
    B and D need to be the same"); a stride-0 batch says the same thing explicitly and
    reads the same memory.
    """
    out_dims, _ = b.geom(b.graph.by_uid[out_uid])
    for uid in operands:
        dims, strides = b.geom(b.graph.by_uid[uid])
        batch = len(dims) - 2
        if any(dims[i] == 1 and out_dims[i] > 1 for i in range(batch)):
            new_d = tuple(out_dims[i] if dims[i] == 1 and out_dims[i] > 1 else dims[i] for i in range(batch))
            new_s = tuple(0 if dims[i] == 1 and out_dims[i] > 1 else strides[i] for i in range(batch))
            b.geometry[uid] = (new_d + tuple(dims[batch:]), new_s + tuple(strides[batch:]))


# hipDNN mode -> (pygraph method, cuDNN tensor kwargs in in_0, in_1, in_2 order)
_POINTWISE: dict[str, tuple[str, tuple[str, ...]]] = {
    **{m: (m, ("input",)) for m in ("abs", "ceil", "erf", "exp", "floor", "identity", "log", "logical_not", "neg",
                                    "reciprocal", "rsqrt", "sin", "sqrt", "tan")},
    "gelu_fwd": ("gelu", ("input",)),
    "gelu_approx_tanh_fwd": ("gelu_approx_tanh", ("input",)),
    "sigmoid_fwd": ("sigmoid", ("input",)),
    "tanh_fwd": ("tanh", ("input",)),
    "elu_fwd": ("elu", ("input",)),
    "softplus_fwd": ("softplus", ("input",)),
    "relu_fwd": ("relu", ("input",)),
    "swish_fwd": ("swish", ("input",)),
    "gen_index": ("gen_index", ("input",)),
    **{m: (m, ("a", "b")) for m in ("add", "add_square", "div", "logical_and", "logical_or", "mul", "sub")},
    "max_op": ("max", ("input0", "input1")),
    "min_op": ("min", ("input0", "input1")),
    **{m: (m, ("input", "comparison")) for m in ("cmp_eq", "cmp_ge", "cmp_gt", "cmp_le", "cmp_lt", "cmp_neq")},
    # backward activations: hipDNN's reference reads (in_0, in_1) = (dy, x)
    "relu_bwd": ("relu_backward", ("loss", "input")),
    "sigmoid_bwd": ("sigmoid_backward", ("loss", "input")),
    "tanh_bwd": ("tanh_backward", ("loss", "input")),
    "gelu_bwd": ("gelu_backward", ("loss", "input")),
    "gelu_approx_tanh_bwd": ("gelu_approx_tanh_backward", ("loss", "input")),
    "elu_bwd": ("elu_backward", ("loss", "input")),
    "softplus_bwd": ("softplus_backward", ("loss", "input")),
    "swish_bwd": ("swish_backward", ("loss", "input")),
    "binary_select": ("binary_select", ("input0", "input1", "mask")),
}
def _pointwise(b: _Builder, node: Node) -> None:
    mode = pointwise_mode(node)
    if mode not in _POINTWISE:
        raise UnsupportedError(f"pointwise {node.name!r}: mode {mode or '?'} has no cuDNN equivalent")
    method, names = _POINTWISE[mode]
    p = node.params
    ports = [node.inputs.get(f"in_{i}") for i in range(len(names))]
    if any(u is None for u in ports):
        raise UnsupportedError(f"pointwise {node.name!r}: {mode} needs {len(names)} inputs")
    attrs: dict[str, Any] = {}
    if mode in ("relu_fwd", "relu_bwd"):
        for key, arg in (("relu_lower_clip", "lower_clip"), ("relu_upper_clip", "upper_clip"),
                         ("relu_lower_clip_slope", "negative_slope")):
            if p.get(key) is not None:
                attrs[arg] = float(p[key])
    elif mode in ("swish_fwd", "swish_bwd"):
        if p.get("swish_beta") is not None:
            attrs["swish_beta"] = float(p["swish_beta"])
    elif mode in ("elu_fwd", "elu_bwd") and p.get("elu_alpha") not in (None, 1.0):
        raise UnsupportedError(f"pointwise {node.name!r}: cuDNN's python elu has no alpha (got {p['elu_alpha']})")
    elif mode in ("softplus_fwd", "softplus_bwd") and p.get("softplus_beta") not in (None, 1.0):
        raise UnsupportedError(f"pointwise {node.name!r}: cuDNN's python softplus has no beta "
                               f"(got {p['softplus_beta']})")
    elif mode == "gen_index":
        axis = p.get("axis_tensor_uid")
        if axis is None:
            raise UnsupportedError(f"pointwise {node.name!r}: gen_index needs an axis")
        attrs["axis"] = b.axis(int(axis) + (b.rank - len(b.graph.by_uid[node.outputs["out_0"]].dims)))
    tensors = {name: b.tensor(uid, name) for name, uid in zip(names, ports)}
    b.call(node, method, tensors, [b.output(node.outputs["out_0"])], attrs)


def _single(b: _Builder, node: Node, what: str) -> None:
    if node.inputs.get("peer_stats"):
        raise UnsupportedError(f"{node.op} {node.name!r}: peer stats (multi-GPU batchnorm) are not supported")


def _batchnorm(b: _Builder, node: Node) -> None:
    _single(b, node, "batchnorm")
    i, o = node.inputs, node.outputs
    x = b.tensor(i["x"], "x")
    running = i.get("prev_running_mean") is not None and i.get("prev_running_variance") is not None
    tensors = {"input": x, "scale": b.tensor(i["scale"], "scale"), "bias": b.tensor(i["bias"], "bias"),
               "epsilon": b.scalar(i["epsilon"], None, "epsilon")}
    if running:
        tensors["in_running_mean"] = b.tensor(i["prev_running_mean"], "prev_running_mean")
        tensors["in_running_var"] = b.tensor(i["prev_running_variance"], "prev_running_variance")
        tensors["momentum"] = b.scalar(i.get("momentum"), 0.1, "momentum")
    elif o.get("next_running_mean") is not None or o.get("next_running_variance") is not None:
        raise UnsupportedError(f"batchnorm {node.name!r}: next running stats need prev running stats")
    y = b.output(o["y"])
    mean = b.output(o.get("mean"), tensors["scale"], name=f"{node.name}_saved_mean")
    inv = b.output(o.get("inv_variance"), tensors["scale"], name=f"{node.name}_saved_inv_variance")
    outs: list[str | None] = [y, mean, inv]
    if running:
        outs += [b.output(o.get("next_running_mean"), tensors["scale"], name=f"{node.name}_next_running_mean"),
                 b.output(o.get("next_running_variance"), tensors["scale"], name=f"{node.name}_next_running_var")]
    b.call(node, "batchnorm", tensors, outs)


def _batchnorm_inference(b: _Builder, node: Node) -> None:
    i = node.inputs
    if b._composed_bn(node):
        _bn_pointwise(b, node, inv_std=b.tensor(i["inv_variance"], "inv_variance"))
        b.plan.notes.append(f"{node.name}: batchnorm inference on a non-NHWC layout as four fused pointwise ops")
        return
    tensors = {"input": b.tensor(i["x"], "x"), "mean": b.tensor(i["mean"], "mean"),
               "inv_variance": b.tensor(i["inv_variance"], "inv_variance"),
               "scale": b.tensor(i["scale"], "scale"), "bias": b.tensor(i["bias"], "bias")}
    b.call(node, "batchnorm_inference", tensors, [b.output(node.outputs["y"])])


def _bn_pointwise(b: _Builder, node: Node, inv_std: str) -> None:
    """y = (x - mean) * inv_std * scale + bias as fused pointwise ops."""
    i = node.inputs
    x, mean = b.tensor(i["x"], "x"), b.tensor(i["mean"], "mean")
    scale, bias = b.tensor(i["scale"], "scale"), b.tensor(i["bias"], "bias")
    centered = b.virtual(i["x"], f"{node.name}_centered")
    normed = b.virtual(i["x"], f"{node.name}_normed")
    scaled = b.virtual(i["x"], f"{node.name}_scaled")
    b.call(node, "sub", {"a": x, "b": mean}, [centered], suffix="_sub")
    b.call(node, "mul", {"a": centered, "b": inv_std}, [normed], suffix="_mul")
    b.call(node, "mul", {"a": normed, "b": scale}, [scaled], suffix="_scale")
    b.call(node, "add", {"a": scaled, "b": bias}, [b.output(node.outputs["y"])], suffix="_bias")


def _batchnorm_inference_variance(b: _Builder, node: Node) -> None:
    """inv_std = rsqrt(variance + eps), then the pointwise batchnorm above."""
    i = node.inputs
    var = b.tensor(i["variance"], "variance")
    eps = b.scalar(i["epsilon"], None, "epsilon")
    var_eps = b.virtual(i["variance"], f"{node.name}_var_eps")
    inv = b.virtual(i["variance"], f"{node.name}_inv_std")
    b.call(node, "add", {"a": var, "b": eps}, [var_eps], suffix="_add_eps")
    b.call(node, "rsqrt", {"input": var_eps}, [inv], suffix="_rsqrt")
    _bn_pointwise(b, node, inv)
    b.plan.notes.append(f"{node.name}: variance-form batchnorm inference as six fused pointwise ops")


def _batchnorm_backward(b: _Builder, node: Node) -> None:
    _single(b, node, "batchnorm backward")
    i, o = node.inputs, node.outputs
    if i.get("mean") is None or i.get("inv_variance") is None:
        raise UnsupportedError(f"batchnorm backward {node.name!r}: cuDNN needs the saved mean and inv_variance")
    scale = b.tensor(i["scale"], "scale")
    tensors = {"grad": b.tensor(i["dy"], "dy"), "input": b.tensor(i["x"], "x"), "scale": scale,
               "mean": b.tensor(i["mean"], "mean"), "inv_variance": b.tensor(i["inv_variance"], "inv_variance")}
    outs = [b.output(o["dx"]), b.output(o.get("dscale"), scale, name=f"{node.name}_dscale"),
            b.output(o.get("dbias"), scale, name=f"{node.name}_dbias")]
    b.call(node, "batchnorm_backward", tensors, outs)


def _phase(node: Node, has_stats: bool) -> str:
    """cuDNN needs a definite phase: NOT_SET becomes TRAINING when the node writes statistics."""
    phase = norm_forward_phase(node)
    if phase not in ("INFERENCE", "TRAINING"):
        phase = "TRAINING" if has_stats else "INFERENCE"
    return phase


def _norm_axes_check(b: _Builder, node: Node, x_uid: int, start: int, what: str,
                     scale_uid: int | None, stats: Sequence[int | None]) -> None:
    """cuDNN reads the normalized axes off scale's shape and the stats' shapes."""
    x = b.graph.by_uid[x_uid]
    rank = len(x.dims)
    want_scale = tuple(d if a >= start else 1 for a, d in enumerate(x.dims))
    want_stats = tuple(d if a < start else 1 for a, d in enumerate(x.dims))
    if scale_uid is not None:
        s = b.graph.by_uid[scale_uid].dims
        s_full = (1,) * (rank - len(s)) + tuple(s)
        if s_full != want_scale:
            raise UnsupportedError(f"{what} {node.name!r}: scale {list(s)} must span exactly the normalized "
                                   f"dims {list(x.dims[start:])} for cuDNN")
    for uid in stats:
        if uid is None:
            continue
        st = b.graph.by_uid[uid].dims
        if tuple((1,) * (rank - len(st)) + tuple(st)) != want_stats:
            raise UnsupportedError(f"{what} {node.name!r}: statistics {list(st)} do not match the "
                                   f"per-row shape {list(want_stats)}")


def _layernorm(b: _Builder, node: Node) -> None:
    i, o = node.inputs, node.outputs
    count = node.params.get("normalized_dim_count")
    x_t = b.graph.by_uid[i["x"]]
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= len(x_t.dims):
        raise UnsupportedError(f"layernorm {node.name!r}: normalized_dim_count {count!r} is not usable")
    start = len(x_t.dims) - count
    _norm_axes_check(b, node, i["x"], start, "layernorm", i.get("scale"), (o.get("mean"), o.get("inv_variance")))
    phase = _phase(node, o.get("mean") is not None or o.get("inv_variance") is not None)
    if i.get("scale") is None:
        raise UnsupportedError(f"layernorm {node.name!r}: cuDNN needs a scale tensor")
    scale = b.tensor(i["scale"], "scale")
    bias = b.tensor(i["bias"], "bias") if i.get("bias") is not None else b.constant_like(scale, 0.0, f"{node.name}_zero_bias")
    tensors = {"input": b.tensor(i["x"], "x"), "scale": scale, "bias": bias,
               "epsilon": b.scalar(i["epsilon"], None, "epsilon")}
    y = b.output(o["y"])
    outs: list[str | None] = [y, None, None]
    if phase == "TRAINING":
        outs = [y, _stat_output(b, o.get("mean"), i["x"], start, f"{node.name}_mean"),
                _stat_output(b, o.get("inv_variance"), i["x"], start, f"{node.name}_inv_variance")]
    b.call(node, "layernorm", tensors, outs, {"norm_forward_phase": EnumValue("norm_forward_phase", phase)})


def _stat_output(b: _Builder, uid: int | None, x_uid: int, start: int, name: str) -> str:
    if uid is not None:
        return b.output(uid)
    x = b.graph.by_uid[x_uid]
    dims = tuple(d if a < start else 1 for a, d in enumerate(x.dims))
    from hipdnn_trace.graph.layout import packed_strides

    dims_l, strides_l = lift(dims, packed_strides(dims), b.rank)
    b._synthetic += 1
    decl = OutputDecl(f"s{b._synthetic}", b.uid(), name, dims_l, strides_l, "FLOAT", virtual=False)
    b.plan.outputs.append(decl)
    return decl.key


def _rmsnorm(b: _Builder, node: Node) -> None:
    from hipdnn_trace.backends.reference.ops.rmsnorm import rmsnorm_start_axis

    i, o = node.inputs, node.outputs
    x_t = b.graph.by_uid[i["x"]]
    count = node.params.get("normalized_dim_count")
    inv_uid = o.get("inv_rms")
    if count is None and inv_uid is not None:
        stats = b.graph.by_uid[inv_uid].dims
        reduced = [a for a, (xd, sd) in enumerate(zip(x_t.dims, stats)) if sd == 1 and xd > 1]
        if reduced and reduced == list(range(reduced[0], len(x_t.dims))):
            count = len(x_t.dims) - reduced[0]
    scale_t = b.graph.by_uid[i["scale"]]
    start = rmsnorm_start_axis(tuple(x_t.dims), tuple(scale_t.dims), count)
    _norm_axes_check(b, node, i["x"], start, "rmsnorm", i["scale"], (inv_uid,))
    phase = _phase(node, inv_uid is not None)
    tensors = {"input": b.tensor(i["x"], "x"), "scale": b.tensor(i["scale"], "scale"),
               "bias": b.tensor(i.get("bias"), "bias"), "epsilon": b.scalar(i["epsilon"], None, "epsilon")}
    y = b.output(o["y"])
    outs: list[str | None] = [y, None]
    if phase == "TRAINING":
        outs = [y, _stat_output(b, inv_uid, i["x"], start, f"{node.name}_inv_rms")]
    b.call(node, "rmsnorm", tensors, outs, {"norm_forward_phase": EnumValue("norm_forward_phase", phase)})


_REDUCTION = {"ADD": "ADD", "MUL": "MUL", "MIN": "MIN", "MAX": "MAX", "AMAX": "AMAX", "AVG": "AVG",
              "NORM1": "NORM1", "NORM2": "NORM2", "MUL_NO_ZEROS": "MUL_NO_ZEROS", "MIN_OP": "MIN", "MAX_OP": "MAX"}


def _reduction(b: _Builder, node: Node) -> None:
    mode = str(node.params.get("mode", "")).strip().upper()
    if mode not in _REDUCTION:
        raise UnsupportedError(f"reduction {node.name!r}: mode {mode or '?'} has no cuDNN equivalent")
    attrs = {"mode": EnumValue("reduction_mode", _REDUCTION[mode])}
    out_uid = node.outputs["out"]
    out_type = b.graph.by_uid[out_uid].data_type
    if out_type != "float":
        # Seen on an H200 (cuDNN 9.19): reductions need yType == FLOAT, and a reduction
        # output may feed no further op, so no cast can follow it.
        raise UnsupportedError(f"reduction {node.name!r}: cuDNN reductions write float only and cannot be "
                               f"followed by a cast (output is {out_type})")
    b.call(node, "reduction", {"input": b.tensor(node.inputs["in"], "in")}, [b.output(out_uid)], attrs)


_OPS = {
    "ConvolutionFwdAttributes": _conv,
    "ConvolutionBwdAttributes": _conv,
    "ConvolutionWrwAttributes": _conv,
    "MatmulAttributes": _matmul,
    "PointwiseAttributes": _pointwise,
    "BatchnormAttributes": _batchnorm,
    "BatchnormInferenceAttributes": _batchnorm_inference,
    "BatchnormInferenceAttributesVarianceExt": _batchnorm_inference_variance,
    "BatchnormBackwardAttributes": _batchnorm_backward,
    "LayernormAttributes": _layernorm,
    "RMSNormAttributes": _rmsnorm,
    "ReductionAttributes": _reduction,
}


def plan(graph: Graph) -> Plan:
    """The cuDNN frontend calls that build ``graph``; UnsupportedError says why not."""
    for t in graph.tensors:
        if not t.is_value:
            _dtype(t.data_type, f"tensor {t.name!r}")
    b = _Builder(graph)
    for index in execution_order(graph):
        node = graph.nodes[index]
        handler = _OPS.get(node.type)
        if handler is None:
            raise UnsupportedError(f"op {node.op} has no cuDNN frontend equivalent")
        handler(b, node)
    produced = {o.hipdnn_uid for o in b.plan.outputs}
    missing = [t.name for t in graph.output_tensors if t.uid not in produced]
    if missing:   # pragma: no cover - every handler maps its outputs
        raise UnsupportedError(f"outputs {', '.join(missing)} are not produced by the translation")
    return b.plan

"""Build hipDNN graphs in Python, the way hipDNN's frontend would describe them.

The sample graphs in ``graphs/`` and many tests are written with this builder, so
one call per op stays short::

    b = GraphBuilder("conv_relu", io="half", compute="float", intermediate="float")
    x = b.tensor("x", [2, 16, 8, 8], layout="NHWC")
    w = b.tensor("w", [32, 16, 3, 3], layout="NHWC")
    y = b.conv_fwd(x, w, pad=1, virtual=True)
    z = b.pointwise("relu_fwd", y, out="z")
    graph = b.build()

Output dims come from the same shape rules the loader checks (``graph.ops``), uids
are assigned in creation order, and :meth:`GraphBuilder.build` turns the result into
hipDNN JSON and loads it back with :func:`~hipdnn_trace.graph.load.parse_graph`:
a built graph is exactly what reading its file would give, checks included.
Builder misuse (a tensor from another builder, a bad layout name) raises
ValueError at the call; graph-level problems raise GraphError at ``build``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hipdnn_trace.graph import dtypes, ops
from hipdnn_trace.graph.build_attention import AttentionBuilder
from hipdnn_trace.graph.build_blockscale import BlockScaleBuilder
from hipdnn_trace.graph.build_moe import MoeBuilder
from hipdnn_trace.graph.build_resample import ResampleBuilder
from hipdnn_trace.graph.layout import channels_last_order, packed_strides, stride_order
from hipdnn_trace.graph.load import parse_graph
from hipdnn_trace.graph.model import Graph, Node, Tensor
from hipdnn_trace.graph.write import graph_to_json

__all__ = [
    "BatchnormBackwardOutputs",
    "BatchnormOutputs",
    "GraphBuilder",
    "LayernormOutputs",
    "RMSNormOutputs",
]

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


@dataclass(frozen=True)
class BatchnormOutputs:
    y: Tensor
    mean: Tensor | None
    inv_variance: Tensor | None
    next_running_mean: Tensor | None
    next_running_variance: Tensor | None


@dataclass(frozen=True)
class BatchnormBackwardOutputs:
    dx: Tensor
    dscale: Tensor
    dbias: Tensor


@dataclass(frozen=True)
class LayernormOutputs:
    y: Tensor
    mean: Tensor | None
    inv_variance: Tensor | None


@dataclass(frozen=True)
class RMSNormOutputs:
    y: Tensor
    inv_rms: Tensor | None


def _spatial(value: int | Sequence[int], count: int, what: str) -> list[int]:
    """An int (same for every spatial dim) or one int per spatial dim."""
    if isinstance(value, int):
        return [value] * count
    values = [int(v) for v in value]
    if len(values) != count:
        raise ValueError(f"{what} needs {count} values (one per spatial dim), got {values}")
    return values


class GraphBuilder(AttentionBuilder, BlockScaleBuilder, MoeBuilder, ResampleBuilder):
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

    def _conv_params(self, nsp: int, pad: int | Sequence[int], post_pad: int | Sequence[int] | None,
                     stride: int | Sequence[int], dilation: int | Sequence[int], mode: str) -> dict[str, Any]:
        pre = _spatial(pad, nsp, "pad")
        return {
            "pre_padding": pre,
            "post_padding": pre if post_pad is None else _spatial(post_pad, nsp, "post_pad"),
            "stride": _spatial(stride, nsp, "stride"),
            "dilation": _spatial(dilation, nsp, "dilation"),
            "conv_mode": mode,
        }

    def conv_fwd(self, x: Tensor, w: Tensor, *, pad: int | Sequence[int] = 0,
                 post_pad: int | Sequence[int] | None = None, stride: int | Sequence[int] = 1,
                 dilation: int | Sequence[int] = 1, mode: str = "CROSS_CORRELATION",
                 name: str | None = None, out: str | None = None, virtual: bool = False,
                 dtype: str | None = None, layout: str | None = None,
                 compute: str | None = None) -> Tensor:
        """y = conv(x, w). Groups follow from x's channels / w's dim 1, as in hipDNN."""
        self._own(x, "conv_fwd x")
        self._own(w, "conv_fwd w")
        nsp = len(x.dims) - 2
        if nsp < 1 or len(w.dims) != len(x.dims):
            raise ValueError(f"conv_fwd needs x and w of one rank >= 3, got {list(x.dims)}, {list(w.dims)}")
        p = self._conv_params(nsp, pad, post_pad, stride, dilation, mode)
        spatial = ops.conv_output_dims(x.dims[2:], w.dims[2:], p["pre_padding"], p["post_padding"],
                                       p["stride"], p["dilation"])
        node = self._name("conv_fwd", name)
        y = self._output(out or f"{node}_y", (x.dims[0], w.dims[0], *spatial), x,
                         dtype=dtype, virtual=virtual, layout=layout)
        self._node("ConvolutionFwdAttributes", node, {"x": x, "w": w}, {"y": y}, p, compute)
        return y

    def conv_dgrad(self, dy: Tensor, w: Tensor, *, x_dims: Sequence[int], pad: int | Sequence[int] = 0,
                   post_pad: int | Sequence[int] | None = None, stride: int | Sequence[int] = 1,
                   dilation: int | Sequence[int] = 1, mode: str = "CROSS_CORRELATION",
                   name: str | None = None, out: str | None = None, virtual: bool = False,
                   dtype: str | None = None, layout: str | None = None,
                   compute: str | None = None) -> Tensor:
        """dx of a convolution whose forward input had ``x_dims`` (stride makes it ambiguous)."""
        self._own(dy, "conv_dgrad dy")
        self._own(w, "conv_dgrad w")
        p = self._conv_params(len(x_dims) - 2, pad, post_pad, stride, dilation, mode)
        node = self._name("conv_dgrad", name)
        dx = self._output(out or f"{node}_dx", x_dims, dy, dtype=dtype, virtual=virtual, layout=layout)
        self._node("ConvolutionBwdAttributes", node, {"dy": dy, "w": w}, {"dx": dx}, p, compute)
        return dx

    def conv_wgrad(self, x: Tensor, dy: Tensor, *, w_dims: Sequence[int], pad: int | Sequence[int] = 0,
                   post_pad: int | Sequence[int] | None = None, stride: int | Sequence[int] = 1,
                   dilation: int | Sequence[int] = 1, mode: str = "CROSS_CORRELATION",
                   name: str | None = None, out: str | None = None, virtual: bool = False,
                   dtype: str | None = None, layout: str | None = None,
                   compute: str | None = None) -> Tensor:
        """dw of a convolution with weight dims ``w_dims`` (groups = C / w_dims[1])."""
        self._own(x, "conv_wgrad x")
        self._own(dy, "conv_wgrad dy")
        p = self._conv_params(len(x.dims) - 2, pad, post_pad, stride, dilation, mode)
        node = self._name("conv_wgrad", name)
        dw = self._output(out or f"{node}_dw", w_dims, x, dtype=dtype, virtual=virtual, layout=layout)
        self._node("ConvolutionWrwAttributes", node, {"x": x, "dy": dy}, {"dw": dw}, p, compute)
        return dw

    def matmul(self, a: Tensor, b: Tensor, *, name: str | None = None, out: str | None = None,
               virtual: bool = False, dtype: str | None = None, layout: str | None = None,
               compute: str | None = None) -> Tensor:
        """c = a @ b over the last two dims; batch dims follow hipDNN's broadcast rule.
        Transposes are strides on ``a`` / ``b`` (``b.tensor(..., strides=...)``)."""
        self._own(a, "matmul a")
        self._own(b, "matmul b")
        if len(a.dims) != len(b.dims) or len(a.dims) < 2:
            raise ValueError(f"matmul needs a and b of one rank >= 2, got {list(a.dims)}, {list(b.dims)}")
        batch = ops.matmul_batch_dims(a.dims[:-2], b.dims[:-2])
        if batch is None:
            raise ValueError(f"matmul batch dims {list(a.dims[:-2])} and {list(b.dims[:-2])} do not broadcast")
        node = self._name("matmul", name)
        c = self._output(out or f"{node}_c", (*batch, a.dims[-2], b.dims[-1]), None,
                         dtype=dtype, virtual=virtual, layout=layout)
        self._node("MatmulAttributes", node, {"a": a, "b": b}, {"c": c}, {}, compute)
        return c

    def pointwise(self, mode: str, a: Tensor, b: Tensor | None = None, c: Tensor | None = None, *,
                  relu_lower_clip: float | None = None, relu_upper_clip: float | None = None,
                  relu_lower_clip_slope: float | None = None, axis: int | None = None,
                  swish_beta: float | None = None, elu_alpha: float | None = None,
                  softplus_beta: float | None = None, name: str | None = None,
                  out: str | None = None, virtual: bool = False, dtype: str | None = None,
                  layout: str | None = None, compute: str | None = None) -> Tensor:
        """out = mode(a[, b[, c]]), inputs broadcast to the output (numpy rule).

        Every pointwise key is written, null when unset: hipDNN's reader requires them all.
        """
        operands = [t for t in (a, b, c) if t is not None]
        for t in operands:
            self._own(t, f"pointwise {mode} input")
        if c is not None and b is None:
            raise ValueError("pointwise: in_2 given without in_1")
        shape = ops.broadcast_shape([t.dims for t in operands])
        if shape is None:
            raise ValueError(f"pointwise {mode}: dims {[list(t.dims) for t in operands]} do not broadcast")
        like = next((t for t in operands if tuple(t.dims) == shape), a)
        node = self._name(mode, name)
        y = self._output(out or f"{node}_out", shape, like, dtype=dtype, virtual=virtual, layout=layout)
        params = {"operation": mode, "relu_lower_clip": relu_lower_clip, "relu_upper_clip": relu_upper_clip,
                  "relu_lower_clip_slope": relu_lower_clip_slope, "axis_tensor_uid": axis,
                  "swish_beta": swish_beta, "elu_alpha": elu_alpha, "softplus_beta": softplus_beta}
        assert set(params) == set(ops.POINTWISE_OPTIONS)
        self._node("PointwiseAttributes", node, {"in_0": a, "in_1": b, "in_2": c},
                   {"out_0": y}, params, compute)
        return y

    def _per_channel(self, x: Tensor, name: str, dtype: str | None, virtual: bool = False) -> Tensor:
        dims = (1, x.dims[1], *([1] * (len(x.dims) - 2)))
        return self._output(name, dims, None, dtype=dtype or x.data_type, virtual=virtual, layout=None)

    def _epsilon(self, value: float | Tensor, node: str) -> Tensor:
        if isinstance(value, Tensor):
            self._own(value, f"{node} epsilon")
            return value
        return self.scalar(f"{node}_epsilon", float(value))

    def batchnorm_inference(self, x: Tensor, mean: Tensor, inv_variance: Tensor, scale: Tensor,
                            bias: Tensor, *, name: str | None = None, out: str | None = None,
                            virtual: bool = False, dtype: str | None = None, layout: str | None = None,
                            compute: str | None = None) -> Tensor:
        """y = scale * (x - mean) * inv_variance + bias, per channel (dim 1); no epsilon."""
        node = self._name("batchnorm_inference", name)
        y = self._output(out or f"{node}_y", x.dims, x, dtype=dtype, virtual=virtual, layout=layout)
        self._node("BatchnormInferenceAttributes", node,
                   {"x": x, "mean": mean, "inv_variance": inv_variance, "scale": scale, "bias": bias},
                   {"y": y}, {}, compute)
        return y

    def batchnorm_inference_variance(self, x: Tensor, mean: Tensor, variance: Tensor, scale: Tensor, bias: Tensor,
                                     *, epsilon: float | Tensor = 1e-5, name: str | None = None,
                                     out: str | None = None, compute: str | None = None) -> Tensor:
        """y = scale * (x - mean) / sqrt(variance + epsilon) + bias (hipDNN's VarianceExt form)."""
        node = self._name("batchnorm_inference", name)
        y = self._output(out or f"{node}_y", x.dims, x, dtype=None, virtual=False, layout=None)
        self._node("BatchnormInferenceAttributesVarianceExt", node,
                   {"x": x, "mean": mean, "variance": variance, "scale": scale, "bias": bias,
                    "epsilon": self._epsilon(epsilon, node)}, {"y": y}, {}, compute)
        return y

    def batchnorm(self, x: Tensor, scale: Tensor, bias: Tensor, *, epsilon: float | Tensor = 1e-5,
                  momentum: float | Tensor | None = None, prev_running_mean: Tensor | None = None,
                  prev_running_variance: Tensor | None = None, saved_stats: bool = True,
                  stats_dtype: str | None = None, name: str | None = None, out: str | None = None,
                  virtual: bool = False, dtype: str | None = None, layout: str | None = None,
                  compute: str | None = None) -> BatchnormOutputs:
        """Training batchnorm. Epsilon and momentum are by-value scalars (floats are wrapped);
        running stats are produced when both previous ones are given (momentum then
        defaults to 0.1). Statistics tensors take ``stats_dtype`` (default: scale's type)."""
        node = self._name("batchnorm", name)
        eps = self._epsilon(epsilon, node)
        running = prev_running_mean is not None or prev_running_variance is not None
        if running and (prev_running_mean is None or prev_running_variance is None):
            raise ValueError("batchnorm: give both prev_running_mean and prev_running_variance")
        mom: Tensor | None
        if isinstance(momentum, Tensor):
            self._own(momentum, f"{node} momentum")
            mom = momentum
        elif momentum is not None or running:
            mom = self.scalar(f"{node}_momentum", 0.1 if momentum is None else float(momentum))
        else:
            mom = None
        sdt = stats_dtype or scale.data_type
        y = self._output(out or f"{node}_y", x.dims, x, dtype=dtype, virtual=virtual, layout=layout)
        mean = self._per_channel(x, f"{node}_mean", sdt) if saved_stats else None
        inv_var = self._per_channel(x, f"{node}_inv_variance", sdt) if saved_stats else None
        next_mean = self._per_channel(x, f"{node}_next_running_mean", sdt) if running else None
        next_var = self._per_channel(x, f"{node}_next_running_variance", sdt) if running else None
        self._node("BatchnormAttributes", node,
                   {"x": x, "scale": scale, "bias": bias, "epsilon": eps,
                    "prev_running_mean": prev_running_mean,
                    "prev_running_variance": prev_running_variance, "momentum": mom,
                    "peer_stats": ()},
                   {"y": y, "mean": mean, "inv_variance": inv_var,
                    "next_running_mean": next_mean, "next_running_variance": next_var}, {}, compute)
        return BatchnormOutputs(y, mean, inv_var, next_mean, next_var)

    def batchnorm_backward(self, dy: Tensor, x: Tensor, scale: Tensor, *, mean: Tensor | None = None,
                           inv_variance: Tensor | None = None, stats_dtype: str | None = None,
                           name: str | None = None, virtual: bool = False, dtype: str | None = None,
                           layout: str | None = None, compute: str | None = None) -> BatchnormBackwardOutputs:
        """dx, dscale, dbias of training batchnorm from the saved mean / inv_variance."""
        node = self._name("batchnorm_backward", name)
        dx = self._output(f"{node}_dx", x.dims, x, dtype=dtype, virtual=virtual, layout=layout)
        sdt = stats_dtype or scale.data_type
        dscale = self._per_channel(x, f"{node}_dscale", sdt)
        dbias = self._per_channel(x, f"{node}_dbias", sdt)
        self._node("BatchnormBackwardAttributes", node,
                   {"dy": dy, "x": x, "scale": scale, "mean": mean, "inv_variance": inv_variance,
                    "peer_stats": ()},
                   {"dx": dx, "dscale": dscale, "dbias": dbias}, {}, compute)
        return BatchnormBackwardOutputs(dx, dscale, dbias)

    def _stats(self, x: Tensor, start: int, name: str, dtype: str) -> Tensor:
        dims = (*x.dims[:start], *([1] * (len(x.dims) - start)))
        return self._output(name, dims, None, dtype=dtype, virtual=False, layout=None)

    def layernorm(self, x: Tensor, scale: Tensor, bias: Tensor | None = None, *,
                  epsilon: float | Tensor = 1e-5, normalized_dim_count: int = 1,
                  phase: str = "TRAINING", stats_dtype: str | None = None, name: str | None = None,
                  out: str | None = None, virtual: bool = False, dtype: str | None = None,
                  layout: str | None = None, compute: str | None = None) -> LayernormOutputs:
        """Layernorm over the last ``normalized_dim_count`` dims; saved mean / inv_variance
        ([..., 1, 1] per batch position) in TRAINING only."""
        if phase not in ("TRAINING", "INFERENCE"):
            raise ValueError(f"layernorm phase must be TRAINING or INFERENCE, not {phase!r}")
        node = self._name("layernorm", name)
        eps = self._epsilon(epsilon, node)
        y = self._output(out or f"{node}_y", x.dims, x, dtype=dtype, virtual=virtual, layout=layout)
        start = len(x.dims) - normalized_dim_count
        sdt = stats_dtype or self.intermediate
        mean = self._stats(x, start, f"{node}_mean", sdt) if phase == "TRAINING" else None
        inv_var = self._stats(x, start, f"{node}_inv_variance", sdt) if phase == "TRAINING" else None
        self._node("LayernormAttributes", node,
                   {"x": x, "scale": scale, "bias": bias, "epsilon": eps},
                   {"y": y, "mean": mean, "inv_variance": inv_var},
                   {"normalized_dim_count": normalized_dim_count, "forward_phase": phase}, compute)
        return LayernormOutputs(y, mean, inv_var)

    def rmsnorm(self, x: Tensor, scale: Tensor, bias: Tensor | None = None, *,
                epsilon: float | Tensor = 1e-5, phase: str = "TRAINING", stats_dtype: str | None = None,
                name: str | None = None, out: str | None = None, virtual: bool = False,
                dtype: str | None = None, layout: str | None = None,
                compute: str | None = None) -> RMSNormOutputs:
        """RMSNorm; the normalized dims are the trailing dims where ``scale`` (same rank as
        x, 1s in batch positions) matches x, as in hipDNN's CPU reference. inv_rms in TRAINING."""
        if phase not in ("TRAINING", "INFERENCE"):
            raise ValueError(f"rmsnorm phase must be TRAINING or INFERENCE, not {phase!r}")
        if len(scale.dims) != len(x.dims):
            raise ValueError(f"rmsnorm scale {list(scale.dims)} needs x's rank {len(x.dims)}")
        start = len(x.dims)
        while start > 0 and scale.dims[start - 1] == x.dims[start - 1]:
            start -= 1
        start = max(start, 1)
        node = self._name("rmsnorm", name)
        eps = self._epsilon(epsilon, node)
        y = self._output(out or f"{node}_y", x.dims, x, dtype=dtype, virtual=virtual, layout=layout)
        inv_rms = (self._stats(x, start, f"{node}_inv_rms", stats_dtype or self.intermediate)
                   if phase == "TRAINING" else None)
        inputs: dict[str, Any] = {"x": x, "scale": scale, "epsilon": eps}
        if bias is not None:               # hipDNN omits unset RMSNorm ports (not null)
            inputs["bias"] = bias
        outputs: dict[str, Any] = {"y": y}
        if inv_rms is not None:
            outputs["inv_rms"] = inv_rms
        self._node("RMSNormAttributes", node, inputs, outputs, {"forward_phase": phase}, compute)
        return RMSNormOutputs(y, inv_rms)

    def layernorm_backward(self, dy: Tensor, x: Tensor, scale: Tensor, mean: Tensor, inv_variance: Tensor, *,
                           normalized_dim_count: int = 1, name: str | None = None,
                           compute: str | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Layernorm backward with saved statistics: (dx, dscale, dbias), hipDNN's sample layout."""
        node = self._name("layernorm_backward", name)
        dx = self._output("dx", x.dims, x, dtype=None, virtual=False, layout=None)
        dscale = self._output("dscale", scale.dims, scale, dtype=scale.data_type, virtual=False, layout=None)
        dbias = self._output("dbias", scale.dims, scale, dtype=scale.data_type, virtual=False, layout=None)
        self._node("LayernormBackwardAttributes", node,
                   {"dy": dy, "x": x, "scale": scale, "mean": mean, "inv_variance": inv_variance},
                   {"dx": dx, "dscale": dscale, "dbias": dbias},
                   {"normalized_dim_count": normalized_dim_count}, compute)
        return dx, dscale, dbias

    def rmsnorm_backward(self, dy: Tensor, x: Tensor, scale: Tensor, inv_rms: Tensor, *, name: str | None = None,
                         compute: str | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """RMSNorm backward with the saved inv_rms: (dx, dscale, dbias); no options (hipDNN's layout)."""
        node = self._name("rmsnorm_backward", name)
        dx = self._output("dx", x.dims, x, dtype=None, virtual=False, layout=None)
        dscale = self._output("dscale", scale.dims, scale, dtype=scale.data_type, virtual=False, layout=None)
        dbias = self._output("dbias", scale.dims, scale, dtype=scale.data_type, virtual=False, layout=None)
        self._node("RMSNormBackwardAttributes", node, {"dy": dy, "x": x, "scale": scale, "inv_rms": inv_rms},
                   {"dx": dx, "dscale": dscale, "dbias": dbias}, {}, compute)
        return dx, dscale, dbias

    def reduction(self, mode: str, x: Tensor, out_dims: Sequence[int], *, deterministic: bool = False,
                  name: str | None = None, out: str | None = None, virtual: bool = False,
                  dtype: str | None = None, layout: str | None = None,
                  compute: str | None = None) -> Tensor:
        """Reduce x to ``out_dims`` (each dim kept or 1). ``mode`` as hipDNN spells it
        (``add``, ``max``, ``avg``, ``norm2``...)."""
        node = self._name("reduction", name)
        y = self._output(out or f"{node}_out", out_dims, x, dtype=dtype, virtual=virtual, layout=layout)
        self._node("ReductionAttributes", node, {"in": x}, {"out": y},
                   {"mode": mode, "is_deterministic": deterministic}, compute)
        return y

    # -------------------------------------------------------------- output

    def to_json(self) -> dict[str, Any]:
        """The hipDNN JSON value of the graph so far (unchecked)."""
        draft = Graph(self.name, self.compute, self.io, self.intermediate,
                      tuple(self._tensors), tuple(self._nodes), source=self.name)
        return graph_to_json(draft)

    def build(self) -> Graph:
        """The checked Graph, exactly as loading its JSON file would give it."""
        return parse_graph(self.to_json(), source=self.name)

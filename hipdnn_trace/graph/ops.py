"""What hipDNN's node types are: their ports, options, shape rules and cost.

One :class:`OpSpec` per node ``type`` string. The loader uses it to classify ports
and check shapes, ``inspect`` and the harness use it for FLOPs and bytes, and the
builder uses it to lay options out where hipDNN puts them. Port names are written
without hipDNN's ``_tensor_uid`` suffix.

Sources: hipDNN's JSON utilities (``hipdnn_data_sdk/utilities/json/*.hpp``) and
frontend attributes; docs/hipdnn-format.md has the details and citations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod
from typing import TYPE_CHECKING, Any

from hipdnn_trace.graph import attention, blockscale, custom, moe, resample
from hipdnn_trace.graph.dtypes import DTYPES
from hipdnn_trace.graph.norms import (
    layernorm_forward_check,
    norm_backward_check,
    norm_backward_start,
    norm_options_check,
    one_value,
    rmsnorm_forward_check,
    rmsnorm_refusal,
    saved_pair,
)
from hipdnn_trace.graph.opspec import FlopCount, Notes, OpSpec, ShapeCheck, option_path, port_path, port_tensor

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Graph, Node

__all__ = ["OpSpec", "SPECS", "norm_backward_start", "rmsnorm_refusal", "graph_bytes", "graph_flops", "node_flops",
           "node_notes", "spec"]

_t = port_tensor
_port_path = port_path
_option_path = option_path


#: ConvMode strings of hipDNN's JSON (upper case there; any case accepted).
CONV_MODES = ("UNSET", "CONVOLUTION", "CROSS_CORRELATION")


def conv_output_dims(
    in_spatial: Sequence[int], kernel: Sequence[int], pre: Sequence[int], post: Sequence[int],
    stride: Sequence[int], dilation: Sequence[int],
) -> tuple[int, ...]:
    """Output spatial size of a convolution (floor division, as hipDNN and cuDNN)."""
    return tuple(
        (i + a + b - d * (k - 1) - 1) // s + 1
        for i, k, a, b, s, d in zip(in_spatial, kernel, pre, post, stride, dilation)
    )


def _conv_check(x_port: str, w_port: str, y_port: str) -> ShapeCheck:
    def check(node: Node, graph: Graph) -> list[tuple[str, str]]:
        x, w, y = (_t(node, graph, p) for p in (x_port, w_port, y_port))
        if x is None or w is None or y is None:
            return []
        problems: list[tuple[str, str]] = []
        rank = len(x.dims)
        if rank < 3 or len(w.dims) != rank or len(y.dims) != rank:
            return [(_port_path(node, x_port),
                     f"convolution tensors need equal rank >= 3 (x {len(x.dims)}, w {len(w.dims)}, "
                     f"y {len(y.dims)})")]
        nsp = rank - 2
        opts = {}
        for key in ("pre_padding", "post_padding", "stride", "dilation"):
            value = node.params.get(key)
            section = node.param_sections.get(key, "parameters")
            if not isinstance(value, list) or len(value) != nsp or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value
            ):
                return [(f"{section}.{key}", f"must be a list of {nsp} integers, got {value!r}")]
            opts[key] = value
        if any(s < 1 for s in opts["stride"]) or any(d < 1 for d in opts["dilation"]):
            return [(f"{node.param_sections.get('stride', 'parameters')}.stride",
                     "stride and dilation must be >= 1")]
        mode = node.params.get("conv_mode", "CROSS_CORRELATION")
        if not isinstance(mode, str) or mode.upper() not in CONV_MODES:
            return [(_option_path(node, "conv_mode", "parameters"),
                     f"unknown conv_mode {mode!r} (hipDNN: {', '.join(CONV_MODES)})")]
        if any(p < 0 for p in opts["pre_padding"] + opts["post_padding"]):
            return [(f"{node.param_sections.get('pre_padding', 'parameters')}.pre_padding",
                     "padding must be >= 0")]
        c, k, cg = x.dims[1], w.dims[0], w.dims[1]
        if cg < 1 or c % cg:
            problems.append((_port_path(node, w_port),
                             f"{x_port} has {c} channels, not a multiple of {w_port}'s {cg} channels per group"))
            return problems
        groups = c // cg
        if k % groups:
            problems.append((_port_path(node, w_port),
                             f"{k} output channels not divisible by {groups} groups"))
        out = conv_output_dims(x.dims[2:], w.dims[2:], opts["pre_padding"], opts["post_padding"],
                               opts["stride"], opts["dilation"])
        expect = (x.dims[0], k, *out)
        if any(o < 1 for o in out):
            problems.append((_port_path(node, x_port),
                             f"kernel {list(w.dims[2:])} with these pads/dilation leaves no output"))
        elif tuple(y.dims) != expect:
            problems.append((_port_path(node, y_port),
                             f"dims {list(y.dims)} do not match the convolution's output "
                             f"{list(expect)} (x {list(x.dims)}, w {list(w.dims)}, {opts})"))
        return problems

    return check


def _conv_notes(x_port: str, w_port: str) -> Notes:
    def notes(node: Node, graph: Graph) -> list[str]:
        x, w = _t(node, graph, x_port), _t(node, graph, w_port)
        if x is None or w is None or len(x.dims) < 2 or len(w.dims) < 2 or x.dims[1] == w.dims[1]:
            return []
        return [f"{x.dims[1] // w.dims[1]} groups: {x_port} has {x.dims[1]} channels, {w_port} {w.dims[1]} per group "
                "(hipDNN infers the group count from the two)"]
    return notes


def conv_flops(w: Sequence[int], y: Sequence[int]) -> float:
    """2 * N * K * prod(out) * C/g * prod(kernel) from the weight dims and the output
    (forward) dims: the same for fprop, dgrad (dy) and wgrad (dw, dy)."""
    return 2.0 * prod(y) * prod(w[1:])


def _conv_flop_count(w_port: str, y_port: str) -> FlopCount:
    def flops(node: Node, graph: Graph) -> float:
        w, y = _t(node, graph, w_port), _t(node, graph, y_port)
        return conv_flops(w.dims, y.dims) if w and y else 0.0
    return flops


def broadcast_shape(shapes: Sequence[Sequence[int]]) -> tuple[int, ...] | None:
    """numpy broadcasting (align trailing dims; 1 stretches); None if incompatible."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(rank):
        sizes = {s[len(s) - rank + axis] for s in shapes if len(s) - rank + axis >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


#: hipDNN's PointwiseMode JSON strings -> number of tensor inputs (docs/hipdnn-format.md 2.2).
POINTWISE_ARITY: dict[str, int] = {
    **dict.fromkeys((
        "abs", "ceil", "elu_fwd", "erf", "exp", "floor", "gelu_approx_tanh_fwd", "gelu_fwd",
        "gen_index", "identity", "log", "logical_not", "neg", "reciprocal", "relu_fwd", "rsqrt",
        "sigmoid_fwd", "sin", "softplus_fwd", "sqrt", "swish_fwd", "tan", "tanh_fwd"), 1),
    **dict.fromkeys((
        "add", "add_square", "cmp_eq", "cmp_ge", "cmp_gt", "cmp_le", "cmp_lt", "cmp_neq", "div",
        "elu_bwd", "gelu_approx_tanh_bwd", "gelu_bwd", "logical_and", "logical_or", "max_op",
        "min_op", "mul", "relu_bwd", "sigmoid_bwd", "softplus_bwd", "sub", "swish_bwd",
        "tanh_bwd"), 2),
    "binary_select": 3,
}



def pointwise_mode(node: Node) -> str:
    """A pointwise node's mode as the key of :data:`POINTWISE_ARITY` (hipDNN writes it in any case)."""
    return str(node.params.get("operation", "")).strip().lower()


#: hipDNN's NormFwdPhase enum values, for graphs that write the number instead of the name.
_NORM_PHASES = {0: "NOT_SET", 1: "INFERENCE", 2: "TRAINING"}


def norm_forward_phase(node: Node) -> str:
    """A layernorm/rmsnorm node's forward_phase: INFERENCE, TRAINING or NOT_SET (int or any-case string)."""
    raw = node.params.get("forward_phase", "NOT_SET")
    if isinstance(raw, int) and not isinstance(raw, bool):
        return _NORM_PHASES.get(raw, "NOT_SET")
    return str(raw).strip().upper()

def _pointwise_mode(node: Node) -> list[tuple[str, str]]:
    """The operation must be a hipDNN mode (any case) with its number of inputs connected."""
    if "operation" not in node.params:
        return [("inputs", "missing required field 'operation'")]
    mode = node.params["operation"]
    where = _option_path(node, "operation", "inputs")
    if not isinstance(mode, str) or mode.lower() not in POINTWISE_ARITY:
        return [(where, f"unknown pointwise operation {mode!r} (hipDNN modes: "
                 f"{', '.join(sorted(POINTWISE_ARITY))})")]
    arity = POINTWISE_ARITY[mode.lower()]
    given = [p for p in ("in_0", "in_1", "in_2") if node.inputs.get(p) is not None]
    if given != ["in_0", "in_1", "in_2"][:arity]:
        return [("inputs", f"{mode} takes {arity} input(s) (in_0..in_{arity - 1}), "
                 f"got {', '.join(given) or 'none'}")]
    return []


def _pointwise_check(node: Node, graph: Graph) -> list[tuple[str, str]]:
    problems = _pointwise_mode(node)
    out = _t(node, graph, "out_0")
    if problems or out is None:
        return problems
    for port in ("in_0", "in_1", "in_2"):
        t = _t(node, graph, port)
        if t is not None and broadcast_shape([t.dims, out.dims]) != tuple(out.dims):
            problems.append((_port_path(node, port),
                             f"dims {list(t.dims)} do not broadcast to the output's {list(out.dims)}"))
    return problems


def matmul_batch_dims(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    """hipDNN's batch rule: per axis the larger size, and one size must divide the other
    (size-1 broadcast and grouped repeat, e.g. 8 A slices sharing 2 B slices)."""
    out = []
    for x, y in zip(a, b):
        big, small = max(x, y), min(x, y)
        if big % small:
            return None
        out.append(big)
    return tuple(out)


def _matmul_check(node: Node, graph: Graph) -> list[tuple[str, str]]:
    a, b, c = (_t(node, graph, p) for p in ("a", "b", "c"))
    if a is None or b is None or c is None:
        return []
    if not (len(a.dims) == len(b.dims) == len(c.dims) >= 2):
        return [(_port_path(node, "a"), f"matmul tensors need the same rank >= 2 (a {len(a.dims)}, "
                 f"b {len(b.dims)}, c {len(c.dims)})")]
    (m, k), (k2, n) = a.dims[-2:], b.dims[-2:]
    if k != k2:
        return [(_port_path(node, "b"), f"inner dims differ: a is {list(a.dims)}, b is {list(b.dims)}")]
    batch = matmul_batch_dims(a.dims[:-2], b.dims[:-2])
    if batch is None:
        return [(_port_path(node, "b"),
                 f"batch dims {list(a.dims[:-2])} and {list(b.dims[:-2])} do not broadcast")]
    expect = (*batch, m, n)
    if tuple(c.dims) != expect:
        return [(_port_path(node, "c"), f"dims {list(c.dims)} do not match a @ b = {list(expect)}")]
    return []


def _matmul_flops(node: Node, graph: Graph) -> float:
    a, c = _t(node, graph, "a"), _t(node, graph, "c")
    return 2.0 * prod(c.dims) * a.dims[-1] if a and c else 0.0


def _same_dims(ports: Sequence[str], like: str) -> ShapeCheck:
    def check(node: Node, graph: Graph) -> list[tuple[str, str]]:
        ref = _t(node, graph, like)
        if ref is None:
            return []
        return [
            (_port_path(node, p), f"dims {list(t.dims)} differ from {like}'s {list(ref.dims)}")
            for p in ports if (t := _t(node, graph, p)) is not None and tuple(t.dims) != tuple(ref.dims)
        ]
    return check


def _per_channel(ports: Sequence[str], like: str) -> ShapeCheck:
    """Batchnorm parameters: one value per channel (dim 1) of ``like``."""
    def check(node: Node, graph: Graph) -> list[tuple[str, str]]:
        ref = _t(node, graph, like)
        if ref is None or len(ref.dims) < 2:
            return []
        c = ref.dims[1]
        return [
            (_port_path(node, p), f"has {prod(t.dims)} elements, expected one per channel ({c})")
            for p in ports if (t := _t(node, graph, p)) is not None and not t.is_value
            and prod(t.dims) != c
        ]
    return check


def _batchnorm_rules(node: Node, graph: Graph) -> list[tuple[str, str]]:
    """x is [N, C, ...]; epsilon and momentum are one value each; a backward's saved mean and
    inv_variance come together (hipDNN's reference recomputes both or neither)."""
    x = _t(node, graph, "x")
    if x is not None and len(x.dims) < 2:
        return [(_port_path(node, "x"), f"batchnorm needs x of rank >= 2 [N, C, ...], got {list(x.dims)}")]
    problems = one_value(node, graph, ("epsilon", "momentum"))
    if node.type == "BatchnormBackwardAttributes":
        problems += saved_pair(node, graph)
    return problems


def _all(*checks: ShapeCheck) -> ShapeCheck:
    def check(node: Node, graph: Graph) -> list[tuple[str, str]]:
        return [p for c in checks for p in c(node, graph)]
    return check


def _elementwise_flops(per_element: float, port: str) -> FlopCount:
    def flops(node: Node, graph: Graph) -> float:
        t = _t(node, graph, port)
        return per_element * prod(t.dims) if t else 0.0
    return flops


#: ReductionMode strings (data_sdk upper case, flatbuffers_sdk lower case; schema names
#: MIN_OP / MAX_OP too). NOT_SET is not a reduction.
REDUCTION_MODES = ("ADD", "MUL", "MIN", "MAX", "MIN_OP", "MAX_OP", "AMAX", "AVG", "NORM1", "NORM2",
                   "MUL_NO_ZEROS")


def _reduction_check(node: Node, graph: Graph) -> list[tuple[str, str]]:
    if "mode" not in node.params:
        return [("", "missing required field 'mode'")]
    mode = node.params["mode"]
    if not isinstance(mode, str) or mode.upper() not in REDUCTION_MODES:
        return [(_option_path(node, "mode", "node"),
                 f"unknown reduction mode {mode!r} (hipDNN: {', '.join(REDUCTION_MODES)})")]
    x, y = _t(node, graph, "in"), _t(node, graph, "out")
    if x is None or y is None:
        return []
    if len(x.dims) != len(y.dims) or any(o not in (1, i) for i, o in zip(x.dims, y.dims)):
        return [(_port_path(node, "out"),
                 f"dims {list(y.dims)} are not a reduction of {list(x.dims)} (each dim kept or 1)")]
    return []


_BN_STATS = ("mean", "inv_variance", "scale", "bias")
_CONV_OPTIONS = dict.fromkeys(("pre_padding", "post_padding", "stride", "dilation", "conv_mode"), "parameters")
#: Every pointwise option; hipDNN requires each key to be present (null when unset).
POINTWISE_OPTIONS = ("operation", "relu_lower_clip", "relu_upper_clip", "relu_lower_clip_slope",
                     "axis_tensor_uid", "swish_beta", "elu_alpha", "softplus_beta")

SPECS: dict[str, OpSpec] = {
    s.type: s
    for s in (
        OpSpec(
            "ConvolutionFwdAttributes", ("x", "w"), ("y",),
            options=_CONV_OPTIONS, check=_conv_check("x", "w", "y"), notes=_conv_notes("x", "w"),
            flops=_conv_flop_count("w", "y"),
        ),
        OpSpec(
            "ConvolutionBwdAttributes", ("dy", "w"), ("dx",),
            options=_CONV_OPTIONS, check=_conv_check("dx", "w", "dy"), notes=_conv_notes("dx", "w"),
            flops=_conv_flop_count("w", "dy"),
        ),
        OpSpec(
            "ConvolutionWrwAttributes", ("x", "dy"), ("dw",),
            options=_CONV_OPTIONS, check=_conv_check("x", "dw", "dy"), notes=_conv_notes("x", "dw"),
            flops=_conv_flop_count("dw", "dy"),
        ),
        OpSpec(
            "MatmulAttributes", ("a", "b"), ("c",),
            check=_matmul_check, flops=_matmul_flops,
        ),
        OpSpec(
            "PointwiseAttributes", ("in_0",), ("out_0",), optional_inputs=("in_1", "in_2"),
            options={k: "inputs" for k in POINTWISE_OPTIONS},
            uid_named_options=("axis_tensor_uid",),
            check=_pointwise_check, flops=_elementwise_flops(1.0, "out_0"),
        ),
        OpSpec(
            "BatchnormInferenceAttributes", ("x", *_BN_STATS), ("y",),
            check=_all(_batchnorm_rules, _same_dims(("y",), "x"), _per_channel(_BN_STATS, "x")),
            flops=_elementwise_flops(4.0, "x"),
        ),
        OpSpec(
            "BatchnormInferenceAttributesVarianceExt",
            ("x", "mean", "variance", "scale", "bias", "epsilon"), ("y",),
            check=_all(_batchnorm_rules, _same_dims(("y",), "x"),
                       _per_channel(("mean", "variance", "scale", "bias"), "x")),
            flops=_elementwise_flops(4.0, "x"),
        ),
        OpSpec(
            "BatchnormAttributes", ("x", "scale", "bias", "epsilon"), ("y",),
            optional_inputs=("prev_running_mean", "prev_running_variance", "momentum"),
            optional_outputs=("mean", "inv_variance", "next_running_mean", "next_running_variance"),
            list_inputs=("peer_stats",),
            check=_all(_batchnorm_rules, _same_dims(("y",), "x"),
                       _per_channel(("scale", "bias", "prev_running_mean", "prev_running_variance",
                                     "mean", "inv_variance", "next_running_mean",
                                     "next_running_variance"), "x")),
            flops=_elementwise_flops(8.0, "x"),
        ),
        OpSpec(
            "BatchnormBackwardAttributes", ("dy", "x", "scale"), ("dx",),
            optional_inputs=("mean", "inv_variance"),
            optional_outputs=("dscale", "dbias"),
            list_inputs=("peer_stats",),
            check=_all(_batchnorm_rules, _same_dims(("dx", "dy"), "x"),
                       _per_channel(("scale", "mean", "inv_variance", "dscale", "dbias"), "x")),
            flops=_elementwise_flops(10.0, "x"),
        ),
        OpSpec(
            "LayernormAttributes", ("x", "scale", "epsilon"), ("y",),
            optional_inputs=("bias",), optional_outputs=("mean", "inv_variance"),
            options={"normalized_dim_count": "attributes", "forward_phase": "attributes"},
            check=_all(_same_dims(("y",), "x"), norm_options_check, layernorm_forward_check),
            flops=_elementwise_flops(8.0, "x"),
        ),
        OpSpec(
            "RMSNormAttributes", ("x", "scale", "epsilon"), ("y",),
            optional_inputs=("bias",), optional_outputs=("inv_rms",),
            options={"normalized_dim_count": "attributes", "forward_phase": "attributes"},
            check=_all(_same_dims(("y",), "x"), norm_options_check, rmsnorm_forward_check),
            flops=_elementwise_flops(6.0, "x"),
        ),
        OpSpec(
            "LayernormBackwardAttributes", ("dy", "x", "scale"), ("dx",),
            optional_inputs=("mean", "inv_variance", "epsilon"), optional_outputs=("dscale", "dbias"),
            options={"normalized_dim_count": "attributes"},
            check=norm_backward_check, flops=_elementwise_flops(10.0, "x"),
        ),
        OpSpec(
            "RMSNormBackwardAttributes", ("dy", "x", "scale", "inv_rms"), ("dx",),
            optional_outputs=("dscale", "dbias"),
            check=norm_backward_check, flops=_elementwise_flops(8.0, "x"),
        ),
        *attention.SPECS,
        custom.SPEC,
        *moe.SPECS,
        *resample.SPECS,
        *blockscale.SPECS,
        OpSpec(
            "ReductionAttributes", ("in",), ("out",),
            options={"mode": "node", "is_deterministic": "node"}, layout="flat",
            check=_reduction_check, flops=_elementwise_flops(1.0, "in"),
        ),
    )
}

#: Node types hipDNN defines that hipdnn-trace loads but has no reference for yet.
#: (newest graph.fbs NodeAttributes union; docs/hipdnn-format.md section 2.0)
KNOWN_UNMODELLED: frozenset[str] = frozenset({
    "LayernormFpropAttributes",
})


def spec(node_type: str) -> OpSpec | None:
    return SPECS.get(node_type)


def node_flops(node: Node, graph: Graph, values: Mapping[int, Any] | None = None) -> float:
    """FLOPs of one node; ``values`` (input arrays by uid) lets data-dependent counts use
    the real numbers (attention's per-sequence lengths)."""
    s = SPECS.get(node.type)
    if not s or not s.flops:
        return 0.0
    if values is not None and s.flops_use_values:
        return float(s.flops(node, graph, dict(values)))   # type: ignore[call-arg]
    return float(s.flops(node, graph))


def has_flop_formula(node_type: str) -> bool:
    """Whether FLOPs of this node type are counted (a CustomOp's are not: they count as 0 in
    ``graph_flops``, which is then a lower bound)."""
    s = SPECS.get(node_type)
    return bool(s and s.flops)


def node_notes(node: Node, graph: Graph) -> list[str]:
    """Facts about a node a reader should know (defaults applied, how FLOPs were counted)."""
    s = SPECS.get(node.type)
    return list(s.notes(node, graph)) if s and s.notes else []


def graph_flops(graph: Graph, values: Mapping[int, Any] | None = None) -> float:
    """Analytical floating-point operations of one execution of the graph (with
    ``values``, counted from the bound inputs where the count depends on them)."""
    return sum(node_flops(n, graph, values) for n in graph.nodes)


def graph_bytes(graph: Graph) -> float:
    """Minimum device traffic: every non-virtual tensor a node touches, read or written once.

    Virtual tensors stay on chip in a fused kernel, so they are not counted; a real
    unfused execution moves more, which is what a low GB/s % of peak then shows.
    """
    touched = {u for n in graph.nodes for u in (*n.input_uids(), *n.output_uids())}
    total = 0.0
    for uid in touched:
        t = graph.by_uid.get(uid)
        if t is None or t.virtual or t.is_value:
            continue
        dt = DTYPES.get(t.data_type)
        total += prod(t.dims) * (dt.bits / 8 if dt else 4)
    return total

"""Convolution (forward, data gradient, weight gradient): ports, options, shape rule, FLOPs.

hipDNN's ``ConvolutionFwdAttributes`` / ``ConvolutionBwdAttributes`` / ``ConvolutionWrwAttributes``
(docs/hipdnn-format.md 2.3, 3.3): x [N, C, spatial...], w [K, C/groups, kernel...], y [N, K, out...]; the
group count follows from x's channels over w's dim 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import TYPE_CHECKING

from hipdnn_trace.graph.opspec import FlopCount, Notes, OpSpec, ShapeCheck, option_path, port_path, port_tensor
from hipdnn_trace.graph.option_types import INT_LIST, STRING

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Graph, Node


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
        x, w, y = (port_tensor(node, graph, p) for p in (x_port, w_port, y_port))
        if x is None or w is None or y is None:
            return []
        problems: list[tuple[str, str]] = []
        rank = len(x.dims)
        if rank < 3 or len(w.dims) != rank or len(y.dims) != rank:
            return [(port_path(node, x_port),
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
            return [(option_path(node, "conv_mode", "parameters"),
                     f"unknown conv_mode {mode!r} (hipDNN: {', '.join(CONV_MODES)})")]
        if any(p < 0 for p in opts["pre_padding"] + opts["post_padding"]):
            return [(f"{node.param_sections.get('pre_padding', 'parameters')}.pre_padding",
                     "padding must be >= 0")]
        c, k, cg = x.dims[1], w.dims[0], w.dims[1]
        if cg < 1 or c % cg:
            problems.append((port_path(node, w_port),
                             f"{x_port} has {c} channels, not a multiple of {w_port}'s {cg} channels per group"))
            return problems
        groups = c // cg
        if k % groups:
            problems.append((port_path(node, w_port),
                             f"{k} output channels not divisible by {groups} groups"))
        out = conv_output_dims(x.dims[2:], w.dims[2:], opts["pre_padding"], opts["post_padding"],
                               opts["stride"], opts["dilation"])
        expect = (x.dims[0], k, *out)
        if any(o < 1 for o in out):
            problems.append((port_path(node, x_port),
                             f"kernel {list(w.dims[2:])} with these pads/dilation leaves no output"))
        elif tuple(y.dims) != expect:
            problems.append((port_path(node, y_port),
                             f"dims {list(y.dims)} do not match the convolution's output "
                             f"{list(expect)} (x {list(x.dims)}, w {list(w.dims)}, {opts})"))
        return problems

    return check


def _conv_notes(x_port: str, w_port: str) -> Notes:
    def notes(node: Node, graph: Graph) -> list[str]:
        x, w = port_tensor(node, graph, x_port), port_tensor(node, graph, w_port)
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
        w, y = port_tensor(node, graph, w_port), port_tensor(node, graph, y_port)
        return conv_flops(w.dims, y.dims) if w and y else 0.0
    return flops


_CONV_OPTIONS = dict.fromkeys(("pre_padding", "post_padding", "stride", "dilation", "conv_mode"), "parameters")
_CONV_KINDS = {"pre_padding": INT_LIST, "post_padding": INT_LIST, "stride": INT_LIST, "dilation": INT_LIST,
               "conv_mode": STRING}

SPECS: tuple[OpSpec, ...] = (
    OpSpec(
        "ConvolutionFwdAttributes", ("x", "w"), ("y",),
        options=_CONV_OPTIONS, option_kinds=_CONV_KINDS,
        check=_conv_check("x", "w", "y"), notes=_conv_notes("x", "w"),
        flops=_conv_flop_count("w", "y"),
    ),
    OpSpec(
        "ConvolutionBwdAttributes", ("dy", "w"), ("dx",),
        options=_CONV_OPTIONS, option_kinds=_CONV_KINDS,
        check=_conv_check("dx", "w", "dy"), notes=_conv_notes("dx", "w"),
        flops=_conv_flop_count("w", "dy"),
    ),
    OpSpec(
        "ConvolutionWrwAttributes", ("x", "dy"), ("dw",),
        options=_CONV_OPTIONS, option_kinds=_CONV_KINDS,
        check=_conv_check("x", "dw", "dy"), notes=_conv_notes("x", "dw"),
        flops=_conv_flop_count("dw", "dy"),
    ),
)

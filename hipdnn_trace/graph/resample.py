"""Pooling (``ResampleFwdAttributes`` / ``ResampleBwdAttributes``): ports, shape rules, cost.

hipDNN's resample is N-d pooling over the spatial dims of 4-d/5-d ``[N, C, spatial...]``
tensors: a ``window`` moved by ``stride`` over x padded by ``pre_padding`` / ``post_padding``.
Modes: ``MAXPOOL`` (optional int ``index`` output: the argmax's flat spatial index in x's
plane, -1 when a zero pad wins), ``AVGPOOL_INCLUDE_PADDING`` (divide by the window size),
``AVGPOOL_EXCLUDE_PADDING`` (divide by the real elements in the window). ``padding_mode``
``ZERO_PAD`` lets a max window see pad zeros, ``NEG_INF_PAD`` does not. The backward takes dy
(and for MAXPOOL the forward's index) and writes dx. Output size
``floor((in + pre + post - window) / stride) + 1``. Sources: test_sdk
``CpuFpReferenceResampleFwd.hpp`` / ``CpuFpReferenceResampleBwd.hpp``, flatbuffers_sdk
``resample_fwd_attributes.fbs`` and ``json/Resample{Fwd,Bwd}Attributes.hpp``;
docs/hipdnn-format.md 2.9 and 3.9.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import TYPE_CHECKING

from hipdnn_trace.graph.opspec import OpSpec, option_path, port_path, port_tensor
from hipdnn_trace.graph.option_types import BOOL_OR_NULL, INT_LIST, STRING, STRING_OR_NULL

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Graph, Node

RESAMPLE_FWD = "ResampleFwdAttributes"
RESAMPLE_BWD = "ResampleBwdAttributes"
MODES = ("MAXPOOL", "AVGPOOL_INCLUDE_PADDING", "AVGPOOL_EXCLUDE_PADDING")
PADDING_MODES = ("ZERO_PAD", "NEG_INF_PAD")
_LISTS = ("pre_padding", "post_padding", "stride", "window")
_OPTIONS = {k: "attributes" for k in (*_LISTS, "resample_mode", "padding_mode", "generate_index")}
_KINDS = {**dict.fromkeys(_LISTS, INT_LIST), "resample_mode": STRING, "padding_mode": STRING_OR_NULL,
          "generate_index": BOOL_OR_NULL}
INDEX_TYPES = ("int8", "uint8", "int32", "int64")


@dataclass(frozen=True)
class Pooling:
    """One resample node's geometry and mode, as every consumer reads it."""

    mode: str
    padding_mode: str
    window: tuple[int, ...]
    stride: tuple[int, ...]
    pre: tuple[int, ...]
    post: tuple[int, ...]


def _enum(node: Node, key: str, default: str) -> str:
    return str(node.params.get(key, default) or default).strip().upper()


def pooling(node: Node) -> Pooling:
    """The node's options (call after the shape check has accepted them)."""
    return Pooling(_enum(node, "resample_mode", ""), _enum(node, "padding_mode", "ZERO_PAD"),
                   *(tuple(int(v) for v in node.params[k]) for k in ("window", "stride", "pre_padding",
                                                                      "post_padding")))


def output_dims(spatial: tuple[int, ...], p: Pooling) -> tuple[int, ...]:
    return tuple((i + a + b - w) // s + 1 for i, a, b, w, s in zip(spatial, p.pre, p.post, p.window, p.stride))


def _check(node: Node, graph: Graph) -> list[tuple[str, str]]:
    forward = node.type == RESAMPLE_FWD
    x, y = (port_tensor(node, graph, p) for p in (("x", "y") if forward else ("dx", "dy")))
    if x is None or y is None:
        return []
    if len(x.dims) not in (4, 5) or len(y.dims) != len(x.dims):
        return [(port_path(node, "x" if forward else "dx"),
                 f"pooling needs 4-d or 5-d [N, C, spatial...] tensors of one rank, got {list(x.dims)} and "
                 f"{list(y.dims)}")]
    nsp = len(x.dims) - 2
    for key in _LISTS:
        value = node.params.get(key)
        if not isinstance(value, list) or len(value) != nsp or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value):
            return [(option_path(node, key, "attributes"), f"must be a list of {nsp} integers, got {value!r}")]
    mode, pad_mode = _enum(node, "resample_mode", ""), _enum(node, "padding_mode", "ZERO_PAD")
    if mode not in MODES:
        return [(option_path(node, "resample_mode", "attributes"),
                 f"unknown resample_mode {node.params.get('resample_mode')!r} (pooling modes: {', '.join(MODES)})")]
    if pad_mode not in PADDING_MODES:
        return [(option_path(node, "padding_mode", "attributes"),
                 f"unknown padding_mode {node.params.get('padding_mode')!r} (hipDNN: {', '.join(PADDING_MODES)})")]
    p = pooling(node)
    if min(p.window) < 1 or min(p.stride) < 1 or min(p.pre + p.post) < 0:
        return [(option_path(node, "window", "attributes"), "window and stride must be >= 1, padding >= 0")]
    want = (*x.dims[:2], *output_dims(tuple(x.dims[2:]), p))
    if min(want[2:]) < 1:
        return [(option_path(node, "window", "attributes"), f"window {list(p.window)} is larger than the padded "
                 f"input {list(x.dims[2:])}")]
    problems = []
    if tuple(y.dims) != want:
        problems.append((port_path(node, "y" if forward else "dy"),
                         f"dims {list(y.dims)} do not match the pooled size {list(want)} "
                         f"(floor((in + pre + post - window) / stride) + 1)"))
    index = port_tensor(node, graph, "index")
    if index is not None:
        if mode != "MAXPOOL":
            problems.append((port_path(node, "index"), f"an index belongs to MAXPOOL, not {mode}"))
        elif tuple(index.dims) != tuple(y.dims):
            problems.append((port_path(node, "index"), f"dims {list(index.dims)} differ from "
                             f"{'y' if forward else 'dy'}'s {list(y.dims)}"))
        elif index.data_type not in INDEX_TYPES:
            problems.append((port_path(node, "index"), f"must be an integer type, is {index.data_type}"))
        elif index.data_type in ("int8", "uint8") and prod(x.dims[2:]) > 127:
            problems.append((port_path(node, "index"), f"{index.data_type} cannot hold flat indices up to "
                             f"{prod(x.dims[2:]) - 1}"))
    elif not forward and mode == "MAXPOOL":
        problems.append((port_path(node, "index"), "MAXPOOL backward needs the forward's index tensor"))
    return problems


def flops(node: Node, graph: Graph) -> float:
    """One operation per window element per output (compare or add), plus the divide."""
    y = port_tensor(node, graph, "y" if node.type == RESAMPLE_FWD else "dy")
    window = node.params.get("window")
    if y is None or not isinstance(window, list):
        return 0.0
    return float(prod(y.dims)) * (prod(window) + 1)


def _notes(node: Node, graph: Graph) -> list[str]:
    try:
        p = pooling(node)
    except (KeyError, TypeError, ValueError):
        return []
    note = (f"{p.mode} window {list(p.window)} stride {list(p.stride)} pad {list(p.pre)}/{list(p.post)}, "
            f"{p.padding_mode}")
    if p.mode == "MAXPOOL" and port_tensor(node, graph, "index") is not None:
        note += "; index = flat spatial index of the max in x's plane (-1 when a zero pad wins)"
    return [note]


SPECS = (
    OpSpec(RESAMPLE_FWD, ("x",), ("y",), optional_outputs=("index",), options=_OPTIONS, option_kinds=_KINDS,
           check=_check, flops=flops, notes=_notes),
    OpSpec(RESAMPLE_BWD, ("dy",), ("dx",), optional_inputs=("index",), options=_OPTIONS, option_kinds=_KINDS,
           check=_check, flops=flops, notes=_notes),
)

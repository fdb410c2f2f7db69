"""Block-scale quantization (``BlockScaleQuantizeAttributes`` / ``BlockScaleDequantizeAttributes``).

MX and NVFP4 formats as hipDNN graphs state them: a low-precision tensor plus one scale per
block of ``block_size`` consecutive elements. Quantize (x -> y, scale) blocks one ``axis``
(default: the last) and stores ``scale = amax(block) / max(y type)`` **rounded up** to the
scale type, then ``y = clamp(x / scale)`` rounded to nearest even; a zero block has y = 0.
Dequantize (x, scale -> y) maps ``block_size`` (a list) to x's trailing dims and computes
``y = x * scale`` (``is_negative_scale``: ``x * 2^-scale``). Sources: test_sdk
``CpuFpReferenceBlockScaleQuantize.hpp`` / ``CpuFpReferenceBlockScaleDequantize.hpp``,
flatbuffers_sdk ``block_scale_*_attributes`` schemas; where hipDNN's rule and the OCP MX
spec's scale rule differ, docs/hipdnn-format.md 3.12 says which we follow and why.
"""

from __future__ import annotations

from math import ceil, prod
from typing import TYPE_CHECKING, Any

from hipdnn_trace.graph.opspec import OpSpec, option_path, port_path, port_tensor
from hipdnn_trace.graph.option_types import BOOL_OR_NULL, INT, INT_OR_INT_LIST, INT_OR_NULL

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Graph, Node

QUANTIZE = "BlockScaleQuantizeAttributes"
DEQUANTIZE = "BlockScaleDequantizeAttributes"
#: hipDNN's quantize reference: element types of x / y and the scale types (IS_VALID_*_TYPE_V);
#: fp8_e4m3 scales (NVFP4) go beyond hipDNN's list with the same rule (docs/hipdnn-format.md 3.12).
ELEMENT_TYPES = ("float", "half", "bfloat16", "fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "fp8_e4m3", "fp8_e4m3_fnuz",
                 "fp8_e5m2", "fp8_e5m2_fnuz", "int8", "uint8", "int32")
SCALE_TYPES = ("float", "half", "bfloat16", "fp8_e8m0", "fp8_e4m3")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def quantize_axis(node: Node, graph: Graph) -> int:
    """The blocked axis of a quantize node (hipDNN's default: the last)."""
    x = port_tensor(node, graph, "x")
    axis = node.params.get("axis")
    rank = len(x.dims) if x is not None else 1
    return rank - 1 if axis is None else (axis + rank if axis < 0 else axis)


def dequantize_blocks(node: Node, graph: Graph) -> tuple[int, ...]:
    """Block size per dim of x: hipDNN maps the block_size list onto x's trailing dims."""
    x = port_tensor(node, graph, "x")
    sizes = node.params.get("block_size") or []
    sizes = [sizes] if _int(sizes) else list(sizes)
    rank = len(x.dims)
    eff = [1] * rank
    for i, b in enumerate(sizes[-rank:] if len(sizes) > rank else sizes):
        eff[rank - len(sizes) + i] = int(b)
    return tuple(eff)


def _quantize_check(node: Node, graph: Graph) -> list[tuple[str, str]]:
    x, y, scale = (port_tensor(node, graph, p) for p in ("x", "y", "scale"))
    if x is None or y is None or scale is None:
        return []
    block, axis = node.params.get("block_size"), node.params.get("axis")
    if not _int(block) or block < 1:
        return [(option_path(node, "block_size", "node"), f"must be a positive integer, got {block!r}")]
    if axis is not None and (not _int(axis) or not -len(x.dims) <= axis < len(x.dims)):
        return [(option_path(node, "axis", "node"), f"must be an axis of x's {len(x.dims)} dims, got {axis!r}")]
    if not isinstance(node.params.get("transpose", False), bool):
        return [(option_path(node, "transpose", "node"), "must be true or false")]
    problems = []
    if tuple(y.dims) != tuple(x.dims):
        problems.append((port_path(node, "y"), f"dims {list(y.dims)} differ from x's {list(x.dims)}"))
    a = quantize_axis(node, graph)
    want = tuple(ceil(d / block) if i == a else d for i, d in enumerate(x.dims))
    if tuple(scale.dims) != want:
        problems.append((port_path(node, "scale"), f"dims {list(scale.dims)} must be {list(want)} (x's dims with "
                         f"axis {a} divided by block_size {block}, rounded up)"))
    for port, t, allowed in (("x", x, ELEMENT_TYPES), ("y", y, ELEMENT_TYPES), ("scale", scale, SCALE_TYPES)):
        if t.data_type not in allowed:
            problems.append((port_path(node, port), f"data type {t.data_type} is not one block-scale quantization "
                             f"takes ({', '.join(allowed)})"))
    return problems


def _dequantize_check(node: Node, graph: Graph) -> list[tuple[str, str]]:
    x, scale, y = (port_tensor(node, graph, p) for p in ("x", "scale", "y"))
    if x is None or scale is None or y is None:
        return []
    sizes = node.params.get("block_size")
    sizes = [sizes] if _int(sizes) else sizes
    if (not isinstance(sizes, list) or not sizes or not all(_int(b) and b >= 1 for b in sizes)
            or len(sizes) > len(x.dims)):
        return [(option_path(node, "block_size", "node"), f"must be a list of 1..{len(x.dims)} positive integers "
                 f"(one per trailing dim of x), got {node.params.get('block_size')!r}")]
    if not isinstance(node.params.get("is_negative_scale", False), bool):
        return [(option_path(node, "is_negative_scale", "node"), "must be true or false")]
    problems = []
    if tuple(y.dims) != tuple(x.dims):
        problems.append((port_path(node, "y"), f"dims {list(y.dims)} differ from x's {list(x.dims)}"))
    want = tuple(ceil(d / b) for d, b in zip(x.dims, dequantize_blocks(node, graph)))
    if tuple(scale.dims) != want:
        problems.append((port_path(node, "scale"), f"dims {list(scale.dims)} must be {list(want)} (ceil of x's "
                         f"dims over the block sizes {sizes} of its trailing dims; same rank as x)"))
    return problems


def _flops(per_element: float):
    def flops(node: Node, graph: Graph) -> float:
        x = port_tensor(node, graph, "x")
        return per_element * prod(x.dims) if x is not None else 0.0
    return flops


def _notes(node: Node, graph: Graph) -> list[str]:
    x, scale = port_tensor(node, graph, "x"), port_tensor(node, graph, "scale")
    if x is None or scale is None:
        return []
    if node.type == QUANTIZE:
        note = (f"blocks of {node.params.get('block_size')} along axis {quantize_axis(node, graph)}; scale = "
                f"amax / max({port_tensor(node, graph, 'y').data_type}) rounded up to {scale.data_type}")
        if node.params.get("transpose"):
            note += "; transpose only changes the device layout of y, not its values (hipDNN's reference ignores it)"
        return [note]
    return [f"y = x * scale{' (2^-scale)' if node.params.get('is_negative_scale') else ''}, block sizes "
            f"{list(dequantize_blocks(node, graph))} per dim"]


SPECS = (
    OpSpec(QUANTIZE, ("x",), ("y", "scale"), options={"block_size": "node", "axis": "node", "transpose": "node"},
           option_kinds={"block_size": INT, "axis": INT_OR_NULL, "transpose": BOOL_OR_NULL},
           check=_quantize_check, flops=_flops(3.0), notes=_notes),
    OpSpec(DEQUANTIZE, ("x", "scale"), ("y",), options={"block_size": "node", "is_negative_scale": "node"},
           option_kinds={"block_size": INT_OR_INT_LIST, "is_negative_scale": BOOL_OR_NULL},
           check=_dequantize_check, flops=_flops(1.0), notes=_notes),
)

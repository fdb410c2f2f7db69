"""Speed of light per graph: the lower bound of its time on a GPU with known peaks.

``time >= max(sum over nodes of FLOPs / peak of the node's class, bytes / HBM bandwidth)``, with the FLOPs
and the minimum bytes of the graph's own model (``graph.ops``, what ``inspect`` shows). A node's class is
the type its math units are fed: the data type of its largest non-virtual floating (or 8-bit integer)
input (ties: the wider type), the graph's io type when every input is virtual (a fused chain's inner
node), so a half matmul that accumulates in float counts at the fp16 tensor-core peak, and an attention
backward whose softmax statistics are float still counts at its bf16/fp16 operands' peak. The peak is
the fastest unit's dense figure, so the bound holds whichever unit a library picks; a type the GPU has no
peak for falls back to the next wider type it has (docs/speed-of-light.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hipdnn_trace.device.peaks import Peaks, resolve
from hipdnn_trace.graph import ops
from hipdnn_trace.graph.model import Graph, Node

#: hipDNN data type -> peak class; types not listed (indices, masks, scales) do not feed the math units
DTYPE_CLASS: dict[str, str] = {
    "double": "fp64", "float": "fp32", "half": "fp16", "bfloat16": "bf16",
    "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "fp8_e4m3_fnuz": "fp8", "fp8_e5m2_fnuz": "fp8",
    "mxfp8": "fp8", "mxbfp8": "fp8", "fp6_e2m3": "fp6", "fp6_e3m2": "fp6", "mxfp6": "fp6",
    "fp4_e2m1": "fp4", "mxfp4": "fp4", "int8": "int8", "uint8": "int8", "int4": "int8",
}
#: classes from widest (slowest) to narrowest: a node with two input classes runs at the wider one's rate
WIDTH_ORDER = ("fp64", "fp32", "tf32", "bf16", "fp16", "int8", "fp8", "fp6", "fp4")
#: where a GPU has no peak for a class, the next wider class it is computed in
FALLBACK: dict[str, tuple[str, ...]] = {
    "fp4": ("fp6", "fp8", "fp16"), "fp6": ("fp8", "fp16"), "fp8": ("fp16",), "int8": ("fp16",),
    "fp16": ("fp32",), "bf16": ("fp32",), "tf32": ("fp32",), "fp32": ("fp64",), "fp64": (),
}


@dataclass(frozen=True)
class SpeedOfLight:
    ms: float               # the lower bound: max(compute_ms, memory_ms)
    bound: str              # "compute" | "memory"
    compute_ms: float
    memory_ms: float
    classes: dict[str, str]  # class of the graph's FLOPs -> class whose peak was used

    def record(self) -> dict[str, Any]:
        return {"ms": self.ms, "bound": self.bound, "compute_ms": self.compute_ms,
                "memory_ms": self.memory_ms, "peak_classes": dict(self.classes)}


def node_class(node: Node, graph: Graph) -> str:
    """The class whose peak a node's FLOPs are counted at (see the module's docstring): the operands'
    type, not a small side input's (float statistics, biases and scales do not feed the math units'
    main path; counting an attention backward at the fp32 rate made its bound 6.6x its measured time)."""
    found: list[tuple[int, str]] = []
    for uid in node.input_uids():
        t = graph.by_uid.get(uid)
        if t is not None and not t.virtual and not t.is_value and t.data_type in DTYPE_CLASS:
            found.append((math.prod(t.dims), DTYPE_CLASS[t.data_type]))
    if not found:
        for name in (graph.io_data_type, node.compute_data_type, graph.compute_data_type):
            if name in DTYPE_CLASS:
                return DTYPE_CLASS[name]
        return "fp32"
    largest = max(n for n, _ in found)
    return min((cls for n, cls in found if n == largest), key=WIDTH_ORDER.index)


def flops_by_class(graph: Graph) -> dict[str, float]:
    """The graph's analytical FLOPs split by the class they run at."""
    out: dict[str, float] = {}
    for node in graph.nodes:
        flops = ops.node_flops(node, graph)
        if flops:
            cls = node_class(node, graph)
            out[cls] = out.get(cls, 0.0) + flops
    return out


def peak_for(peaks: Peaks, cls: str) -> tuple[str, float] | None:
    """The class and TFLOPS a class's FLOPs are bounded by on this GPU (None: no peak at all)."""
    for candidate in (cls, *FALLBACK.get(cls, ())):
        if candidate in peaks.tflops:
            return candidate, peaks.tflops[candidate]
    return None


def speed_of_light(graph: Graph, peaks: Peaks, flops: float | None = None,
                   nbytes: float | None = None) -> SpeedOfLight | None:
    """The graph's lower-bound time on ``peaks``. ``flops``: the run's own count where it depends on the
    inputs (attention's lengths): the per-class split is scaled to it. None when a class has no peak."""
    split = flops_by_class(graph)
    total = sum(split.values())
    scale = flops / total if flops is not None and total else 1.0
    compute_s, used = 0.0, {}
    for cls, count in split.items():
        found = peak_for(peaks, cls)
        if found is None:
            return None
        used[cls] = found[0]
        compute_s += count * scale / (found[1] * 1e12)
    memory_s = (ops.graph_bytes(graph) if nbytes is None else nbytes) / (peaks.hbm_tbs * 1e12)
    compute_ms, memory_ms = compute_s * 1e3, memory_s * 1e3
    bound = "compute" if compute_ms >= memory_ms else "memory"
    return SpeedOfLight(max(compute_ms, memory_ms), bound, compute_ms, memory_ms, used)


def run_block(meta: dict[str, Any]) -> tuple[dict[str, Any], Peaks | None]:
    """run.json's ``speed_of_light`` block (what was asked, the peaks used and their source, or why
    none) and the peaks, from ``--peaks`` (kept in the block as ``asked``) and the run's GPU name."""
    block = meta.get("speed_of_light") if isinstance(meta.get("speed_of_light"), dict) else {}
    asked = block.get("asked")
    gpu = meta.get("gpu") if isinstance(meta.get("gpu"), dict) else {}
    found, note = resolve(asked, gpu.get("name"))
    return {"asked": asked, "note": note, "peaks": found.record() if found else None}, found


def peaks_of(meta: dict[str, Any]) -> Peaks | None:
    """The peaks a finished run recorded in run.json (None when it had none)."""
    block = meta.get("speed_of_light") if isinstance(meta, dict) else None
    rec = block.get("peaks") if isinstance(block, dict) else None
    if not isinstance(rec, dict) or not isinstance(rec.get("tflops"), dict) or not rec.get("hbm_tbs"):
        return None
    try:
        found = Peaks(name=str(rec.get("name")), tflops={str(k): float(v) for k, v in rec["tflops"].items()},
                      hbm_tbs=float(rec["hbm_tbs"]), source=str(rec.get("source", "")),
                      url=str(rec.get("url", "")), label=str(rec.get("label", "")),
                      origin=str(rec.get("origin", "")))
    except (TypeError, ValueError):
        return None
    # an edited run.json's inf or negative peak would give a speed of light of 0 ms: none instead
    peaks = [found.hbm_tbs, *found.tflops.values()]
    return found if all(0 < v < math.inf for v in peaks) else None

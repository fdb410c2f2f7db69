"""How long one float64 evaluation of a graph takes at least, and the refusal beyond a limit.

The float64 reference runs on the CPU, where a GPU-sized graph can take hours (a 66 TFLOP conv
started a two-hour run with no word), or on a GPU (``--reference-device``). The estimate is the
graph's analytical FLOPs at the float64 matmul rate of the device the reference runs on: BLAS is the
fastest thing the reference does, so the estimate is a lower bound and a refusal never stops a graph
that would have finished in time. The rate is the machine's one kept measurement (``rate.py``), so
``inspect``, ``run`` and run's children judge a graph near the limit alike.
"""

from __future__ import annotations

from hipdnn_trace.backends.reference import rate as _rate
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.graph.ops import graph_flops

#: default of ``--max-reference-seconds``: one float64 evaluation longer than this is refused
DEFAULT_MAX_REFERENCE_S = 600.0
#: a graph under ``limit * this`` FLOPs fits any plausible CPU (0.1 GFLOP/s): no measurement needed
_SURELY_FAST_RATE = 1e8


def float64_rate(device: str = "cpu") -> float:
    """FLOP/s of a float64 matmul where the reference runs (``--reference-device``): the machine's
    kept measurement, or ``HIPDNN_TRACE_FLOAT64_GFLOPS`` on the CPU (``rate.py``)."""
    return _rate.float64_rate(device).flops_per_s


def reference_seconds(graph: Graph, device: str = "cpu") -> tuple[float, float, float]:
    """(seconds, flops, rate): the least time one float64 evaluation of ``graph`` takes on ``device``."""
    flops = graph_flops(graph)
    rate = float64_rate(device)
    return flops / rate, flops, rate


def surely_fast(graph: Graph, limit_s: float) -> bool:
    """True when no plausible CPU takes ``limit_s`` for ``graph`` (or there is no limit): nothing to measure."""
    return limit_s <= 0 or graph_flops(graph) <= limit_s * _SURELY_FAST_RATE


def time_refusal(graph: Graph, limit_s: float, *, validating: bool, device: str = "cpu") -> str | None:
    """Why the float64 reference of ``graph`` is not started (one line), or None.

    ``limit_s`` 0 means no limit; ``validating`` adds the hint that ``--validate none`` skips the
    reference (not so when the reference is the backend being run); ``device`` is where the
    reference runs (``cuda``: torch float64 on the GPU, measured there).
    """
    if surely_fast(graph, limit_s):
        return None
    seconds, flops, rate = reference_seconds(graph, device)
    if seconds <= limit_s:
        return None
    skip = " or skip the reference with --validate none" if validating else ""
    where = "GPU" if device == "cuda" else "CPU"
    origin = _rate.float64_rate(device).origin
    return (f"the float64 reference needs at least {_duration(seconds)} on this {where} ({_amount(flops)} at "
            f"the {rate / 1e9:.3g} GFLOP/s float64 matmul rate {origin}), over the "
            f"--max-reference-seconds limit of {limit_s:g} s; raise it (0 = no limit){skip}")


def _amount(flops: float) -> str:
    return f"{flops / 1e12:.3g} TFLOP" if flops >= 1e12 else f"{flops / 1e9:.3g} GFLOP"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 7200:   # 3 figures: near a 600 s limit "10.2 min", never a bare "10 min" over it
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.1f} h"

"""How long one float64 evaluation of a graph takes at least, and the refusal beyond a limit.

The float64 reference runs on the CPU, where a GPU-sized graph can take hours (a 66 TFLOP conv
started a two-hour run with no word), or on a GPU (``--reference-device``). The estimate is the
graph's analytical FLOPs at the float64 matmul rate measured where the reference runs: BLAS is the
fastest thing the reference does, so the estimate is a lower bound and a refusal never stops a graph
that would have finished in time.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from hipdnn_trace.graph.model import Graph
from hipdnn_trace.graph.ops import graph_flops

#: default of ``--max-reference-seconds``: one float64 evaluation longer than this is refused
DEFAULT_MAX_REFERENCE_S = 600.0
#: a graph under ``limit * this`` FLOPs fits any plausible CPU (0.1 GFLOP/s): no measurement needed
_SURELY_FAST_RATE = 1e8
_CALIBRATION_N = 768
_CALIBRATION_N_GPU = 2048


@functools.lru_cache(maxsize=2)
def float64_rate(device: str = "cpu") -> float:
    """FLOP/s of a float64 matmul where the reference runs (``--reference-device``): the faster of
    two products (768^3 on the CPU, about 20 ms; 2048^3 on a GPU), so a busy moment does not
    inflate the estimate. Measured once per process and device."""
    if device == "cuda":
        return _cuda_float64_rate()
    a = np.random.default_rng(0).standard_normal((_CALIBRATION_N, _CALIBRATION_N))
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - t0)
    return 2 * _CALIBRATION_N**3 / max(best, 1e-9)


def _cuda_float64_rate() -> float:
    """torch float64 matmul FLOP/s on the current GPU (the reference's ``cuda`` namespace)."""
    import torch

    n = _CALIBRATION_N_GPU
    a = torch.randn(n, n, dtype=torch.float64, device="cuda")
    a @ a   # first call: library loading and autotuning are not the rate
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        a @ a
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / max(best, 1e-9)


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
    return (f"the float64 reference needs at least {_duration(seconds)} on this {where} ({_amount(flops)} at "
            f"the {rate / 1e9:.3g} GFLOP/s float64 matmul rate measured here), over the "
            f"--max-reference-seconds limit of {limit_s:g} s; raise it (0 = no limit){skip}")


def _amount(flops: float) -> str:
    return f"{flops / 1e12:.3g} TFLOP" if flops >= 1e12 else f"{flops / 1e9:.3g} GFLOP"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"

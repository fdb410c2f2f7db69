"""Where the per-iteration host cost of the measurement loop goes, one ingredient at a time.

Run on an NVIDIA GPU: ``python benchmarks/loop_cost_probe.py [graph.json]``. Prints us/iteration
(median of 5 interleaved rounds of N) for a bare ``execute(); synchronize()`` loop and for ``run_loop`` with the
pieces the CLI's default path adds switched on one by one: the kernel clock (CUPTI), NVTX markers,
NVML clock sampling, the isolated child's reporting markers; then the old staged default. Used
to find what made the CLI path cost twice the bare loop (docs/benchmarks.md).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from hipdnn_trace import backends
from hipdnn_trace.backends.base import RunOptions
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.bench.isolation import _ReportingMarkers
from hipdnn_trace.bench.loop import LoopSettings, run_loop
from hipdnn_trace.device import cupti_activity
from hipdnn_trace.device.kernel_clock import KernelClock
from hipdnn_trace.device.nvml import ClockSampler
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.markers import Markers, select

N = 3000


ROUNDS = 5


def interleaved_us(variants: list[tuple[str, object]]) -> list[tuple[str, float]]:
    """Median over ROUNDS of us/iteration, the variants interleaved within each round so a drifting
    GPU clock or a busy host shares itself between them."""
    for _, fn in variants:
        fn(200)
    times: dict[str, list[float]] = {name: [] for name, _ in variants}
    for _ in range(ROUNDS):
        for name, fn in variants:
            t0 = time.perf_counter_ns()
            fn(N)
            times[name].append((time.perf_counter_ns() - t0) / N / 1e3)
    return [(name, statistics.median(times[name])) for name, _ in variants]


def main() -> int:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "graphs/pointwise/relu_clip_fp16.json")
    graph = load_bytes(path.read_bytes(), str(path))
    s = backends.get("cudnn").prepare(graph, None, RunOptions(timing="staged"))
    s.bind(make_inputs(graph, 0))
    nvtx = select("nvtx", vendor="nvidia")
    sampler = ClockSampler(0)

    def bare(n):
        for _ in range(n):
            s.execute(); s.synchronize()

    def bare_cupti(n):
        sub = cupti_activity.Subscriber()
        cupti_activity.SINK.subscribe(sub)
        try:
            bare(n)
        finally:
            cupti_activity.SINK.unsubscribe(sub)

    def loop(markers, samplers=(), clock=True, on_iteration=None):
        def fn(n):
            run_loop(s, LoopSettings(warmup=0, iters=n), markers, samplers=list(samplers),
                     on_iteration=on_iteration, kernel_clock=KernelClock() if clock else None)
        return fn

    last = [0.0]

    def on_iteration(i):
        now = time.monotonic()
        if now - last[0] >= 0.2:
            last[0] = now

    reporting = _ReportingMarkers(nvtx, lambda kind, value: None)
    rows = interleaved_us([
        ("bare execute+sync", bare),
        ("bare + CUPTI kernel activity", bare_cupti),
        ("run_loop: kernel clock, no markers", loop(Markers())),
        ("+ NVTX markers", loop(nvtx)),
        ("+ NVML clock sampler", loop(nvtx, [sampler])),
        ("+ isolated child's markers and progress", loop(reporting, [sampler], on_iteration=on_iteration)),
        ("run_loop: staged events, no kernel clock", loop(nvtx, [sampler], clock=False)),
    ])
    s.close()
    for name, us in rows:
        print(f"| {name} | {us:.2f} | {us / rows[0][1]:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

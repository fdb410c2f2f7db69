"""Where the per-iteration host cost of the measurement loop goes, one ingredient at a time.

Run on an NVIDIA GPU: ``python benchmarks/loop_cost_probe.py [graph.json]``. Prints us/iteration
(best of 3 rounds of N) for a bare ``execute(); synchronize()`` loop and for ``run_loop`` with the
pieces the CLI's default path adds switched on one by one: the kernel clock (CUPTI), NVTX markers,
NVML clock sampling, the isolated child's reporting markers; then the old staged default. Used
to find what made the CLI path cost twice the bare loop (docs/benchmarks.md).
"""

from __future__ import annotations

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


def best_us(fn) -> float:
    fn(200)
    out = float("inf")
    for _ in range(3):
        t0 = time.perf_counter_ns()
        fn(N)
        out = min(out, (time.perf_counter_ns() - t0) / N / 1e3)
    return out


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
    rows = [
        ("bare execute+sync", best_us(bare)),
        ("bare + CUPTI kernel activity", best_us(bare_cupti)),
        ("run_loop: kernel clock, no markers", best_us(loop(Markers()))),
        ("+ NVTX markers", best_us(loop(nvtx))),
        ("+ NVML clock sampler", best_us(loop(nvtx, [sampler]))),
        ("+ isolated child's markers and progress", best_us(loop(reporting, [sampler], on_iteration=on_iteration))),
        ("run_loop: staged events, no kernel clock", best_us(loop(nvtx, [sampler], clock=False))),
    ]
    s.close()
    for name, us in rows:
        print(f"| {name} | {us:.2f} | {us / rows[0][1]:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

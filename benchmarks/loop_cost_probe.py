"""Where the per-iteration host cost of the measurement loop goes, one ingredient at a time.

Run on an NVIDIA GPU: ``python benchmarks/loop_cost_probe.py [graph.json]``. Prints us/iteration for a
bare ``execute(); synchronize()`` loop and for the same loop plus each piece the harness adds (events,
the staged hold, NVTX, the host clock, CUPTI kernel activity, the whole ``run_loop``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from hipdnn_trace import backends
from hipdnn_trace.backends.base import RunOptions
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.bench.loop import LoopSettings, run_loop
from hipdnn_trace.device import cuda
from hipdnn_trace.device.clock import now_ns
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.markers import select

N = 3000


def per_iter(fn, n: int = N) -> float:
    fn(200)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter_ns()
        fn(n)
        best = min(best, (time.perf_counter_ns() - t0) / n / 1e3)
    return best


def main() -> int:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "graphs/pointwise/relu_clip_fp16.json")
    graph = load_bytes(path.read_bytes(), str(path))
    inputs = make_inputs(graph, 0)
    s = backends.get("cudnn").prepare(graph, None, RunOptions(timing="events"))
    s.bind(inputs)
    st = cuda.StagedEventTimer(s.stream.handle)
    ev = cuda.EventTimer(s.stream.handle)
    nvtx = select("nvtx", vendor="nvidia")

    def bare(n):
        for _ in range(n):
            s.execute(); s.synchronize()

    def events(n):
        for _ in range(n):
            ev.start(); s.execute(); ev.stop(); s.synchronize(); ev.elapsed_ms()

    def events_noread(n):
        for _ in range(n):
            ev.start(); s.execute(); ev.stop(); s.synchronize()

    def staged(n):
        for _ in range(n):
            st.start(); s.execute(); st.stop(); s.synchronize(); st.elapsed_ms()

    def clock(n):
        for _ in range(n):
            a = now_ns(); s.execute(); s.synchronize(); b = now_ns()

    def markers(n):
        for i in range(n):
            nvtx.push_iteration(i); s.execute(); s.synchronize(); nvtx.pop()

    rows = [("bare execute+sync", per_iter(bare)), ("+ events (read each)", per_iter(events)),
            ("+ events (no read)", per_iter(events_noread)), ("+ staged hold + events", per_iter(staged)),
            ("+ host clock x2", per_iter(clock)), ("+ nvtx push/pop", per_iter(markers))]
    s.timer = st
    settings = LoopSettings(warmup=10, iters=N)
    t0 = time.perf_counter_ns(); run_loop(s, settings, nvtx); rows.append(("run_loop staged+nvtx", (time.perf_counter_ns() - t0) / (N + 10) / 1e3))
    try:
        from cupti import cupti
        recs = []
        cupti.activity_register_callbacks(lambda: (16 << 20, 0), lambda acts: recs.extend(acts))
        cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
        rows.append(("bare + CUPTI kernel activity", per_iter(bare)))
        rows.append(("staged + CUPTI", per_iter(staged)))
        t0 = time.perf_counter_ns(); run_loop(s, settings, nvtx); rows.append(("run_loop staged+nvtx+CUPTI", (time.perf_counter_ns() - t0) / (N + 10) / 1e3))
        cupti.activity_flush_all(1)
        print("cupti records", len(recs), "names", sorted({a.name for a in recs if a.kind == cupti.ActivityKind.CONCURRENT_KERNEL})[:5])
        print("cupti api:", [n for n in dir(cupti) if "external" in n.lower() or "dropped" in n.lower() or "timestamp" in n.lower()])
        cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)
    except Exception as exc:  # noqa: BLE001
        print("cupti:", exc)
    for name, us in rows:
        print(f"| {name} | {us:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

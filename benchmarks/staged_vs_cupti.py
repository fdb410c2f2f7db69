"""Staged and plain event timing against CUPTI's kernel durations, on one session per graph.

The minimal form of ``timing_fidelity.py`` (no polars, no do_bench, no cold cache): for
each graph, a session times 10 warmup + 100 iterations with plain events (and a bare
``execute(); synchronize()`` loop for the loop cost), traces a further 100 with the
CUPTI activity API (kernel sum per iteration), then a staged-timing session times 100
more. This is the script behind the "staged timing vs CUPTI" table in docs/benchmarks.md.

Run on the GPU machine: ``python benchmarks/staged_vs_cupti.py`` (prints a Markdown table).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from hipdnn_trace import backends
from hipdnn_trace.backends.base import RunOptions
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.graph.load import load_bytes

GRAPHS = Path(__file__).resolve().parents[1] / "graphs"
JOBS = [("cudnn", "perf/conv/resnet50_res4_3x3_256_fwd_fp16.json"),
        ("cudnn", "perf/matmul/gemm_4096x4096x4096_fp16.json"),
        ("cudnn", "perf/norm/llm_layernorm_8x2048x4096_fp16.json"), ("cudnn", "conv/conv_fwd_nhwc_stride2_fp16.json"),
        ("cudnn", "pointwise/relu_clip_fp16.json"), ("torch", "fused/matmul_bias_gelu_fp16.json"),
        ("torch", "perf/conv/resnet50_res4_3x3_256_fwd_fp16.json")]
WARMUP, ITERS = 10, 100


class _Kernels:
    """CUPTI kernel records (name, start, end) collected while enabled."""

    def __init__(self) -> None:
        from cupti import cupti

        self.cupti = cupti
        self.kind = cupti.ActivityKind.CONCURRENT_KERNEL
        self.records: list[tuple[str, int, int]] = []
        cupti.activity_register_callbacks(lambda: (16 << 20, 0), self._completed)

    def _completed(self, activities: list) -> None:
        self.records.extend((a.name, int(a.start), int(a.end)) for a in activities if a.kind == self.kind)


def _loop(session, n: int) -> tuple[list[float], float]:
    t = session.timer
    out = []
    t0 = time.perf_counter()
    for _ in range(n):
        session.prepare_iteration()
        t.start()
        session.execute()
        t.stop()
        session.synchronize()
        out.append(t.elapsed_ms())
    return out, (time.perf_counter() - t0) / n * 1e6


def _bare_us(session, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        session.execute()
        session.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def main() -> int:
    trace = _Kernels()
    print("| graph | backend | kernels/iter | CUPTI kernel sum (us) | staged (us) | staged - CUPTI | "
          "events (us) | timer | loop (us/iter) | bare (us/iter) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for backend, relative in JOBS:
        graph = load_bytes((GRAPHS / relative).read_bytes(), relative)
        inputs = make_inputs(graph, 0)
        b = backends.get(backend)
        s = b.prepare(graph, None, RunOptions(timing="events"))
        try:
            s.bind(inputs)
            _loop(s, WARMUP)
            events, loop_us = _loop(s, ITERS)
            bare_us = _bare_us(s, ITERS)
            trace.cupti.activity_enable(trace.kind)
            trace.cupti.activity_flush_all(1)
            trace.records.clear()
            _loop(s, ITERS)
            trace.cupti.activity_flush_all(1)
            trace.cupti.activity_disable(trace.kind)
        finally:
            s.close()
        rows = sorted(trace.records, key=lambda r: r[1])
        per = len(rows) // ITERS
        sums = [sum(e - st for _, st, e in rows[i * per:(i + 1) * per]) / 1e3 for i in range(ITERS)] if per else []
        cupti_us = float(np.median(sums)) if sums else float("nan")
        s = b.prepare(graph, None, RunOptions(timing="staged"))
        try:
            s.bind(inputs)
            _loop(s, WARMUP)
            staged, _ = _loop(s, ITERS)
            info = s.info()
        finally:
            s.close()
        st, ev = float(np.median(staged)) * 1e3, float(np.median(events)) * 1e3
        timer = info.get("timer", "?") + (f" ({info['timing_fallback']})" if info.get("timing_fallback") else "")
        print(f"| {Path(relative).stem} | {backend} | {per} | {cupti_us:.2f} | {st:.2f} | {st - cupti_us:+.2f} "
              f"({100 * (st - cupti_us) / cupti_us:+.1f}%) | {ev:.2f} | {timer} | {loop_us:.1f} | {bare_us:.1f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

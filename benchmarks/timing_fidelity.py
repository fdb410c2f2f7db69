"""Timing fidelity on an NVIDIA GPU: does the harness measure what the GPU did?

For each graph (sample graphs and graphs/perf/, cuDNN backend; a few on torch, whose
eager graphs launch several kernels), on the same built session:

* CUPTI: median over iterations of the sum of that iteration's kernel durations
  (cupti-python activity API) -- the reference; measured with plain event timing,
  because CUPTI's tracing waits on a stream that staged timing holds;
* harness, staged and plain events, without CUPTI (what a normal run reports), and the
  cost CUPTI adds to the event time;
* ``triton.testing.do_bench`` on the same ``execute`` (median; it clears the L2 between
  calls, so it is compared with the harness's ``--cache cold``);
* loop cost: wall time per iteration of the harness loop (events, NVTX markers, NVML
  clocks) vs a bare ``execute(); synchronize()`` loop.

Goals (issue 4): staged harness median within 1% of CUPTI for kernels >= 10 us, within
0.5 us below that; harness loop <= 1.05x the bare loop.

Run on the GPU machine: ``python benchmarks/timing_fidelity.py [--quick] [--out DIR]``;
prints a Markdown table last and writes ``timing_fidelity.csv``.
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from hipdnn_trace import backends
from hipdnn_trace.backends.base import RunOptions
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.bench.loop import LoopSettings, run_loop
from hipdnn_trace.bench.records import ConfigRun
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.markers import Markers, select

REPO = Path(__file__).resolve().parents[1]
SAMPLES = ["pointwise/relu_clip_fp16.json", "pointwise/bias_add_broadcast_nhwc_fp16.json",
           "conv/conv_fwd_nhwc_stride2_fp16.json", "matmul/matmul_batched_fp16.json",
           "norm/layernorm_bf16.json", "fused/conv_bias_relu_nhwc_fp16.json"]
TORCH = ["fused/matmul_bias_gelu_fp16.json", "perf/fused/resnet50_conv_bias_relu_3x3_64_fp16.json"]
LOOP = LoopSettings(warmup=20, iters=200)


def _graph(relative: str) -> Graph:
    path = REPO / "graphs" / relative
    return load_bytes(path.read_bytes(), str(path))


def _median(values) -> float:
    return float(np.median(np.asarray(values, dtype=np.float64)))


def _measure(backend: str, graph: Graph, inputs: dict, timing: str, cache: str, markers: Markers,
             samplers: list, hooks: list | None = None) -> tuple[ConfigRun, float]:
    """(config run with samples, wall us per timed iteration)."""
    session = backends.get(backend).prepare(graph, None, RunOptions(timing=timing, cache=cache))
    run = ConfigRun(config=Config(backend, backend))
    try:
        session.bind(inputs)
        for h in hooks or []:
            h.before_loop(graph, run)
        samples, phases = run_loop(session, LOOP, markers, samplers=samplers)
        execute = next(p for p in phases if p.name == "execute")
        wall_us = (execute.end_ns - execute.start_ns) / 1e3 / LOOP.iters
        for h in hooks or []:
            h.after_loop(graph, run)
        run.samples = samples
        for h in hooks or []:
            h._complete_ready()
        run.info.update(session.info())
    finally:
        session.close()
    return run, wall_us


def _bare_us(backend: str, graph: Graph, inputs: dict, n: int) -> float:
    session = backends.get(backend).prepare(graph, None, RunOptions())
    try:
        session.bind(inputs)
        for _ in range(LOOP.warmup):
            session.execute()
            session.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            session.execute()
            session.synchronize()
        return (time.perf_counter_ns() - t0) / 1e3 / n
    finally:
        session.close()


def _do_bench_us(backend: str, graph: Graph, inputs: dict) -> float | None:
    try:
        import torch
        from triton.testing import do_bench
    except ImportError:
        return None
    session = backends.get(backend).prepare(graph, None, RunOptions())
    try:
        session.bind(inputs)
        handle = session.stream.handle if hasattr(session.stream, "handle") else session.stream.cuda_stream
        with torch.cuda.stream(torch.cuda.ExternalStream(int(handle))):
            return float(do_bench(session.execute, warmup=25, rep=100, return_mode="median")) * 1e3
    finally:
        session.close()


def measure(backend: str, relative: str, markers: Markers, samplers: list) -> dict:
    from hipdnn_trace.profilers.cupti import CuptiProfiler

    graph = _graph(relative)
    inputs = make_inputs(graph, 0)
    events, loop_us = _measure(backend, graph, inputs, "events", "warm", markers, samplers)
    staged, _ = _measure(backend, graph, inputs, "staged", "warm", markers, samplers)
    cold, _ = _measure(backend, graph, inputs, "staged", "cold", markers, samplers)
    bare = _bare_us(backend, graph, inputs, LOOP.iters)
    bench = _do_bench_us(backend, graph, inputs)
    profiler = CuptiProfiler()
    # CUPTI's activity tracing waits on a held stream, so the traced loop uses plain events,
    # and tracing is switched off again before the next graph's staged measurements.
    try:
        with_cupti, _ = _measure(backend, graph, inputs, "events", "warm", markers, samplers, hooks=[profiler])
    finally:
        profiler.close()
    s = with_cupti.samples
    timed = [k for k, p in enumerate(s.phase) if p == "timed"]
    sums = [s.extra["kernel_sum_ms"][k] for k in timed]
    cupti_us = _median([v for v in sums if v is not None]) * 1e3
    events_cupti_us = _median([s.kernel_ms[k] for k in timed]) * 1e3
    events_us = _median(events.samples.timed_kernel_ms()) * 1e3
    staged_us = _median(staged.samples.timed_kernel_ms()) * 1e3
    kernels = with_cupti.info.get("cupti", {}).get("kernels_per_iteration", [])
    diff = staged_us - cupti_us
    goal = abs(diff) <= (0.01 * cupti_us if cupti_us >= 10 else 0.5)
    return {
        "graph": Path(relative).stem, "backend": backend, "kernels_per_iter": ",".join(map(str, kernels)),
        "cupti_us": cupti_us, "staged_us": staged_us, "staged_minus_cupti_us": diff,
        "staged_minus_cupti_pct": 100 * diff / cupti_us if cupti_us else math.nan, "fidelity_goal_met": goal,
        "events_us": events_us, "events_minus_cupti_us": events_us - cupti_us,
        "cupti_cost_us": events_cupti_us - events_us, "cold_staged_us": _median(cold.samples.timed_kernel_ms()) * 1e3,
        "do_bench_us": bench, "loop_us": loop_us, "bare_loop_us": bare, "loop_over_bare": loop_us / bare,
        "timer": staged.info.get("timer"), "fallback": staged.info.get("timing_fallback"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="sample graphs and a few perf graphs only")
    parser.add_argument("--out", type=Path, default=Path("."), help="folder for timing_fidelity.csv")
    args = parser.parse_args(argv)
    from hipdnn_trace.device.nvml import ClockSampler, gpu_info

    perf = sorted(str(p.relative_to(REPO / "graphs")) for p in (REPO / "graphs" / "perf").rglob("*fp16.json"))
    if args.quick:
        perf = [p for p in perf if "res4_3x3_256_fwd" in p or "gemm_4096" in p or "layernorm" in p]
    jobs = [("cudnn", g) for g in SAMPLES + perf] + [("torch", g) for g in TORCH]
    markers = select("nvtx")
    samplers = [ClockSampler(0)]
    rows = []
    args.out.mkdir(parents=True, exist_ok=True)
    for backend, relative in jobs:
        try:
            rows.append(measure(backend, relative, markers, samplers))
        except Exception as exc:  # one unsupported graph must not end the benchmark
            print(f"skip {backend} {relative}: {type(exc).__name__}: {' '.join(str(exc).split())[:160]}",
                  file=sys.stderr)
            continue
        print(rows[-1], flush=True)
        pl.DataFrame(rows).write_csv(args.out / "timing_fidelity.csv")   # kept if the run is cut short
    gpu = (gpu_info(0) or {}).get("name", "?")
    print(f"\nTiming fidelity, {gpu}, {datetime.date.today().isoformat()}, "
          f"`python benchmarks/timing_fidelity.py{' --quick' if args.quick else ''}` "
          f"(warmup {LOOP.warmup}, {LOOP.iters} timed iterations, medians; us)\n")
    print("| graph | backend | kernels/iter | CUPTI kernel sum | harness staged | staged - CUPTI | goal | "
          "harness events | cold staged | do_bench (cold) | CUPTI cost on events | loop / bare |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        bench = "-" if r["do_bench_us"] is None else f"{r['do_bench_us']:.2f}"
        print(f"| {r['graph']} | {r['backend']} | {r['kernels_per_iter']} | {r['cupti_us']:.2f} | "
              f"{r['staged_us']:.2f} | {r['staged_minus_cupti_us']:+.2f} ({r['staged_minus_cupti_pct']:+.2f}%) | "
              f"{'yes' if r['fidelity_goal_met'] else 'NO'} | {r['events_us']:.2f} | {r['cold_staged_us']:.2f} | "
              f"{bench} | {r['cupti_cost_us']:+.2f} | {r['loop_over_bare']:.3f} |")
    if rows:
        met = sum(r["fidelity_goal_met"] for r in rows)
        loop = [r["loop_over_bare"] for r in rows]
        print(f"\nfidelity goal met for {met}/{len(rows)} graphs; loop/bare median {np.median(loop):.3f}, "
              f"max {max(loop):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

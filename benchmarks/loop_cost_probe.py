"""Where the per-iteration host cost of the measurement loop goes, one ingredient at a time.

Run on an NVIDIA GPU: ``python benchmarks/loop_cost_probe.py [--iters N] [graph.json ...]``. For a bare
``execute(); synchronize()`` loop and for ``run_loop`` with the pieces the CLI's default path adds switched
on one by one (the kernel clock, NVTX markers, NVML clock sampling, the isolated child's reporting markers
and progress), prints per iteration (median of 5 interleaved rounds):

- ``window``: first timed iteration's start to the last one's end, divided by N: what an iteration costs
  inside the loop (the number ``harness_overhead.py`` reads from the CLI's frames);
- ``call``: the whole call divided by N (the kernel clock's flush and attribution, side blocks included);
- ``kernel``: median kernel time of the run (CUPTI where it runs), so a moving GPU clock shows up.

Used to find what made the CLI path cost more than the bare loop (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

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

ROUNDS = 5
#: (window us/iter, call us/iter, median kernel us)
Result = tuple[float, float, float]
Variant = Callable[[int], Result]


def interleaved(variants: list[tuple[str, Variant]], n: int) -> list[tuple[str, Result]]:
    """Median over ROUNDS of each variant, interleaved within each round so a drifting GPU clock or a
    busy host shares itself between them."""
    for _, fn in variants:
        fn(max(n // 10, 20))
    results: dict[str, list[Result]] = {name: [] for name, _ in variants}
    for _ in range(ROUNDS):
        for name, fn in variants:
            results[name].append(fn(n))
    return [(name, tuple(statistics.median(r[k] for r in results[name]) for k in range(3)))  # type: ignore[misc]
            for name, _ in variants]


def probe(path: Path, n: int) -> list[tuple[str, Result]]:
    graph = load_bytes(path.read_bytes(), str(path))
    s = backends.get("cudnn").prepare(graph, None, RunOptions(timing="staged"))
    s.bind(make_inputs(graph, 0))
    nvtx = select("nvtx", vendor="nvidia")
    sampler = ClockSampler(0)

    def bare(count: int) -> Result:
        t0 = time.perf_counter_ns()
        for _ in range(count):
            s.execute()
            s.synchronize()
        us = (time.perf_counter_ns() - t0) / count / 1e3
        return us, us, float("nan")

    def bare_cupti(count: int) -> Result:
        sub = cupti_activity.Subscriber()
        cupti_activity.SINK.subscribe(sub)
        sub.drain()
        try:
            t0 = time.perf_counter_ns()
            for _ in range(count):
                s.execute()
                s.synchronize()
            window = (time.perf_counter_ns() - t0) / count / 1e3
            records = sub.drain()
        finally:
            cupti_activity.SINK.unsubscribe(sub)
        call = (time.perf_counter_ns() - t0) / count / 1e3
        per_kernel = np.array([r[2] - r[1] for r in records], dtype=np.float64) / 1e3
        kernels = max(1, len(records) // count)
        return window, call, float(np.median(per_kernel)) * kernels if len(per_kernel) else float("nan")

    def loop(markers: Markers, samplers: tuple = (), clock: bool = True, progress: bool = False,
             no_gc: bool = False) -> Variant:
        last = [0.0]

        def on_iteration(i: int) -> None:
            now = time.monotonic()
            if now - last[0] >= 0.2:
                last[0] = now

        def fn(count: int) -> Result:
            if no_gc:
                gc.disable()
            try:
                t0 = time.perf_counter_ns()
                samples, _ = run_loop(s, LoopSettings(warmup=0, iters=count), markers, samplers=list(samplers),
                                      on_iteration=on_iteration if progress else None,
                                      kernel_clock=KernelClock() if clock else None)
                call = (time.perf_counter_ns() - t0) / count / 1e3
            finally:
                gc.enable()
            timed = [k for k, p in enumerate(samples.phase) if p == "timed"]
            window = (samples.end_ns[timed[-1]] - samples.start_ns[timed[0]]) / len(timed) / 1e3
            return window, call, float(np.median(samples.timed_kernel_ms())) * 1e3

        return fn

    reporting = _ReportingMarkers(nvtx, lambda kind, value: None)
    try:
        return interleaved([
            ("bare execute+sync", bare),
            ("bare + CUPTI kernel activity", bare_cupti),
            ("run_loop: kernel clock, no markers", loop(Markers())),
            ("same, gc disabled", loop(Markers(), no_gc=True)),
            ("+ NVTX markers", loop(nvtx)),
            ("+ NVML clock sampler", loop(nvtx, (sampler,))),
            ("+ isolated child's markers and progress (the CLI's loop)", loop(reporting, (sampler,), progress=True)),
            ("run_loop: staged events, no kernel clock", loop(nvtx, (sampler,), clock=False)),
        ], n)
    finally:
        s.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("graphs", nargs="*", type=Path, default=[Path("graphs/pointwise/relu_clip_fp16.json")])
    parser.add_argument("--iters", type=int, default=3000)
    parser.add_argument("--torch-first", action="store_true",
                        help="initialize torch on the GPU and run float64 work first (as a GPU reference does)")
    args = parser.parse_args(argv)
    if args.torch_first:
        import torch

        a = torch.ones((4096, 4096), dtype=torch.float64, device="cuda")
        (a @ a).sum().item()
    for path in args.graphs:
        rows = probe(path, args.iters)
        print(f"\n{path.stem}, {args.iters} iterations\n")
        print("| loop | window us/iter | x bare | call us/iter | kernel us |")
        print("|---|---|---|---|---|")
        base = rows[0][1][0]
        for name, (window, call, kernel) in rows:
            print(f"| {name} | {window:.2f} | {window / base:.3f} | {call:.2f} | {kernel:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Engine choice on an NVIDIA GPU: the autotuned cuDNN plan vs PyTorch with cudnn.benchmark.

For each perf convolution and GEMM (graphs/perf/conv, graphs/perf/matmul; fp16 by
default): the ``cudnn`` backend times its candidate plans briefly
(``bench.engines.autotune``: 3 warmup + 10 timed iterations each, the first
``--max-plans`` plans in heuristic order) and keeps the fastest; then both the chosen
plan and the ``torch`` backend with ``torch.backends.cudnn.benchmark = True`` (its own
algorithm search, done during warmup) are timed the same way (warm cache, CUDA events,
warmup 20, 100 timed iterations, medians). Speedup = torch median / cuDNN median; goal
(issue 4): geometric mean >= 1.0.

Run on the GPU machine: ``python benchmarks/engine_choice.py [--dtype fp16] [--out DIR]``;
prints a Markdown table last and writes ``engine_choice.csv``.
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
from pathlib import Path

import numpy as np
import polars as pl

from hipdnn_trace import backends
from hipdnn_trace.backends.base import RunOptions
from hipdnn_trace.bench.engines import autotune
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.bench.loop import LoopSettings, run_loop
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.graph.ops import graph_flops
from hipdnn_trace.markers import Markers

REPO = Path(__file__).resolve().parents[1]
LOOP = LoopSettings(warmup=20, iters=100)


def _median_ms(backend: str, graph: Graph, inputs: dict, engine=None) -> tuple[float, dict]:
    session = backends.get(backend).prepare(graph, engine, RunOptions())
    try:
        session.bind(inputs)
        samples, _ = run_loop(session, LOOP, Markers())
        return float(np.median(samples.timed_kernel_ms())), session.info()
    finally:
        session.close()


class _Capped:
    """The cudnn backend with its plan list cut to the first ``n`` (autotune time stays bounded)."""

    def __init__(self, backend, n: int) -> None:
        self._backend, self._n = backend, n
        self.name = backend.name

    def engines(self, graph, options):
        return self._backend.engines(graph, options)[: self._n]

    def prepare(self, graph, engine, options):
        return self._backend.prepare(graph, engine, options)


def measure(relative: str, max_plans: int) -> dict:
    import torch

    path = REPO / "graphs" / relative
    graph = load_bytes(path.read_bytes(), str(path))
    inputs = make_inputs(graph, 0)
    cudnn = backends.get("cudnn")
    plans = len(cudnn.engines(graph, RunOptions()))
    chosen, tried = autotune(_Capped(cudnn, max_plans), graph, RunOptions(), inputs, Markers())
    if chosen is None:
        raise RuntimeError("no cuDNN plan ran")
    cudnn_ms, _ = _median_ms("cudnn", graph, inputs, chosen)
    heuristic_ms, info = _median_ms("cudnn", graph, inputs, None)
    torch.backends.cudnn.benchmark = True
    torch_ms, _ = _median_ms("torch", graph, inputs)
    flops = graph_flops(graph)
    return {"graph": path.stem, "plans": plans, "tried": len(tried), "chosen": chosen.label(),
            "heuristic_plan": info.get("plan"), "cudnn_autotuned_ms": cudnn_ms, "cudnn_heuristic_ms": heuristic_ms,
            "torch_benchmark_ms": torch_ms, "speedup_vs_torch": torch_ms / cudnn_ms,
            "autotuned_tflops": flops / (cudnn_ms * 1e-3) / 1e12 if flops else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dtype", default="fp16", help="suffix of the perf graphs to run (fp16, bf16)")
    parser.add_argument("--max-plans", type=int, default=8, help="plans autotune times per graph (default 8)")
    parser.add_argument("--out", type=Path, default=Path("."), help="folder for engine_choice.csv")
    args = parser.parse_args(argv)
    from hipdnn_trace.device.nvml import gpu_info

    graphs = sorted(str(p.relative_to(REPO / "graphs")) for folder in ("perf/conv", "perf/matmul")
                    for p in (REPO / "graphs" / folder).glob(f"*_{args.dtype}.json"))
    rows = []
    args.out.mkdir(parents=True, exist_ok=True)
    for relative in graphs:
        try:
            rows.append(measure(relative, args.max_plans))
        except Exception as exc:  # report and go on
            print(f"skip {relative}: {type(exc).__name__}: {' '.join(str(exc).split())[:160]}", file=sys.stderr)
            continue
        print(rows[-1], flush=True)
        pl.DataFrame(rows).write_csv(args.out / "engine_choice.csv")   # kept if the run is cut short
    gpu = (gpu_info(0) or {}).get("name", "?")
    print(f"\nEngine choice, {gpu}, {datetime.date.today().isoformat()}, "
          f"`python benchmarks/engine_choice.py --dtype {args.dtype} --max-plans {args.max_plans}` "
          f"(warm cache, events, warmup {LOOP.warmup}, {LOOP.iters} iterations, medians)\n")
    print("| graph | plans (timed) | chosen plan | cuDNN autotuned ms | cuDNN heuristic ms | "
          "torch cudnn.benchmark ms | speedup | TFLOPS |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['graph']} | {r['plans']} ({r['tried']}) | {r['chosen']} | {r['cudnn_autotuned_ms']:.4f} | "
              f"{r['cudnn_heuristic_ms']:.4f} | {r['torch_benchmark_ms']:.4f} | {r['speedup_vs_torch']:.3f} | "
              f"{r['autotuned_tflops'] or 0:.1f} |")
    if rows:
        geo = math.exp(np.mean([math.log(r["speedup_vs_torch"]) for r in rows]))
        print(f"\ngeomean speedup of the autotuned cuDNN plan over torch (cudnn.benchmark=True): {geo:.3f} "
              f"over {len(rows)} graphs (goal >= 1.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

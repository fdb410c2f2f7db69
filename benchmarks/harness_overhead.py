"""Harness overhead on the real GPU path: what one timed iteration costs the CLI's default
configuration (isolated child, kernel clock, markers, clock sampling) against a bare
``execute(); synchronize()`` loop on the same graph, and writing 100k iterations.

Per graph (a 1 us pointwise to a ~1 ms GEMM, cuDNN): the bare loop runs in this process on a
session of its own (best of 3 rounds of N), 3 times interleaved with the harness; the harness runs as a user would run it,
``hipdnn-trace run GRAPH --backend cudnn --isolate -i N`` in a subprocess, and its cost per
iteration is read from its own iterations frame (median of the 3 runs): the wall time from the first timed
iteration's start to the last one's end, divided by N (batched event reads and clock
samples included).

Goals (issue 16): <= 1.25x the bare loop for the 1 us kernel, <= 1.05x from 100 us up.
Run on the GPU machine: ``python benchmarks/harness_overhead.py [--iters N]`` (Markdown table).
"""

from __future__ import annotations

import argparse
import datetime
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.loop import Samples
from hipdnn_trace.bench.records import ConfigRun, GraphRun
from hipdnn_trace.device.clock import now_ns
from hipdnn_trace.results.metadata import cpu_model, run_metadata
from hipdnn_trace.results.rundir import RunWriter

REPO = Path(__file__).resolve().parents[1]
ROUNDS = 3
GRAPHS = ["pointwise/relu_clip_fp16.json", "conv/conv_fwd_nhwc_stride2_fp16.json",
          "perf/conv/resnet50_res4_3x3_256_fwd_fp16.json", "perf/norm/llm_layernorm_8x2048x4096_fp16.json",
          "perf/matmul/gemm_4096x4096x4096_fp16.json"]


def bare_us(relative: str, n: int) -> float:
    """Best of 3 rounds: wall us per ``execute(); synchronize()`` on a built cuDNN session."""
    from hipdnn_trace import backends
    from hipdnn_trace.backends.base import RunOptions
    from hipdnn_trace.bench.inputs import make_inputs
    from hipdnn_trace.graph.load import load_bytes

    path = REPO / "graphs" / relative
    graph = load_bytes(path.read_bytes(), str(path))
    session = backends.get("cudnn").prepare(graph, None, RunOptions(timing="events"))
    try:
        session.bind(make_inputs(graph, 0))
        for _ in range(20):
            session.execute()
            session.synchronize()
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter_ns()
            for _ in range(n):
                session.execute()
                session.synchronize()
            best = min(best, (time.perf_counter_ns() - t0) / n / 1e3)
        return best
    finally:
        session.close()


def harness_us(relative: str, n: int, out: Path) -> tuple[float, float, str]:
    """(wall us per timed iteration, median kernel_ms in us, kernel source) of the CLI default path."""
    import polars as pl

    folder = out / Path(relative).stem
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "hipdnn_trace", "run", str(REPO / "graphs" / relative),
                    "--backend", "cudnn", "--isolate", "-i", str(n), "--out", str(folder), "--run-id", "r", "-q"],
                   check=True)
    frame = pl.read_parquet(folder / "r" / "iterations.parquet").filter(pl.col("phase") == "timed")
    start = frame["start_ns"].to_numpy()
    host = frame["host_ms"].to_numpy()
    wall_us = (start[-1] + host[-1] * 1e6 - start[0]) / 1e3 / len(start)
    summary = pl.read_csv(folder / "r" / "summary.csv")
    return wall_us, float(frame["kernel_ms"].median()) * 1e3, str(summary["kernel_source"][0])


def write_100k(tmp: Path) -> tuple[float, float]:
    """(seconds to write 100k iterations as frames + trace, trace size MB)."""
    n = 100_000
    start = now_ns()
    samples = Samples(
        phase=["timed"] * n, iteration=list(range(n)),
        kernel_ms=list(np.random.default_rng(0).uniform(0.01, 0.02, n)), host_ms=[0.03] * n,
        start_ns=[start + 30_000 * i for i in range(n)], end_ns=[start + 30_000 * i + 20_000 for i in range(n)],
    )
    from hipdnn_trace.graph.build import GraphBuilder

    b = GraphBuilder("bench")
    b.matmul(b.tensor("a", [1, 64, 64]), b.tensor("b", [1, 64, 64]))
    graph = b.build()
    run = GraphRun(source="bench.json", name="bench", graph=graph, graph_id=graph.graph_id, load_ms=0.1)
    c = ConfigRun(config=Config("reference", "reference"), samples=samples, init_ms=1.0, e2e_ms=3000.0)
    from hipdnn_trace.bench.loop import Phase

    c.phases = [Phase("init", start - 1000, start), Phase("execute", start, start + 30_000 * n)]
    run.configs.append(c)
    meta = run_metadata(run_id="bench", argv=[], timing={}, seed=0, configs=[])
    import hipdnn_trace.results.timeline  # noqa: F401 - a run imports these once, at start
    import hipdnn_trace.trace.writer  # noqa: F401

    t0 = time.perf_counter()
    writer = RunWriter(tmp / "bench", meta, formats=["parquet"], trace=True)
    writer.add_graph(run)
    writer.finish("complete")
    seconds = time.perf_counter() - t0
    return seconds, (tmp / "bench" / "trace.pftrace").stat().st_size / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iters", type=int, default=3000, help="timed iterations per measurement")
    args = parser.parse_args(argv)
    from hipdnn_trace.device.nvml import gpu_info

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for relative in GRAPHS:
            n = args.iters if "perf/matmul" not in relative else max(args.iters // 10, 100)
            bares, walls = [], []
            for _ in range(ROUNDS):   # interleaved: GPU clock drift and host noise fall on both
                bares.append(bare_us(relative, n))
                wall, kernel, source = harness_us(relative, n, Path(tmp))
                walls.append(wall)
            bare, wall = statistics.median(bares), statistics.median(walls)
            rows.append((Path(relative).stem, kernel, bare, wall, wall / bare, source))
            print(rows[-1], flush=True)
        write_s, trace_mb = write_100k(Path(tmp))
    gpu = (gpu_info(0) or {}).get("name", "?")
    print(f"\n# harness_overhead ({datetime.date.today()}, {gpu}, {cpu_model()}, Python {platform.python_version()})")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}\n")
    print("| graph | kernel_ms (us) | bare execute+sync us/iter | CLI default us/iter | ratio | kernel_ms source |")
    print("|---|---|---|---|---|---|")
    for name, kernel, bare, wall, ratio, source in rows:
        print(f"| {name} | {kernel:.2f} | {bare:.2f} | {wall:.2f} | {ratio:.3f} | {source} |")
    print(f"\n100k iterations -> iterations.parquet + summary + trace.pftrace: {write_s:.2f} s "
          f"(trace {trace_mb:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Harness overhead on the real GPU path: what one timed iteration costs the CLI's default
configuration (isolated child, kernel clock, markers, clock sampling) against a bare
``execute(); synchronize()`` loop on the same graph, and writing 100k iterations.

On a VM host the cost of a launch plus a synchronize is a property of the *process* as much as
of the code: on the H100 machine bare loops of the same 1 us kernel in 32 fresh processes read
26 to 50 us per iteration (``benchmarks/cpu_placement.py``), stable within a process, not tied to
the CPU it was pinned to. So both sides run in fresh processes, R rounds interleaved (the order
alternating), and the table gives medians, their ranges and a bootstrap 95% CI of the ratio of
medians. The bare side is a child of this script (``--bare``) that builds the cuDNN session and
times median-of-3 rounds of N; the harness side is ``hipdnn-trace run GRAPH --backend cudnn
--isolate -i N`` as a user runs it, its cost per iteration read from its iterations frame: the
wall time from the first timed iteration's start to the last one's end, divided by N. The frame
also gives the loop's own share exactly: the gap between one iteration's end and the next one's
start (markers, bookkeeping, progress, clock samples), which no process luck moves.

Goals (issue 16): <= 1.25x the bare loop for the 1 us kernel, <= 1.05x from 100 us up.
Run on the GPU machine: ``python benchmarks/harness_overhead.py [--iters N] [--rounds R]``.
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
GRAPHS = ["pointwise/relu_clip_fp16.json", "conv/conv_fwd_nhwc_stride2_fp16.json",
          "perf/conv/resnet50_res4_3x3_256_fwd_fp16.json", "perf/norm/llm_layernorm_8x2048x4096_fp16.json",
          "perf/matmul/gemm_4096x4096x4096_fp16.json"]


def bare_loop_us(path: Path, n: int) -> float:
    """Wall us per ``execute(); synchronize()`` on a built cuDNN session of the graph at ``path``
    (20 warmup iterations, then the median of 3 rounds of ``n``). ``cpu_placement.py`` uses it too."""
    from hipdnn_trace import backends
    from hipdnn_trace.backends.base import RunOptions
    from hipdnn_trace.bench.inputs import make_inputs
    from hipdnn_trace.graph.load import load_bytes

    graph = load_bytes(path.read_bytes(), str(path))
    session = backends.get("cudnn").prepare(graph, None, RunOptions(timing="events"))
    try:
        session.bind(make_inputs(graph, 0))
        for _ in range(20):
            session.execute()
            session.synchronize()
        rounds = []
        for _ in range(3):
            t0 = time.perf_counter_ns()
            for _ in range(n):
                session.execute()
                session.synchronize()
            rounds.append((time.perf_counter_ns() - t0) / n / 1e3)
        return statistics.median(rounds)
    finally:
        session.close()


def bare_child(relative: str, n: int) -> None:
    """Print :func:`bare_loop_us` of a graph under graphs/ (the ``--bare`` child)."""
    print(f"BARE {bare_loop_us(REPO / 'graphs' / relative, n)}")


def bare_us(relative: str, n: int) -> float:
    """:func:`bare_child` in a fresh process."""
    done = subprocess.run([sys.executable, __file__, "--bare", relative, "--iters", str(n)],
                          capture_output=True, text=True, check=True)
    return float(next(line for line in done.stdout.splitlines() if line.startswith("BARE "))[5:])


def harness_us(relative: str, n: int, out: Path, extra: list[str]) -> tuple[float, float, float, str]:
    """(wall us per timed iteration, loop gap us per iteration, median kernel_ms in us, kernel source)
    of the CLI default path."""
    import polars as pl

    folder = out / Path(relative).stem
    shutil.rmtree(folder, ignore_errors=True)
    isolate = [] if "--no-isolate" in extra else ["--isolate"]
    subprocess.run([sys.executable, "-m", "hipdnn_trace", "run", str(REPO / "graphs" / relative),
                    "--backend", "cudnn", *isolate, "-i", str(n), "--out", str(folder), "--run-id", "r", "-q", *extra],
                   check=True)
    frame = pl.read_parquet(folder / "r" / "iterations.parquet").filter(pl.col("phase") == "timed")
    start = frame["start_ns"].to_numpy()
    host = frame["host_ms"].to_numpy()
    end = start + host * 1e6
    wall_us = (start[-1] + host[-1] * 1e6 - start[0]) / 1e3 / len(start)
    gap_us = float(np.mean(start[1:] - end[:-1])) / 1e3
    summary = pl.read_csv(folder / "r" / "summary.csv")
    return wall_us, gap_us, float(frame["kernel_ms"].median()) * 1e3, str(summary["kernel_source"][0])


def ratio_ci(a: list[float], b: list[float], draws: int = 5000) -> tuple[float, float]:
    """Bootstrap 95% interval of median(a) / median(b) (independent resamples of each side)."""
    rng = np.random.default_rng(0)
    x, y = np.asarray(a), np.asarray(b)
    ratios = (np.median(rng.choice(x, (draws, len(x))), axis=1) / np.median(rng.choice(y, (draws, len(y))), axis=1))
    low, high = np.percentile(ratios, [2.5, 97.5])
    return float(low), float(high)


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
    import hipdnn_trace.results.timeline  # a run imports these once, at start
    import hipdnn_trace.trace.writer  # noqa: F401 - loaded for the same reason

    t0 = time.perf_counter()
    writer = RunWriter(tmp / "bench", meta, formats=["parquet"], trace=True)
    writer.add_graph(run)
    writer.finish("complete")
    seconds = time.perf_counter() - t0
    return seconds, (tmp / "bench" / "trace.pftrace").stat().st_size / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iters", type=int, default=3000, help="timed iterations per measurement")
    parser.add_argument("--graphs", nargs="+", default=GRAPHS, help="graphs under graphs/ (default: five sizes)")
    parser.add_argument("--cli-args", default="",
                        help="extra arguments for the CLI run (to find where a cost comes from)")
    parser.add_argument("--rounds", type=int, default=8, help="fresh processes per side and graph")
    parser.add_argument("--bare", metavar="GRAPH", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bare:
        bare_child(args.bare, args.iters)
        return 0
    from hipdnn_trace.device.nvml import gpu_info

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for relative in args.graphs:
            n = args.iters if "perf/matmul" not in relative else max(args.iters // 10, 100)
            bares, walls, gaps, kernels = [], [], [], []
            for k in range(args.rounds):   # interleaved, order alternating: drift falls on both sides
                for side in ("bare", "cli") if k % 2 == 0 else ("cli", "bare"):
                    if side == "bare":
                        bares.append(bare_us(relative, n))
                        continue
                    wall, gap, kernel, source = harness_us(relative, n, Path(tmp), args.cli_args.split())
                    walls.append(wall)
                    gaps.append(gap)
                    kernels.append(kernel)
            rows.append((Path(relative).stem, statistics.median(kernels), bares, walls, statistics.median(gaps),
                         source))
            print(rows[-1], flush=True)
        write_s, trace_mb = write_100k(Path(tmp))
    gpu = (gpu_info(0) or {}).get("name", "?")
    print(f"\n# harness_overhead ({datetime.date.today()}, {gpu}, {cpu_model()}, Python {platform.python_version()})")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}\n")
    print(f"rounds: {args.rounds} fresh processes per side; us per iteration, median [min-max]\n")
    print("| graph | kernel_ms (us) | bare execute+sync | CLI default | ratio of medians [95% CI] | loop gap (us) | "
          "gap / bare median | kernel_ms source |")
    print("|---|---|---|---|---|---|---|---|")
    for name, kernel, bares, walls, gap, source in rows:
        bare, wall = statistics.median(bares), statistics.median(walls)
        low, high = ratio_ci(walls, bares)
        print(f"| {name} | {kernel:.2f} | {bare:.1f} [{min(bares):.1f}-{max(bares):.1f}] | {wall:.1f} "
              f"[{min(walls):.1f}-{max(walls):.1f}] | {wall / bare:.3f} [{low:.2f}-{high:.2f}] | {gap:.2f} | "
              f"{gap / bare:.1%} | {source} |")
    print(f"\n100k iterations -> iterations.parquet + summary + trace.pftrace: {write_s:.2f} s "
          f"(trace {trace_mb:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Harness overhead: the measurement loop vs a bare execute loop, and writing 100k iterations.

Goals (issue 3): <= 5% loop overhead; 100k iterations through frames + trace in < 2 s.

The "kernel" is a busy-wait of fixed length so the comparison measures the loop, not
the work; overhead is reported per iteration (us) and relative to kernels of 10 us,
100 us and 1 ms. Run: ``python benchmarks/harness_overhead.py`` (prints a Markdown table).
"""

from __future__ import annotations

import datetime
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.loop import LoopSettings, Samples, run_loop
from hipdnn_trace.bench.records import ConfigRun, GraphRun
from hipdnn_trace.device.clock import now_ns
from hipdnn_trace.device.timers import HostTimer
from hipdnn_trace.markers import Markers, select
from hipdnn_trace.results.metadata import cpu_model, run_metadata
from hipdnn_trace.results.rundir import RunWriter


class SpinSession:
    """execute() busy-waits ``us`` microseconds: a kernel of known length."""

    engine = None

    def __init__(self, us: float) -> None:
        self.timer = HostTimer()
        self.ns = int(us * 1000)

    def execute(self) -> None:
        end = time.perf_counter_ns() + self.ns
        while time.perf_counter_ns() < end:
            pass

    def synchronize(self) -> None:
        pass

    def prepare_iteration(self) -> None:
        pass


def bare_loop(session: SpinSession, n: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        session.execute()
        session.synchronize()
    return (time.perf_counter_ns() - t0) / n / 1000


def harness_loop(session: SpinSession, n: int, markers: Markers) -> float:
    t0 = time.perf_counter_ns()
    run_loop(session, LoopSettings(warmup=0, iters=n), markers)
    return (time.perf_counter_ns() - t0) / n / 1000


def loop_overhead(markers: Markers, rounds: int = 7) -> list[tuple[float, float, float, float]]:
    rows = []
    for us, n in ((10, 20000), (100, 4000), (1000, 500)):
        session = SpinSession(us)
        bare_loop(session, n // 10)
        bare, harness = [], []
        for _ in range(rounds):   # alternate to share drift between the two
            bare.append(bare_loop(session, n))
            harness.append(harness_loop(session, n, markers))
        b, h = statistics.median(bare), statistics.median(harness)
        rows.append((us, b, h, h / b))
    return rows


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


def main() -> None:
    markers = select("auto")
    rows = loop_overhead(markers)
    with tempfile.TemporaryDirectory() as tmp:
        write_s, trace_mb = write_100k(Path(tmp))
    print(f"# harness_overhead ({datetime.date.today()}, {cpu_model()}, Python {platform.python_version()},"
          f" markers={markers.kind})")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}\n")
    print("| kernel | bare loop us/iter | harness loop us/iter | overhead us | ratio |")
    print("|---|---|---|---|---|")
    for us, b, h, r in rows:
        print(f"| {us:g} us | {b:.2f} | {h:.2f} | {h - b:.2f} | {r:.3f} |")
    print(f"\n100k iterations -> iterations.parquet + summary + trace.pftrace: {write_s:.2f} s "
          f"(trace {trace_mb:.1f} MB)")


if __name__ == "__main__":
    main()

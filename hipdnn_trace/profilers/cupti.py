"""``--profile cupti``: every kernel of the timed region from CUPTI's activity API, in process.

CUPTI (cupti-python) records each kernel's start/end on the GPU, its grid, block,
stream and device, asynchronously into activity buffers; the hook flushes them
after each configuration's loop, outside the timed region. Kernels are tied to
timed iterations by time: the harness synchronizes every iteration, so iteration
i's kernels run inside its host window ``[start_ns, end_ns]`` (CLOCK_BOOTTIME).
CUPTI stamps its own clock; the offset to the trace clock is measured before each
loop (``cupti.get_timestamp`` bracketed by two host reads, narrowest of several).

Per timed iteration the sum of its kernel durations becomes ``kernel_sum_ms`` in
the iterations frame, beside the event-timed ``kernel_ms``. What profiling costs
is recorded: CUPTI's kernel tracing adds host work per launch, and the flush after
the loop is timed (``run.json`` -> ``profile``).

The hook needs the loop's samples to place kernels. ``bench.graph_run`` assigns
them after the hooks' ``after_loop``; ``finish_graph`` (called by ``run`` before a
graph is written) completes any configuration whose samples arrived late.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from hipdnn_trace.device import cupti_activity
from hipdnn_trace.device.clock import now_ns
from hipdnn_trace.device.cupti_activity import BUFFER_BYTES, Record, assign_iterations, clock_offset
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.profilers.harness_kernels import is_harness_kernel
from hipdnn_trace.results import schemas
from hipdnn_trace.results.kernel_names import with_demangled


def _cupti() -> Any:
    return cupti_activity.cupti()


def kernel_sums_ms(kernels: pl.DataFrame, iterations: Sequence[int]) -> list[float | None]:
    """Sum of kernel durations (ms) per timed iteration, in ``iterations`` order."""
    if kernels.is_empty():
        return [None] * len(iterations)
    sums = dict(kernels.filter(pl.col("iteration").is_not_null()).group_by("iteration")
                .agg((pl.col("duration_ns").sum() / 1e6).alias("ms")).iter_rows())
    return [sums.get(i) for i in iterations]


class CuptiProfiler:
    """In-process hooks (``bench.run_settings.Hooks``) collecting a kernel trace per configuration."""

    name = "cupti"

    def __init__(self) -> None:
        self.run_id: str | None = None
        self._subscriber = cupti_activity.Subscriber()
        self._started = False
        self._pending: list[tuple[Any, list[Record], int, dict[str, Any]]] = []
        self.meta: dict[str, Any] = {"activity": "CONCURRENT_KERNEL", "buffer_bytes": BUFFER_BYTES,
                                     "configs": {}}

    def profile(self) -> dict[str, Any] | None:
        """What run.json's ``profile`` block says of this profiler so far (results writes it); None
        before it recorded anything."""
        return dict(self.meta) if self.meta else None

    # ----------------------------------------------------------------- CUPTI

    def check_tool(self) -> None:
        """ToolMissingError (one line) when cupti-python is not installed."""
        _cupti()

    def start(self) -> None:
        """Subscribe to kernel activity records (shared with the kernel clock, if it runs too)."""
        if self._started:
            return
        cupti_activity.SINK.subscribe(self._subscriber)
        self._started = True
        try:
            import importlib.metadata

            self.meta["cupti_python"] = importlib.metadata.version("cupti-python")
        except Exception:  # informative only
            pass

    def _drain(self) -> list[Record]:
        return self._subscriber.drain()

    # ----------------------------------------------------------------- hooks

    def before_loop(self, graph: Graph, run: Any) -> None:
        self.start()
        self._drain()   # kernels of init/bind are not part of this configuration's trace
        offset, width = clock_offset()
        self._offset, self._offset_width = offset, width

    def after_loop(self, graph: Graph, run: Any) -> None:
        t0 = now_ns()
        rows = self._drain()
        flush_ms = (now_ns() - t0) / 1e6
        info = {"clock_offset_ns": self._offset, "clock_offset_uncertainty_ns": self._offset_width,
                "flush_ms": flush_ms, "records": len(rows)}
        info["graph_id"] = graph.graph_id
        info["graph"] = graph.label
        self._pending.append((run, rows, self._offset, info))
        self._complete_ready()

    def _complete_ready(self) -> None:
        left = []
        for run, rows, offset, info in self._pending:
            if run.samples is None:
                left.append((run, rows, offset, info))
            else:
                self._complete(run, rows, offset, info)
        self._pending = left

    def finish_graph(self, graph_run: Any) -> None:
        """Place kernels of every configuration of ``graph_run`` (its samples are set by now)."""
        self._complete_ready()
        for c in graph_run.configs:
            if isinstance(c.kernels, pl.DataFrame) and c.kernels.height and "cupti" in c.info:
                c.kernels = c.kernels.with_columns(pl.lit(graph_run.name, dtype=pl.String).alias("graph"))

    def _complete(self, run: Any, rows: list[Record], offset: int, info: dict[str, Any]) -> None:
        s = run.samples
        timed = [k for k, p in enumerate(s.phase) if p == "timed"]
        iters = [s.iteration[k] for k in timed]
        frame = self.kernels_frame(rows, offset, [s.start_ns[k] for k in timed], [s.end_ns[k] for k in timed],
                                   iters, run_id=self.run_id, graph=info.get("graph"), graph_id=info.get("graph_id"),
                                   config=run.config.name)
        sums = kernel_sums_ms(frame, iters)
        column = s.extra.setdefault("kernel_sum_ms", [None] * len(s))
        column.extend([None] * (len(s) - len(column)))
        for k, value in zip(timed, sums):
            column[k] = value
        per_iter = frame.filter(pl.col("iteration").is_not_null()).group_by("iteration").len()
        counts = per_iter["len"].to_list() if per_iter.height else []
        info.update({"kernels_in_timed_iterations": int(per_iter["len"].sum()) if per_iter.height else 0,
                     "kernels_per_iteration": sorted(set(counts)),
                     "kernels_outside_iterations": int(frame["iteration"].is_null().sum())})
        run.kernels = frame
        run.info["cupti"] = info
        self.meta["configs"][f"{info.get('graph')}|{run.config.name}"] = info

    @staticmethod
    def kernels_frame(rows: list[Record], offset: int, iter_start: Sequence[int], iter_end: Sequence[int],
                      iterations: Sequence[int], *, run_id: str | None = None, graph: str | None = None,
                      graph_id: str | None = None, config: str | None = None) -> pl.DataFrame:
        """CUPTI records -> the KERNELS frame on the trace clock, kernels of the timed region only."""
        # the timed region's kernels: only staged timing's hold kernel there is the harness's
        rows = [r for r in rows if not is_harness_kernel(r[0], in_range=True)]
        if not rows:
            return schemas.empty(schemas.KERNELS)
        cols = list(zip(*rows))
        start = np.asarray(cols[1], dtype=np.int64) + offset
        end = np.asarray(cols[2], dtype=np.int64) + offset
        which = assign_iterations(start, iter_start, iter_end, iterations)
        if len(iter_start):
            lo, hi = min(iter_start), max(iter_end)
            keep = (start >= lo) & (start <= hi)
        else:
            keep = np.zeros(start.shape, dtype=bool)
        n = int(keep.sum())
        frame = pl.DataFrame({
            "run_id": [run_id] * n, "graph": [graph] * n, "graph_id": [graph_id] * n, "config": [config] * n,
            "iteration": [None if w < 0 else int(w) for w in which[keep]],
            "name": [c for c, k in zip(cols[0], keep) if k],
            "start_ns": start[keep], "end_ns": end[keep], "duration_ns": (end - start)[keep],
            "grid_x": np.asarray(cols[3])[keep], "grid_y": np.asarray(cols[4])[keep],
            "grid_z": np.asarray(cols[5])[keep], "block_x": np.asarray(cols[6])[keep],
            "block_y": np.asarray(cols[7])[keep], "block_z": np.asarray(cols[8])[keep],
            "stream": np.asarray(cols[9])[keep], "device": np.asarray(cols[10])[keep],
            "correlation_id": np.asarray(cols[11])[keep], "source": ["cupti"] * n,
        }, strict=False)
        return schemas.conform(with_demangled(frame), schemas.KERNELS).sort("start_ns")

    def close(self) -> None:
        """Unsubscribe: later work runs untraced (and staged timing works)."""
        if self._started:
            cupti_activity.SINK.unsubscribe(self._subscriber)
            self._started = False

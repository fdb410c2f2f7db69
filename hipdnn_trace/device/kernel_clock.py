"""The device time of an iteration as the sum of its kernels' GPU durations (``--timing kernel``).

Event pairs around an execution measure a span: from the start event to the stop
event, host launch gaps and the events' own resolution included (on an H100 a
1.2 us kernel read 3.6 us staged). CUPTI's activity records carry each kernel's
start and end as the GPU stamped them, the number nsys and Nsight Systems show.
The clock subscribes to those records for the length of one measurement, places
each kernel in the host window of the iteration that launched it (the harness
synchronizes every iteration, so windows are disjoint) and sums per iteration.

The timer's events still run beside it, without the staged hold, so the same
iterations also give ``latency_ms``: the whole enqueue as a framework user waits
for it. Where CUPTI cannot run in process (no cupti-python, an external profiler
already attached, a CPU session) the clock says why and the loop keeps the
staged event span as ``kernel_ms``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hipdnn_trace.device import cupti_activity
from hipdnn_trace.device.cuda import HOLD_KERNEL
from hipdnn_trace.device.cupti_activity import assign_iterations, clock_offset

#: Kernels that are timing machinery, not the graph's work (staged timing's hold kernel).
MACHINERY_KERNELS = frozenset({HOLD_KERNEL})

#: Timers whose events run on an NVIDIA stream, where CUPTI sees the kernels.
CUDA_TIMERS = ("cuda-event", "cuda-event-staged", "torch-event")


@dataclass
class KernelTimes:
    """Per-window kernel sums and what the clock saw."""

    sums_ms: list[float | None]
    counts: list[int]
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every window had at least one kernel: the sums are the device time."""
        return bool(self.sums_ms) and all(s is not None for s in self.sums_ms)


def kernel_times(records: Sequence[cupti_activity.Record], offset_ns: int, starts: Sequence[int],
                 ends: Sequence[int], iterations: Sequence[int]) -> KernelTimes:
    """Sum the durations of ``records`` (CUPTI clock) per host window (trace clock)."""
    rows = [r for r in records if r[0] not in MACHINERY_KERNELS]
    n = len(starts)
    sums = np.zeros(n, dtype=np.int64)
    counts = np.zeros(n, dtype=np.int64)
    unplaced = 0
    if rows:
        begin = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows)) + offset_ns
        end = np.fromiter((r[2] for r in rows), dtype=np.int64, count=len(rows)) + offset_ns
        which = assign_iterations(begin, starts, ends, list(range(n)))
        placed = which >= 0
        unplaced = int((~placed).sum())
        np.add.at(sums, which[placed], (end - begin)[placed])
        np.add.at(counts, which[placed], 1)
    per_iter = sorted({int(c) for c in counts})
    info = {"records": len(rows), "outside_windows": unplaced, "kernels_per_iteration": per_iter,
            "iterations_without_kernels": int((counts == 0).sum())}
    return KernelTimes([float(s) / 1e6 if c else None for s, c in zip(sums, counts)],
                       [int(c) for c in counts], info)


class KernelClock:
    """Subscribes to CUPTI kernel records for one measurement at a time (picklable: an isolated
    child opens CUPTI in its own process)."""

    source = "cupti-activity"

    def __init__(self) -> None:
        self._subscriber: cupti_activity.Subscriber | None = None
        self._offset = (0, 0)

    def __getstate__(self) -> dict[str, Any]:
        return {"_subscriber": None, "_offset": (0, 0)}

    @staticmethod
    def unavailable(timer_kind: str | None = None) -> str | None:
        """Why kernel timing cannot run here (None: it can)."""
        if timer_kind is not None and timer_kind not in CUDA_TIMERS:
            return f"the session's timer is {timer_kind!r}, not a CUDA stream"
        profiler = cupti_activity.external_profiler()
        if profiler:
            return f"an external profiler wraps this process ({profiler} is set): no second CUPTI subscriber"
        if not cupti_activity.installed():
            return "cupti-python is not installed (pip install 'hipdnn-trace[nvidia]')"
        return None

    def begin(self) -> None:
        """Start receiving kernel records; kernels enqueued before now are dropped."""
        if self._subscriber is None:
            self._subscriber = cupti_activity.Subscriber()
        cupti_activity.SINK.subscribe(self._subscriber)
        self._subscriber.drain()
        self._offset = clock_offset()

    def finish(self, starts: Sequence[int], ends: Sequence[int], iterations: Sequence[int]) -> KernelTimes:
        """Stop receiving; the kernel sum of each host window ``[starts[k], ends[k]]``."""
        if self._subscriber is None:
            raise RuntimeError("the kernel clock was never started")
        cupti_activity.SINK.unsubscribe(self._subscriber)   # flushes: the last records reach us first
        records = self._subscriber.take()
        times = kernel_times(records, self._offset[0], starts, ends, iterations)
        times.info["clock_offset_uncertainty_ns"] = self._offset[1]
        return times

    def abort(self) -> None:
        """Stop receiving after a failed measurement."""
        if self._subscriber is not None:
            cupti_activity.SINK.unsubscribe(self._subscriber)

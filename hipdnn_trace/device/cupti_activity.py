"""CUPTI's kernel activity records, in process: the GPU's own start/end of every kernel.

One pair of buffer callbacks exists per process (CUPTI allows no more), so the
records go through one :data:`SINK` that hands every completed buffer to each
subscriber: the kernel clock (``--timing kernel``, the device time of an
iteration) and the ``--profile cupti`` kernel trace can listen at once. Kernel
activity is enabled while at least one subscriber is active and disabled after
the last one stops, so work outside measurements runs untraced.

Timestamps are CUPTI's clock; :func:`clock_offset` measures its offset to the
trace clock (CLOCK_BOOTTIME) by bracketing ``cupti.get_timestamp``.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hipdnn_trace.device.clock import now_ns
from hipdnn_trace.errors import ToolMissingError

BUFFER_BYTES = 16 << 20

#: (name, start, end, grid x/y/z, block x/y/z, stream, device, correlation) per kernel
Record = tuple[str, int, int, int, int, int, int, int, int, int, int, int]

#: Environment variables that an external CUDA profiler sets in the process it wraps. Under one
#: of them a second CUPTI subscriber would fail or, worse, measure the profiler's replays.
EXTERNAL_PROFILER_ENV = ("CUDA_INJECTION64_PATH", "NSYS_PROFILING_SESSION_ID", "NV_NSIGHT_INJECTION_TRANSPORT_TYPE",
                         "HIPDNN_TRACE_UNDER_PROFILER")


def cupti() -> Any:
    """cupti-python's module, or ToolMissingError (one line)."""
    try:
        from cupti import cupti as module
    except ImportError as exc:
        raise ToolMissingError(f"CUPTI kernel activity needs the python package cupti-python ({exc})") from None
    return module


def installed() -> bool:
    """cupti-python is importable (checked without loading libcupti into this process)."""
    try:
        return importlib.util.find_spec("cupti") is not None
    except (ImportError, ValueError):
        return False


def external_profiler() -> str | None:
    """The variable that says an external profiler wraps this process, or None."""
    for name in EXTERNAL_PROFILER_ENV:
        if os.environ.get(name):
            return name
    return None


def clock_offset(host_now: Callable[[], int] = now_ns, device_now: Callable[[], int] | None = None,
                 samples: int = 7) -> tuple[int, int]:
    """(trace clock - CUPTI clock in ns, uncertainty in ns) from the tightest of ``samples`` brackets."""
    if device_now is None:
        device_now = cupti().get_timestamp
    best: tuple[int, int] | None = None
    for _ in range(samples):
        t0 = host_now()
        c = int(device_now())
        t1 = host_now()
        width = t1 - t0
        if best is None or width < best[1]:
            best = ((t0 + t1) // 2 - c, width)
    assert best is not None
    return best


def assign_iterations(start_ns: np.ndarray, iter_start: Sequence[int], iter_end: Sequence[int],
                      iterations: Sequence[int]) -> np.ndarray:
    """Iteration number per kernel start (-1: in no iteration window). Windows are disjoint:
    the harness synchronizes every iteration, so iteration i's kernels start inside its host
    window ``[start_ns, end_ns]`` on the trace clock."""
    lo = np.asarray(iter_start, dtype=np.int64)
    hi = np.asarray(iter_end, dtype=np.int64)
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    its = np.asarray(iterations, dtype=np.int64)[order]
    pos = np.searchsorted(lo, start_ns, side="right") - 1
    out = np.full(start_ns.shape, -1, dtype=np.int64)
    ok = (pos >= 0)
    ok[ok] = start_ns[ok] <= hi[pos[ok]]
    out[ok] = its[pos[ok]]
    return out


class Subscriber:
    """Collects the kernel records CUPTI completes while it is subscribed."""

    def __init__(self) -> None:
        self._records: list[Record] = []
        self._lock = threading.Lock()

    def _receive(self, rows: list[Record]) -> None:
        with self._lock:
            self._records.extend(rows)

    def drain(self) -> list[Record]:
        """Flush CUPTI's buffers and take every record received so far."""
        SINK.flush()
        return self.take()

    def take(self) -> list[Record]:
        """Every record received so far (no flush)."""
        with self._lock:
            rows, self._records = self._records, []
        return rows


class _Sink:
    """The process's one pair of CUPTI buffer callbacks, fanning records out to subscribers."""

    def __init__(self) -> None:
        self.registered = False
        self.subscribers: list[Subscriber] = []
        self._kind: Any = None

    def _requested(self) -> tuple[int, int]:
        return BUFFER_BYTES, 0

    def _completed(self, activities: list) -> None:
        kind = self._kind
        rows = [(a.name, int(a.start), int(a.end), int(a.grid_x), int(a.grid_y), int(a.grid_z), int(a.block_x),
                 int(a.block_y), int(a.block_z), int(a.stream_id), int(a.device_id), int(a.correlation_id))
                for a in activities if a.kind == kind]
        for subscriber in list(self.subscribers):
            subscriber._receive(rows)

    def subscribe(self, subscriber: Subscriber) -> None:
        """Start delivering kernel records to ``subscriber`` (enables kernel activity)."""
        module = cupti()
        if subscriber in self.subscribers:
            return
        if not self.registered:
            self._kind = module.ActivityKind.CONCURRENT_KERNEL
            module.activity_register_callbacks(self._requested, self._completed)
            self.registered = True
        if not self.subscribers:
            module.activity_enable(self._kind)
        self.subscribers.append(subscriber)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        """Stop delivering to ``subscriber``; the last one out disables kernel activity."""
        if subscriber not in self.subscribers:
            return
        module = cupti()
        module.activity_flush_all(1)
        self.subscribers.remove(subscriber)
        if not self.subscribers:
            module.activity_disable(self._kind)

    def flush(self) -> None:
        if self.registered:
            cupti().activity_flush_all(1)


SINK = _Sink()

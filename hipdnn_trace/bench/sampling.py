"""Samplers (NVML clocks) read on a thread of their own while a measurement runs.

One NVML reading (SM + memory clock) costs a few hundred microseconds on the H100 machine. Asked
from the loop, every block of iterations paid it between two iterations; on a thread, the loop
never waits for it (ctypes releases the GIL during the NVML call). Each reading is stamped on the
trace clock; after the measurement every row gets, per key, the lowest reading taken during it
(start..end), else (a row shorter than the sampling period) the latest reading at or before its start,
else the first one after it. The lowest, so a throttled stretch shows on every row it touched, and a row
is never judged by a clock it did not run at: a reading from after the row ended is used only when no
earlier one exists.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

from hipdnn_trace.device.clock import now_ns

Sampler = Callable[[], dict[str, float | None]]

#: Seconds between readings (NVML's clocks themselves are updated on a similar scale).
INTERVAL_S = 0.1


class BackgroundSampler:
    """Reads ``samplers`` once at :meth:`start` and every ``interval_s`` until :meth:`stop`."""

    def __init__(self, samplers: Sequence[Sampler], interval_s: float = INTERVAL_S) -> None:
        self.samplers = list(samplers)
        self.interval_s = interval_s
        self.times: list[int] = []
        self.readings: list[dict[str, float | None]] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def _read(self) -> bool:
        reading: dict[str, float | None] = {}
        try:
            for sampler in self.samplers:
                reading.update(sampler())
        except Exception as exc:   # a failing sampler ends sampling, not the measurement
            self.error = f"{type(exc).__name__}: {exc}"
            return False
        with self._lock:
            if self._stop.is_set() and self.readings:
                return False       # finished after stop(): the measurement's rows are already matched
            self.times.append(now_ns())
            self.readings.append(reading)
        return True

    def start(self) -> None:
        """One reading now (so every row has one), then the thread."""
        if not self.samplers or not self._read():
            return
        self._thread = threading.Thread(target=self._run, name="hipdnn-trace-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if not self._read():
                return

    def stop(self) -> None:
        """End sampling without waiting for a reading in flight: one NVML reading took tens of ms on a
        virtualised H200, and joining the thread cost every measurement that much (50 ms per graph
        measured). A reading that completes after this is dropped (``_read``); the thread ends by itself."""
        with self._lock:
            self._stop.set()
        self._thread = None

    def columns(self, row_starts: Sequence[int],
                row_ends: Sequence[int] | None = None) -> dict[str, list[float | None]]:
        """Per sampled key, the value in force during each row (the module docstring's rule; without
        ``row_ends`` the rows are instants at their starts)."""
        with self._lock:
            times, readings = list(self.times), list(self.readings)
        if not readings:
            return {}
        stamps = np.asarray(times, dtype=np.int64)
        starts = np.asarray(row_starts, dtype=np.int64)
        ends = starts if row_ends is None else np.maximum(np.asarray(row_ends, dtype=np.int64), starts)
        first = np.searchsorted(stamps, starts, side="left")   # first reading at or after the start
        last = np.searchsorted(stamps, ends, side="right")     # one past the last reading at or before the end
        before = np.maximum(np.searchsorted(stamps, starts, side="right") - 1, 0)
        keys = list(dict.fromkeys(k for reading in readings for k in reading))
        out: dict[str, list[float | None]] = {}
        for key in keys:
            values = [readings[j].get(key) for j in range(len(readings))]
            column: list[float | None] = []
            for lo, hi, at in zip(first.tolist(), last.tolist(), before.tolist()):
                during = [v for v in values[lo:hi] if v is not None]
                column.append(min(during) if during else values[at])
            out[key] = column
        return out

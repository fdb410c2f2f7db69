"""Timers: how long one execution took on the device.

The harness calls ``start()`` before and ``stop()`` after enqueueing one execution,
synchronizes, then reads ``elapsed_ms()``. Device timers record events on the
session's stream; the host timer reads the host clock, which is the device time
for a CPU backend.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Timer(Protocol):
    kind: str          # "host" | "cuda-event" | "cuda-event-staged" | "hip-event" | "torch-event"

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def elapsed_ms(self) -> float:
        """Time between the last start() and stop(); call after synchronizing."""


class HostTimer:
    """perf_counter_ns around a synchronous execution."""

    kind = "host"

    def __init__(self) -> None:
        self._t0 = self._t1 = 0

    def start(self) -> None:
        self._t0 = time.perf_counter_ns()

    def stop(self) -> None:
        self._t1 = time.perf_counter_ns()

    def elapsed_ms(self) -> float:
        return (self._t1 - self._t0) / 1e6

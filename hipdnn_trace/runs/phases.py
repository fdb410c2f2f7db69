"""Where a run command's wall went, phase by phase (run.json ``phases_s``).

A suite of fast graphs spends a noticeable part of the command outside any graph: the interpreter
and imports, planning, each worker's set-up, closing. The per-graph breakdown (breakdown.csv) cannot
show those, and with several GPUs they decide how far the wall divides; so the run records them.
"""

from __future__ import annotations

import os
import time


def process_age_s() -> float | None:
    """Seconds since this process started (Linux /proc, 10 ms steps), or None elsewhere."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")   # field 22: start time in ticks after boot
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


class PhaseClock:
    """Consecutive phases, each ending at a mark: ``before_plan`` (process start: interpreter, imports
    and a calling script, if any), ``plan``, ``set_up`` (child processes set up before the first graph),
    ``graphs``, ``close`` (until the final tables are written)."""

    def __init__(self) -> None:
        age = process_age_s()
        self._last = self.origin = time.monotonic() - (age or 0.0)   # the process's start, monotonic
        self._spent: dict[str, float] = {}

    def since_start(self, at: float) -> float:
        """Seconds from the process's start to the monotonic time ``at``."""
        return round(max(0.0, at - self.origin), 3)

    def mark(self, phase: str, at: float | None = None) -> None:
        """``phase`` ended now (or at the monotonic time ``at``)."""
        now = time.monotonic() if at is None else at
        self._spent[phase] = round(self._spent.get(phase, 0.0) + max(0.0, now - self._last), 3)
        self._last = max(self._last, now)

    def seconds(self) -> dict[str, float]:
        return dict(self._spent)

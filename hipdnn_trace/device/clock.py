"""The one host clock every timestamp in hipdnn-trace uses.

CLOCK_BOOTTIME in nanoseconds: rocprofv3 stamps its records with it, so host phases,
AMD kernel traces and (after an offset measured at start) CUPTI records share a
timeline without guessing. Elsewhere we fall back to CLOCK_MONOTONIC.
"""

from __future__ import annotations

import time

_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)
CLOCK_NAME = "CLOCK_BOOTTIME" if hasattr(time, "CLOCK_BOOTTIME") else "CLOCK_MONOTONIC"


def now_ns() -> int:
    """Current host time in ns on the trace clock."""
    return time.clock_gettime_ns(_CLOCK)

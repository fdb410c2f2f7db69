"""The one host clock every timestamp in hipdnn-trace uses.

CLOCK_BOOTTIME in nanoseconds: rocprofv3 stamps its records with it, so host phases,
AMD kernel traces and (after an offset measured at start) CUPTI records share a
timeline without guessing. Elsewhere we fall back to CLOCK_MONOTONIC.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)
CLOCK_NAME = "CLOCK_BOOTTIME" if hasattr(time, "CLOCK_BOOTTIME") else "CLOCK_MONOTONIC"


#: Current host time in ns on the trace clock. A partial, not a def: it is read twice per timed
#: iteration, and a call that stays in C is a fraction of a Python function's cost.
now_ns: Callable[[], int] = functools.partial(time.clock_gettime_ns, _CLOCK)

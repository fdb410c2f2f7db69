"""Peak RSS of a child process, for memory tests: Linux lets a process reset its high-water mark
(``/proc/self/clear_refs`` = 5) and read it back (``VmHWM``), so a test measures the peak of
one step, not of the imports and inputs before it."""

from __future__ import annotations

import os
from pathlib import Path

#: Pasted at the top of a child's ``python -c`` script: ``status(field)`` in bytes, ``reset_peak()``.
CHILD_HELPERS = '''
def status(field):
    return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(field + ":"))

def reset_peak():
    with open("/proc/self/clear_refs", "w") as fh:   # peak RSS from here on
        fh.write("5")
'''


def can_reset_peak() -> bool:
    """Whether this system lets a process reset its peak RSS (Linux with /proc)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def fixed_mmap_env() -> dict[str, str]:
    """This environment with glibc's mmap threshold fixed at its 128 KiB default, for a child whose peak
    should be its live allocations. By default glibc raises the threshold to the size of each mmapped block
    freed (up to 32 MiB), so after the first chunk's 8 MiB temporaries are freed the next ones come from the
    brk heap, which keeps freed memory and reuses it in an order that changes run to run: the same torch
    comparison measured 76 or 141 bytes per element. Fixed, every large block is mmapped and returned on free
    (62-76 bytes per element, every run)."""
    return {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}


def measuring_env(repo: Path) -> dict[str, str]:
    """The bare environment of a child whose peak a test compares with an estimate of live memory: the
    package on the path, one BLAS thread, and glibc's mmap threshold fixed (``fixed_mmap_env``). With the
    default threshold the same attention child measured 111 or 126 MiB, run to run, on one machine."""
    return {"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "1",
            "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}

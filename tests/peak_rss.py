"""Peak RSS of a child process, for memory tests: Linux lets a process reset its high-water mark
(``/proc/self/clear_refs`` = 5) and read it back (``VmHWM``), so a test measures the peak of
one step, not of the imports and inputs before it."""

from __future__ import annotations

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

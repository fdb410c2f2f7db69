"""STAND-IN for rocprofiler-sdk's Python ``roctx`` module — not the real one.

Same functions and signatures as rocprofiler-sdk ``source/lib/python/roctx/__init__.py``:
``rangePush(msg)``, ``rangePop()``, ``mark(msg)``, ``profilerPause(tid=0)``,
``profilerResume(tid=0)``, ``getThreadId()``. Instead of talking to a profiler, each
call is appended to the file named by ``STAND_IN_ROCTX_LOG`` as one JSON line with a
CLOCK_BOOTTIME timestamp (the clock rocprofv3 stamps), the process id and the thread id;
the stand-in rocprofv3 turns that log into marker and kernel traces. Every call is also
kept in ``CALLS`` for in-process tests.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

CALLS: list[tuple[str, Any]] = []
_LOG: list[Any] = []
_depth = 0


def _emit(op: str, msg: Any = None) -> None:
    CALLS.append((op, msg))
    path = os.environ.get("STAND_IN_ROCTX_LOG")
    if not path:
        return
    if not _LOG:
        _LOG.append(open(path, "a", encoding="utf-8"))   # kept open for the process
    fh = _LOG[0]
    fh.write(json.dumps({"op": op, "msg": msg, "t": time.clock_gettime_ns(time.CLOCK_BOOTTIME),
                         "pid": os.getpid(), "tid": threading.get_native_id()}) + "\n")
    fh.flush()


def rangePush(msg: str) -> int:  # upstream's name
    global _depth
    _emit("push", msg)
    _depth += 1
    return _depth - 1


def rangePop() -> int:
    global _depth
    _emit("pop")
    if _depth == 0:
        return -1
    _depth -= 1
    return _depth


def mark(msg: str) -> None:
    if msg is not None:
        _emit("mark", msg)


def profilerPause(tid: int = 0) -> int:
    _emit("pause", tid)
    return 0


def profilerResume(tid: int = 0) -> int:
    _emit("resume", tid)
    return 0


def getThreadId() -> int:
    return threading.get_native_id()

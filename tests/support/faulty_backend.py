"""A backend that fails on purpose: the stand-in for a crashing vendor library.

The graph's name picks what goes wrong (``<mode>__anything``); every other graph,
and every mode that only spoils outputs, runs the CPU reference underneath, so
healthy graphs time and validate like on any backend.

Failures in ``execute`` (after init and bind, inside the timed loop):
``abort`` (os.abort), ``segfault`` (reads address 0), ``hang`` (sleeps for an
hour), ``sigkill`` (SIGKILL to itself, as the kernel's out-of-memory killer
does), ``exit`` (os._exit(3)), ``raise`` (a Python exception), ``noisy`` (100 KiB
on stderr, then abort), ``slow`` (sleeps SLOW_S, then computes), ``gated`` (waits until the file
named by $FAULTY_GATE exists, at most GATE_S, then computes: a test decides when the run goes on).
Failure in ``prepare``: ``oom`` (lowers RLIMIT_AS just above what the process
maps and allocates 16 GiB: a deterministic MemoryError, nothing really allocated).
Spoiled outputs: ``unwritten`` (output left all poison), ``partial`` (half of it),
``nan`` / ``inf`` (one element NaN / +Inf).

Registered by tests through ``hipdnn_trace.backends.REGISTRY`` (in-process) or
``HIPDNN_TRACE_EXTRA_BACKENDS=faulty=faulty_backend:FaultyBackend`` with this
folder on PYTHONPATH (CLI subprocesses).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
import time
from collections.abc import Iterable
from typing import Any

import numpy as np
from stand_in import DelegatingSession, ReferenceStandIn

from hipdnn_trace.backends.base import Engine, RunOptions
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.validate.poison import poison

NAME = "faulty"
MODES = ("abort", "segfault", "hang", "sigkill", "exit", "raise", "noisy", "slow", "gated", "oom",
         "unwritten", "partial", "nan", "inf")
SLOW_S = 0.05
GATE_S = 120.0


def mode_of(graph: Graph) -> str:
    head = graph.name.split("__", 1)[0]
    return head if head in MODES else "ok"


def _mapped_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def allocate_too_much() -> None:
    """MemoryError, deterministically: the address-space limit refuses the mapping."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _mapped_bytes() + (256 << 20)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        np.ones(2**31, dtype=np.float64)   # 16 GiB
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _wait_for_gate() -> None:
    gate, end = os.environ.get("FAULTY_GATE", ""), time.monotonic() + GATE_S
    while gate and not os.path.exists(gate) and time.monotonic() < end:
        time.sleep(0.02)


class FaultySession(DelegatingSession):
    def __init__(self, inner: Any, mode: str) -> None:
        super().__init__(inner)
        self.mode = mode

    def execute(self) -> None:
        mode = self.mode
        if mode == "abort":
            os.abort()
        elif mode == "segfault":
            ctypes.string_at(0)
        elif mode == "hang":
            time.sleep(3600)
        elif mode == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif mode == "exit":
            os._exit(3)
        elif mode == "raise":
            raise RuntimeError("device fault injected by the test backend")
        elif mode == "noisy":
            for i in range(1024):
                sys.stderr.write(f"noise line {i:04d} " + "x" * 88 + "\n")
            sys.stderr.write("last words before the abort\n")
            sys.stderr.flush()
            os.abort()
        elif mode == "slow":
            time.sleep(SLOW_S)
        elif mode == "gated":
            _wait_for_gate()
        super().execute()

    def fetch(self, uids: Iterable[int]) -> dict[int, np.ndarray]:
        out = super().fetch(uids)
        for array in out.values():
            flat = array.reshape(-1)
            if self.mode == "unwritten":
                poison(array)
            elif self.mode == "partial":
                poison(flat[: flat.size // 2])
            elif self.mode == "nan":
                flat[0] = np.nan
            elif self.mode == "inf":
                flat[-1] = np.inf
        return out

    def info(self) -> dict[str, Any]:
        return {"timer": "host", "fault": self.mode}


class FaultyBackend(ReferenceStandIn):
    name = NAME

    def engines(self, graph: Graph, options: RunOptions) -> list[Engine]:
        return []

    def prepare(self, graph: Graph, engine: Engine | None, options: RunOptions) -> FaultySession:
        mode = mode_of(graph)
        if mode == "oom":
            allocate_too_much()
        return FaultySession(self.reference.prepare(graph, engine, options), mode)

    def versions(self) -> dict[str, str]:
        return {"faulty": "test"}

"""Following one isolated child from the parent: its messages (stage, iteration, result), the tail of
its output, its deadline, and what killed it, in words.

bench/isolation.py decides which child runs which graph and what a dead child's record says; this
module only watches a child it was given and reports an :class:`Outcome`.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from hipdnn_trace.bench.forkserver import ForkServer, ForkServerError
from hipdnn_trace.bench.records import GraphRun
from hipdnn_trace.device.clock import now_ns

__all__ = ["RESULT_EXIT_GRACE_S", "Outcome", "Watch", "death", "kill_session", "oom_kills", "tail_line"]

#: A child that sent its result but does not exit (a library stuck in teardown) is
#: killed after this long; its result stands.
RESULT_EXIT_GRACE_S = 10.0
_FRAME = re.compile(r'File "(.*?)", line (\d+) in (\S+)')


def oom_kills() -> int | None:
    """The kernel's out-of-memory kill count for this process's cgroup (v2 or v1)."""
    from hipdnn_trace.backends.reference.memory import memory_cgroups

    candidates = [mount / path.lstrip("/") / ("memory.events" if version == 2 else "memory.oom_control")
                  for version, mount, path in memory_cgroups()]
    for path in candidates:
        try:
            for row in path.read_text().splitlines():
                key, _, value = row.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            continue
    return None


def tail_line(tail: bytes, limit: int = 300) -> str:
    """A child's last words as one line: what the library printed last, then where
    Python was when the process died (faulthandler's innermost frame)."""
    text = tail.decode("utf-8", "replace")
    before, fatal, after = text.partition("Fatal Python error:")
    parts = [ln.strip() for ln in before.splitlines()
             if ln.strip() and not ln.startswith("Extension modules:")][-2:]
    if fatal:
        rest = after.splitlines()
        where = next((m for ln in rest if (m := _FRAME.search(ln))), None)
        parts.append(f"{fatal} {rest[0].strip() if rest else ''}".strip()
                     + (f" in {Path(where[1]).name}:{where[2]} {where[3]}" if where else ""))
    joined = " | ".join(parts)
    return joined if len(joined) <= limit else "..." + joined[-limit:]


def death(exitcode: int | None, oom_before: int | None) -> str:
    """What killed the child, in words."""
    if exitcode is None:
        return "child process vanished"
    if exitcode < 0:
        sig = signal.Signals(-exitcode)
        if sig == signal.SIGKILL:
            after = oom_kills()
            if oom_before is not None and after is not None and after > oom_before:
                return "killed by the kernel's out-of-memory killer (SIGKILL)"
            return "killed by SIGKILL (out of memory? the kernel's OOM killer sends it; see dmesg)"
        return f"crashed with {sig.name} ({signal.strsignal(sig) or sig.name})"
    return f"child process exited with status {exitcode} without a result"


def kill_session(pid: int) -> None:
    """SIGKILL the child's whole session (it called setsid)."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
            return
        except ProcessLookupError:
            continue
        except PermissionError:
            return


@dataclass
class Outcome:
    result: GraphRun | None = None
    failed: str | None = None
    timed_out: bool = False
    exitcode: int | None = None
    phase: str = "start"
    tail: bytes = b""
    first_message_ns: int | None = None   # when the child's first message arrived (its start-up)
    data: bytes | None = None          # the graph's bytes, once the child has read them
    warmed: dict[str, float] | None = None   # a warm-up job's answer (seconds per part)
    versions: dict[str, str] | None = None   # and the libraries' versions as the child loaded them


class Watch:
    """Follow one child: phases (also handed to ``on_stage``), iteration counts, output tail, result,
    deadline, exit."""

    def __init__(self, pid: int, server: ForkServer, status: Connection, output: Connection,
                 timeout_s: float | None, tail_bytes: int, on_iteration: Callable[[int], None] | None,
                 resident: bool = False, on_stage: Callable[[str], None] | None = None) -> None:
        self.pid, self.server, self.status, self.output = pid, server, status, output
        self.resident = resident   # a child that stays for the next graph: its record ends the wait
        self.deadline = None if not timeout_s else time.monotonic() + timeout_s
        self.tail_bytes = tail_bytes
        self.on_iteration = on_iteration
        self.on_stage = on_stage
        self.out = Outcome()
        self.tail = bytearray()
        self.open: list[Any] = [status, output]

    def _read_status(self) -> None:
        try:
            raw = self.status.recv_bytes()
        except (EOFError, OSError):
            self.open.remove(self.status)
            return
        if self.out.first_message_ns is None:
            self.out.first_message_ns = now_ns()
        if raw[:1] == b"W":
            self.out.warmed, self.out.versions = pickle.loads(raw[1:])
            return
        if raw[:1] == b"R":
            self.out.result = pickle.loads(raw[1:])
            grace = time.monotonic() + RESULT_EXIT_GRACE_S
            self.deadline = grace if self.deadline is None else min(self.deadline, grace)
            return
        kind, value = pickle.loads(raw)
        if kind == "phase":
            self.out.phase = value
            if self.on_stage is not None:
                self.on_stage(str(value))
        elif kind == "iter":
            base = self.out.phase.split(", iteration")[0]
            self.out.phase = f"{base}, iteration {value}"
            if self.on_iteration is not None:
                self.on_iteration(int(value))
        elif kind == "failed":
            self.out.failed = str(value)
        elif kind == "read":
            self.out.data = value

    def _read_output(self) -> None:
        try:
            chunk = os.read(self.output.fileno(), 65536)
        except OSError:
            chunk = b""
        if not chunk:
            self.open.remove(self.output)
            return
        self.tail += chunk
        if len(self.tail) > self.tail_bytes:
            del self.tail[:len(self.tail) - self.tail_bytes]

    def _drain(self) -> None:
        """After exit: whatever is still buffered in the pipes (never waits for more)."""
        for conn, read in ((self.status, self._read_status), (self.output, self._read_output)):
            while conn in self.open and conn.poll(0):
                read()

    def wait(self) -> Outcome:
        try:
            while True:
                timeout = 1.0
                if self.deadline is not None:
                    timeout = min(timeout, self.deadline - time.monotonic())
                    if timeout <= 0:
                        self._drain()
                        kill_session(self.pid)
                        self.out.timed_out = self.out.result is None
                        break
                ready = wait([*self.open, self.server], timeout)
                if self.status in ready:
                    self._read_status()
                if self.output in ready:
                    self._read_output()
                if self.resident and (self.out.result is not None or self.out.warmed is not None):
                    while self.output in self.open and self.output.poll(0):
                        self._read_output()
                    self.out.tail = bytes(self.tail)
                    return self.out   # alive and waiting for its next graph
                if self.server in ready:
                    break
        except BaseException:
            kill_session(self.pid)   # interrupted: take the child down with us
            try:
                self.server.exit_code()
            except ForkServerError:
                pass
            raise
        self.out.exitcode = self.server.exit_code()
        self._drain()
        self.out.tail = bytes(self.tail)
        return self.out

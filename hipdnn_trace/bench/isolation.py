"""Run one graph in a child process, so a crash, hang or out-of-memory costs one row.

Vendor libraries segfault, abort and hang. With ``--isolate`` each graph runs
:func:`~hipdnn_trace.bench.graph_run.run_graph` in a fresh child process; the
child validates there (so no tensors cross the process boundary, except the
outputs a split A/B sends back for B-against-A) and sends the :class:`GraphRun` back. If it dies
instead, the parent records every configuration as ``error`` with what killed it (signal name, out-of-memory,
timeout), the last phase it reported and the tail of its output, and the suite
goes on. Children come from :mod:`hipdnn_trace.bench.forkserver` (a clean
process that forks one per graph in milliseconds).

Phases are the graph's stages (:mod:`hipdnn_trace.bench.stages`: inputs, reference, and each
configuration's ``init``, ``warmup``, ``execute`` from the markers the harness already sets): the
child reports each over a pipe, so the parent knows where a child was when it died, and shows it on
the progress line while the child runs.
"""

from __future__ import annotations

import os
import pickle
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from hipdnn_trace import backends
from hipdnn_trace.bench.child_watch import (
    RESULT_EXIT_GRACE_S,
    Outcome,
    Watch,
    death,
    kill_session,
    oom_kills,
    tail_line,
)
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.early import HARNESS_MODULES, server_preload
from hipdnn_trace.bench.forkserver import ForkServer, ForkServerError
from hipdnn_trace.bench.graph_run import RunSettings, run_graph
from hipdnn_trace.bench.isolation_child import _Job, _Warm
from hipdnn_trace.bench.loop import Phase
from hipdnn_trace.bench.records import ERROR, ConfigRun, GraphRun
from hipdnn_trace.device.clock import now_ns
from hipdnn_trace.errors import UserError
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.graph.sources import GraphSource, MemberBytes
from hipdnn_trace.markers import Markers

#: Default --graph-timeout: generous for one graph on a GPU, short enough to catch a hang.
DEFAULT_TIMEOUT_S = 600.0
#: How much of a child's stderr (and stdout) is kept for the record.
STDERR_TAIL_BYTES = 4096
#: After a child died of a signal that usually comes from outside (SIGTERM, SIGINT,
#: SIGHUP), wait this long for the same signal to reach us before recording a crash.
OUTSIDE_SIGNAL_GRACE_S = 1.0
_OUTSIDE_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
_CHILD = "hipdnn_trace.bench.isolation_child:child_main"
_RESIDENT_CHILD = "hipdnn_trace.bench.isolation_child:resident_main"
#: A warm-up job (device context, library loads) that takes longer than this is given up.
WARM_TIMEOUT_S = 300.0
#: A resident child is retired after this many graphs, or earlier when its resident set has grown by
#: more than RETIRE_GROWTH_BYTES since its set-up: a library's leak is bounded by what it costs, not by a
#: count. (A count of 100 replaced the child of a 108-graph suite once, 3.3-4.7 s of set-up on an H200
#: host, with no growth to bound.)
MAX_JOBS_PER_CHILD = 1000
RETIRE_GROWTH_BYTES = 8 << 30


# --------------------------------------------------------------------- records

def failure_run(source: GraphSource, configs: Sequence[Config], message: str, *, data: bytes | None = None,
                info: dict[str, Any] | None = None, span: tuple[int, int] | None = None) -> GraphRun:
    """The record of a graph whose run died: every configuration ``error`` with ``message``.

    When the bytes the run read are given, the graph is loaded from them (cheaply, in
    this process) so the rows carry its name and graph_id, which resume and merge key
    on. The source is never read again here: a read that failed or hung once would
    do it again, this time outside any child.
    """
    from hipdnn_trace.graph.load import load_bytes

    run = GraphRun(source=source.name, name=Path(source.name).stem)
    graph: Graph | None = None
    if data is not None:
        try:
            graph = load_bytes(data, source.name, allow_unknown=True)
        except UserError:
            graph = None
    if graph is None:
        run.status, run.error = ERROR, message
    else:
        run.graph, run.graph_id, run.name = graph, graph.graph_id, graph.label
        for cfg in configs:
            run.configs.append(ConfigRun(config=cfg, status=ERROR, error=message, info=dict(info or {})))
    if span is not None:
        run.phases.append(Phase("child process (failed)", span[0], span[1]))
    return run


# ---------------------------------------------------------------------- parent

class IsolatedRunner:
    """Callable like :func:`run_graph`; runs each graph in a fresh child process.

    Use as a context manager (or call :meth:`close`): it owns the fork server. ``env``
    is added to the fork server's environment when it starts, so every child inherits
    it before importing anything (``--gpus``: the GPU visibility variable).
    """

    def __init__(self, timeout_s: float | None = DEFAULT_TIMEOUT_S, *, tail_bytes: int = STDERR_TAIL_BYTES,
                 env: dict[str, str] | None = None, resident: bool = False) -> None:
        self.timeout_s = timeout_s or None
        self.tail_bytes = tail_bytes
        self.server = ForkServer.adopt(env) or ForkServer(HARNESS_MODULES, env=env)   # bench/early.py
        self.resident = resident           # one child runs graph after graph (see resident_main)
        self._child: _Child | None = None  # the resident child, idle between graphs
        self._running: int | None = None   # pid of the child now running, for abort()
        self._warm_with: tuple[list[Config], RunSettings] | None = None   # set by a warm() that worked
        self._handed: tuple[GraphSource, bytes] | None = None   # the next graph, sent to the resident child
        self.warm_ups = 0                  # resident children set up before their first graph
        self.successor_warm_ups: list[float] = []   # seconds, each successor set up between graphs
        self.versions: dict[str, str] = {}  # the libraries' versions as the set-up child loaded them

    def abort(self) -> None:
        """Kill the child now running, if any (from another thread: an interrupted pool of workers)."""
        pid = self._running
        if pid is not None:
            kill_session(pid)

    def __enter__(self) -> IsolatedRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._retire()
        self.server.close()

    def __call__(self, source: GraphSource, configs: Sequence[Config], settings: RunSettings,
                 markers: Markers, *, on_iteration: Callable[[int], None] | None = None,
                 on_stage: Callable[[str], None] | None = None) -> GraphRun:
        handed, self._handed = self._handed, None
        if handed is not None and handed[0] is source:   # already with the resident child (hand_over_next)
            run = self._run(handed[1], source, configs, on_iteration, on_stage, handed=True)
            run.ready_ns = run.ready_ns or _last_phase_end(run)
            return run
        if handed is not None:   # asked for another graph than the one handed over: that child must not run both
            self._retire()
        registry = _registry(configs)
        job = _job(source, configs, settings, markers)
        try:
            payload = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            # a reader only this process has (a lambda from a script): read here, send the bytes
            try:
                data = source.read()
            except UserError:   # too big or unreadable: nothing for a child to do
                return run_graph(source, configs, settings, markers)   # records the read error itself
            job.source = replace(source, read=MemberBytes(data))
            try:
                payload = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
            except (pickle.PicklingError, TypeError, AttributeError) as exc:
                raise UserError(f"--isolate: cannot hand this run's settings to a child process "
                                f"({' '.join(str(exc).split())}); use --no-isolate") from None
        self._preload(registry, settings.reference_device)
        if self._warm_with is not None and self._needs_child(_config_key(configs)):
            self.warm(*self._warm_with)   # a retired or crashed child's successor starts warm too
        return self._run(payload, source, configs, on_iteration, on_stage)

    def between_graphs(self) -> None:
        """After a graph, before the next is handed out: a resident child that reached its job limit
        or died is replaced and set up now, so no graph's wall carries a process start (bench/warm.py)."""
        if self._handed is not None or self._warm_with is None or \
                not self._needs_child(_config_key(self._warm_with[0])):
            return   # (a child already running the next graph is not replaced under it)
        began = time.monotonic()
        if self.warm(*self._warm_with) is not None:
            self.successor_warm_ups.append(round(time.monotonic() - began, 3))

    def hand_over_next(self, source: GraphSource, configs: Sequence[Config], settings: RunSettings,
                       markers: Markers) -> bool:
        """Give the resident child its next graph now, before this process notes and commits the one
        it just finished, so the child starts at once instead of idling while the suite writes (2.9 s
        of a warm graphs/perf run on one H200, docs/benchmarks.md). Only to a child that is alive, set
        up for these configurations and not due to retire; False when nothing was sent (the next call
        hands the graph out as usual). The call for ``source`` then only follows the child."""
        child = self._child
        key = _config_key(configs)
        if not self.resident or self._handed is not None or child is None or child.jobs_w is None \
                or child.key != key or child.spent():
            return False
        try:
            payload = pickle.dumps(_job(source, configs, settings, markers), protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            return False   # a reader only this process has: the usual path reads it here
        try:
            child.jobs_w.send_bytes(payload)
        except OSError:
            return False   # the child is gone: the usual path starts another
        child.jobs += 1
        self._handed = (source, payload)
        return True

    def _needs_child(self, key: str) -> bool:
        """Whether the next job with this key starts a new resident child."""
        child = self._child
        return child is None or child.key != key or child.spent()

    def _preload(self, registry: dict[str, str], reference_device: str = "cpu") -> None:
        """What the server imports once, before it forks anything (bench/early.py server_preload)."""
        self.server.preload = server_preload(registry, reference_device)

    def start_server(self, configs: Sequence[Config], settings: RunSettings) -> None:
        """Start the fork server now, importing in the background while this process goes on (the
        first job would start it anyway, later)."""
        self._preload(_registry(configs), settings.reference_device)
        self.server.start()

    def warm(self, configs: Sequence[Config], settings: RunSettings) -> dict[str, float] | None:
        """Start the resident child now and let it set up its device and libraries before the first
        graph is handed out (bench/warm.py): seconds per part, or None when not resident or it
        failed (then the first graph starts a fresh child, as without warming)."""
        if not self.resident:
            return None
        registry = _registry(configs)
        try:
            payload = b"W" + pickle.dumps(_Warm(list(configs), settings, registry), protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            return None   # the first graph will say why its settings cannot reach a child
        self._preload(registry, settings.reference_device)
        child: _Child | None = None
        t0 = time.monotonic()
        try:
            child, _ = self._child_for(_config_key(configs), payload)
            forked = time.monotonic()   # the server forks once its own imports are done
            self._running = child.pid
            outcome = Watch(child.pid, self.server, child.status, child.output, WARM_TIMEOUT_S, self.tail_bytes,
                             None, resident=True).wait()
        except ForkServerError:
            self._forget(child)
            return None
        except BaseException:
            self._forget(child)
            raise
        finally:
            self._running = None
        if outcome.warmed is None or outcome.exitcode is not None:
            self._forget(child)
            return None
        self._warm_with = (list(configs), settings)
        self.warm_ups += 1
        self.versions.update(outcome.versions or {})
        return set_up_parts(outcome.warmed, forked - t0, time.monotonic() - t0)

    def _child_for(self, key: str, payload: bytes) -> tuple[_Child, bool]:
        """(the child that runs this job, whether it was started for it): the resident child when
        it may take the job, else a new one (the old one retired)."""
        child = self._child
        if child is not None and child.key == key and not child.spent():
            child.jobs_w.send_bytes(payload)
            child.jobs += 1
            return child, False
        self._retire()
        status_r, status_w = os.pipe()
        output_r, output_w = os.pipe()
        jobs_r, jobs_w = os.pipe() if self.resident else (-1, -1)
        status = Connection(status_r, writable=False)
        output = Connection(output_r, writable=False)
        sent = [status_w, output_w] + ([jobs_r] if self.resident else [])
        try:
            pid = self.server.launch(_RESIDENT_CHILD if self.resident else _CHILD, payload, sent)
        except BaseException:
            status.close()
            output.close()
            if self.resident:
                os.close(jobs_w)
            raise
        finally:
            for fd in sent:
                os.close(fd)
        child = _Child(pid, status, output, Connection(jobs_w, readable=False) if self.resident else None, key)
        if self.resident:
            self._child = child
        return child, True

    def _retire(self) -> None:
        """End the resident child: EOF on its job pipe, then its exit (killed if it lingers)."""
        child, self._child = self._child, None
        if child is None:
            return
        try:
            if child.jobs_w is not None:
                child.jobs_w.close()
            if not wait([self.server], RESULT_EXIT_GRACE_S):
                kill_session(child.pid)
            self.server.exit_code()
        except (ForkServerError, OSError):
            pass
        finally:
            child.close()

    def _run(self, payload: bytes, source: GraphSource, configs: Sequence[Config],
             on_iteration: Callable[[int], None] | None, on_stage: Callable[[str], None] | None = None,
             handed: bool = False) -> GraphRun:
        key = _config_key(configs)
        oom_before = oom_kills()
        t0 = now_ns()
        watch: Watch | None = None
        child: _Child | None = None
        started = True
        try:
            if handed and self._child is not None:   # the job is in its pipe already
                child, started = self._child, False
            else:
                child, started = self._child_for(key, payload)
            self._running = child.pid
            watch = Watch(child.pid, self.server, child.status, child.output, self.timeout_s, self.tail_bytes,
                           on_iteration, resident=self.resident, on_stage=on_stage)
            outcome = watch.wait()
        except ForkServerError as exc:   # the server died: keep what the child said (bytes, phase, output)
            outcome = watch.out if watch is not None else Outcome()
            outcome.failed = f"child process lost ({exc})"
            if watch is not None:
                outcome.tail = bytes(watch.tail)
        except BaseException:
            self._forget(child)
            raise
        finally:
            self._running = None
        alive = self.resident and outcome.result is not None and outcome.exitcode is None
        if not alive:
            self._forget(child)
        span = (t0, now_ns())
        if outcome.result is not None:
            if started:
                _add_process_start(outcome.result, t0, outcome.first_message_ns)
            if alive and _suspect(outcome.result):
                self._retire()   # an error may have left the device context unusable: a fresh child next
            return outcome.result
        if outcome.failed is not None:
            what = outcome.failed
        elif outcome.timed_out:
            what = f"timed out after {self.timeout_s:g} s (killed)"
        else:
            code = outcome.exitcode
            if code is not None and code < 0 and signal.Signals(-code) in _OUTSIDE_SIGNALS:
                time.sleep(OUTSIDE_SIGNAL_GRACE_S)   # our own interrupt usually follows: let it win
            what = death(code, oom_before)
        tail_text = outcome.tail.decode("utf-8", "replace")
        last_words = tail_line(outcome.tail)
        message = f"{what} during {outcome.phase}" + (f"; output: {last_words}" if last_words else "")
        info = {"isolation": {"exitcode": outcome.exitcode, "phase": outcome.phase,
                              "timed_out": outcome.timed_out, "output_tail": tail_text}}
        run = failure_run(source, configs, message, data=outcome.data, info=info, span=span)
        if tail_text.strip():
            run.notes.append("child output (tail):\n" + tail_text.rstrip())
        return run

    def _forget(self, child: _Child | None) -> None:
        """A child that is gone (or being abandoned): close its pipes."""
        if child is None:
            return
        if self._child is child:
            self._child = None
        child.close()


def resident_set_bytes(pid: int) -> int | None:
    """A process's resident set size from /proc (Linux), or None."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _job(source: GraphSource, configs: Sequence[Config], settings: RunSettings, markers: Markers) -> _Job:
    """What a child needs to run one graph."""
    vendors = {getattr(backends.get(c.backend), "vendor", None) for c in configs}
    return _Job(source, list(configs), settings, markers.kind, next(iter(vendors)) if len(vendors) == 1 else None,
                _registry(configs))


def _last_phase_end(run: GraphRun) -> int | None:
    """When a graph's own work ended: the end of its last phase. A graph handed over early may have
    finished while the suite was still committing the one before; from then on its record waited
    (the breakdown's t_queue_ms, not its wall)."""
    ends = [p.end_ns for p in run.phases] + [p.end_ns for c in run.configs for p in c.phases]
    return max(ends, default=None)


def set_up_parts(warmed: dict[str, float], server_s: float, total_s: float) -> dict[str, float]:
    """run.json's ``isolation.warm_up_s``: the child's own parts (a backend's device and library set-up, the
    pipeline graph), ``fork_server``: waiting for the fork server to fork (its imports, started with the
    command, not yet done), and ``child_start``: the rest (the child's start, its messages)."""
    rest = total_s - server_s - sum(warmed.values())
    return {"fork_server": round(server_s, 3), **warmed, "child_start": round(max(0.0, rest), 3)}


def _registry(configs: Sequence[Config]) -> dict[str, str]:
    """The registry entries of the configurations' backends: what a child needs to find them."""
    return {c.backend: backends.REGISTRY[c.backend] for c in configs}


def _config_key(configs: Sequence[Config]) -> str:
    """Which configurations a resident child was started for (another set needs another child)."""
    return repr([(c.name, c.backend, c.plugin_path) for c in configs])


def _suspect(run: GraphRun) -> bool:
    """A record with an error row: the child's device context may be unusable afterwards."""
    return run.status == ERROR or any(c.status == ERROR for c in run.configs)


@dataclass
class _Child:
    """One child process and its pipes (``jobs_w``: where a resident child reads its next job)."""

    pid: int
    status: Connection
    output: Connection
    jobs_w: Connection | None
    key: str
    jobs: int = 1
    resident_bytes: int | None = None   # its resident set after its first job (its set-up, when warmed)

    def spent(self) -> bool:
        """Retire before the next job: MAX_JOBS_PER_CHILD jobs run, or the resident set grew by more than
        RETIRE_GROWTH_BYTES since the first job (Linux /proc; elsewhere the count alone)."""
        if self.jobs >= MAX_JOBS_PER_CHILD:
            return True
        now = resident_set_bytes(self.pid)
        if self.resident_bytes is None or now is None:
            self.resident_bytes = self.resident_bytes or now
            return False
        return now - self.resident_bytes > RETIRE_GROWTH_BYTES

    def close(self) -> None:
        for conn in (self.status, self.output, self.jobs_w):
            if conn is not None:
                try:
                    conn.close()
                except OSError:
                    pass


def _add_process_start(run: GraphRun, asked_ns: int, first_message_ns: int | None) -> None:
    """The child's start as a phase of its graph: from asking the fork server for it until its
    first message, cut at the child's own first phase (the message may be read late)."""
    if first_message_ns is None:
        return
    starts = [p.start_ns for p in run.phases] + [p.start_ns for c in run.configs for p in c.phases]
    end = min([first_message_ns, *starts])
    if end > asked_ns:
        run.phases.insert(0, Phase("process start", asked_ns, end))

"""``--gpus``: one isolated worker per GPU of the node, the longest graphs handed out first.

Each worker is an isolating runner (:class:`~hipdnn_trace.bench.isolation.IsolatedRunner`,
its own fork server) whose environment pins one GPU through the vendor's visibility
variable (:mod:`hipdnn_trace.device.visibility`), set before the server imports
anything, so every child sees its GPU as device 0. A thread per worker takes the next
graph from one queue, ordered longest first by an estimate from the graph's FLOPs and
bytes (a long graph started last would leave the other GPUs idle at the end), runs it
isolated and hands the :class:`GraphRun` to the suite thread, which alone calls the
suite's callbacks (the one writer, the console, signal handling): results are recorded
exactly as in a serial isolated run, one graph at a time. A child that dies costs its
graph's row, as isolation does; a fork server that dies is restarted for the next graph.

The worker threads live until :meth:`GpuPool.close`: Linux ties a child's
``PR_SET_PDEATHSIG`` to the *thread* that started it, and each thread is its fork
server's parent.
"""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.records import GraphRun
from hipdnn_trace.bench.run_settings import RunSettings
from hipdnn_trace.bench.suite import SuiteCallbacks, SuiteOutcome
from hipdnn_trace.device.clock import now_ns
from hipdnn_trace.errors import UserError
from hipdnn_trace.graph.sources import GraphSource
from hipdnn_trace.markers import Markers

#: Nominal rates that turn FLOPs and bytes into an estimate of seconds (an H100's dense
#: fp16 rate and HBM bandwidth, rounded). Only the order of the estimates matters.
NOMINAL_FLOPS_PER_S = 4e14
NOMINAL_BYTES_PER_S = 2e12
#: How often the suite thread looks for results (it must also notice signals).
POLL_S = 0.2
#: The interpreter's thread switch interval while a pool runs (Python's default is 5 ms): a worker
#: thread whose child just answered waits for the GIL while the suite thread writes records, and each
#: such wait adds up to the interval to that graph's wall; a shorter one keeps the workers' hand-offs
#: prompt (the other threads mostly wait on pipes).
SWITCH_INTERVAL_S = 0.0005


def parse_gpus(text: str) -> list[int] | None:
    """``all`` -> None (every GPU, counted later); ``0,2,5`` -> [0, 2, 5]."""
    text = text.strip()
    if text == "all":
        return None
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(p.isdigit() for p in parts):
        raise UserError(f"--gpus {text!r}: give 'all' or GPU indices like 0,2,5")
    indices = [int(p) for p in parts]
    if len(set(indices)) != len(indices):
        raise UserError(f"--gpus {text!r}: a GPU is named twice")
    return indices


def estimate_s(source: GraphSource, *, allow_unknown: bool = False) -> float:
    """Estimated device time of one execution: the longer of compute and memory at nominal rates.
    0 for a graph that does not load (its error row is quick); the parent reads the file for it."""
    from hipdnn_trace.graph.load import load_bytes
    from hipdnn_trace.graph.ops import graph_bytes, graph_flops

    try:
        graph = load_bytes(source.read(), source.name, allow_unknown=allow_unknown)
        return max(graph_flops(graph) / NOMINAL_FLOPS_PER_S, graph_bytes(graph) / NOMINAL_BYTES_PER_S)
    except UserError:
        return 0.0
    except Exception:   # an estimate never stops a run; the child reports the problem
        return 0.0


def longest_first(estimates: Sequence[float]) -> list[int]:
    """Positions in the order to hand them out: largest estimate first, ties in suite order."""
    return sorted(range(len(estimates)), key=lambda i: (-estimates[i], i))


class WorkerRunner(Protocol):
    """An isolating runner: runs a graph in a child, can kill that child, owns its fork server."""

    def __call__(self, source: GraphSource, configs: Sequence[Config], settings: RunSettings,
                 markers: Markers, *, on_iteration: Callable[[int], None] | None = None) -> GraphRun: ...

    def abort(self) -> None: ...

    def close(self) -> None: ...

    # optional: ``warm(configs, settings) -> dict[str, float] | None``, the worker's process set-up
    # before its first graph (IsolatedRunner.warm)


@dataclass
class GpuWorker:
    """One GPU: its index (as --gpus names it), the runner pinned to it and its settings."""

    gpu: int
    runner: WorkerRunner
    settings: RunSettings | None = None   # None: the suite's (per-GPU settings: e.g. its NVML clock sampler)


@dataclass
class Handout:
    """Where and when a graph ran: run.json's ``gpus.graphs`` entry."""

    gpu: int
    handed_out: int          # 0 = first graph handed out
    estimate_s: float


@dataclass
class _Collected:
    """What the suite thread has collected so far: finished graphs by position, counts."""

    working: int
    started: int = 0
    finished: dict[int, GraphRun] = field(default_factory=dict)


@dataclass
class GpuPool:
    """The workers of a --gpus run; close it (the run command does, in its ``finally``)."""

    workers: list[GpuWorker]
    handouts: dict[str, Handout] = field(default_factory=dict)   # source -> where it ran
    warm_ups: dict[int, dict[str, float] | None] = field(default_factory=dict)   # gpu -> its set-up (bench/warm.py)
    _stop: threading.Event = field(default_factory=threading.Event)
    _closing: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _set_up: threading.Barrier = field(default_factory=lambda: threading.Barrier(1))   # every worker set up
    set_up_at: float | None = None   # time.monotonic() when the last worker was set up (run.json phases_s)

    def run_suite(self, sources: Sequence[GraphSource], configs: Sequence[Config], settings: RunSettings,
                  markers: Markers, callbacks: SuiteCallbacks, estimates: Sequence[float]) -> SuiteOutcome:
        """Every source once, on whichever worker is free, longest estimate first; the callbacks
        run here, one graph at a time (their index counts graphs started / finished)."""
        order = longest_first(estimates)
        todo: queue.Queue[tuple[int, int]] = queue.Queue()
        for rank, position in enumerate(order):
            todo.put((rank, position))
        results: queue.Queue[tuple[str, GpuWorker, Any]] = queue.Queue()
        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, SWITCH_INTERVAL_S))
        state = _Collected(working=len(self.workers))
        self._set_up = threading.Barrier(max(1, len(self.workers)), action=self._all_set_up)
        try:
            for worker in self.workers:
                thread = threading.Thread(target=self._work, name=f"gpu-{worker.gpu}", daemon=True,
                                          args=(worker, todo, results, sources, configs, settings, markers))
                self._threads.append(thread)
                thread.start()
            while state.working:
                try:
                    messages = [results.get(timeout=POLL_S)]
                except queue.Empty:
                    continue
                while True:   # what else is waiting: recorded as one batch by the one writer
                    try:
                        messages.append(results.get_nowait())
                    except queue.Empty:
                        break
                self._take(messages, state, sources, estimates, callbacks)
        except BaseException:
            self.stop()
            raise
        finally:
            sys.setswitchinterval(interval)
        return SuiteOutcome(runs=[state.finished[i] for i in sorted(state.finished)])

    def _take(self, messages: list[tuple[str, GpuWorker, Any]], state: _Collected, sources: Sequence[GraphSource],
              estimates: Sequence[float], callbacks: SuiteCallbacks) -> None:
        """Handle the workers' messages in order; the graphs they finished go to the callbacks together."""
        batch: list[tuple[int, GraphRun]] = []
        for kind, worker, value in messages:
            if kind == "start":
                rank, position = value
                state.started += 1
                self.handouts[sources[position].name] = Handout(worker.gpu, rank, float(estimates[position]))
                if callbacks.before_graph:
                    callbacks.before_graph(state.started, sources[position])
            elif kind == "done":
                position, g = value
                if g.ready_ns is not None:   # its worker went on to the next graph meanwhile
                    g.queue_ms = max(0, now_ns() - g.ready_ns) / 1e6
                batch.append((position, g))
            elif kind == "raise":
                raise value
            else:   # "idle": the queue is empty for this worker
                state.working -= 1
        if not batch:
            return
        numbered = [(len(state.finished) + i + 1, g) for i, (_, g) in enumerate(batch)]
        if callbacks.after_graphs:
            callbacks.after_graphs(numbered)
        elif callbacks.after_graph:
            for index, g in numbered:
                callbacks.after_graph(index, g)
        for position, g in batch:
            g.drop_arrays()
            state.finished[position] = g

    def _work(self, worker: GpuWorker, todo: queue.Queue, results: queue.Queue, sources: Sequence[GraphSource],
              configs: Sequence[Config], settings: RunSettings, markers: Markers) -> None:
        try:
            self._warm(worker, configs, worker.settings or settings)
            while not self._stop.is_set():
                try:
                    rank, position = todo.get_nowait()
                except queue.Empty:
                    break
                results.put(("start", worker, (rank, position)))
                began = now_ns()
                g = worker.runner(sources[position], configs, worker.settings or settings, markers)
                g.started_ns, g.ready_ns = began, now_ns()
                if self._stop.is_set():
                    break   # interrupted: the suite records nothing more
                results.put(("done", worker, (position, g)))
                between = getattr(worker.runner, "between_graphs", None)   # a spent child replaced between graphs
                if between is not None and not todo.empty() and not self._stop.is_set():
                    between()
        except BaseException as exc:   # handed to the suite thread, which raises it
            results.put(("raise", worker, exc))
        finally:
            results.put(("idle", worker, None))
        self._closing.wait()   # this thread is its fork server's parent (PR_SET_PDEATHSIG): outlive it

    def _warm(self, worker: GpuWorker, configs: Sequence[Config], settings: RunSettings) -> None:
        """Set the worker's child up before its first graph, then wait until every worker is set up: a
        worker's set-up (CUDA context, library loads) beside another's first graph slowed that graph."""
        try:
            warm = getattr(worker.runner, "warm", None)
            if warm is not None and not self._stop.is_set():
                self.warm_ups[worker.gpu] = warm(configs, settings)
        finally:
            with contextlib.suppress(threading.BrokenBarrierError):
                self._set_up.wait()

    def _all_set_up(self) -> None:
        self.set_up_at = time.monotonic()

    def stop(self) -> None:
        """Hand out nothing more and kill the children now running."""
        self._stop.set()
        self._set_up.abort()   # a worker waiting for the others' set-up goes on (and stops)
        for worker in self.workers:
            worker.runner.abort()

    def close(self) -> None:
        """Stop (a no-op after a complete run), let the threads end, close the workers' children and
        fork servers, all at once."""
        self.stop()
        self._closing.set()
        for thread in self._threads:
            while thread.is_alive():
                thread.join(POLL_S)
                for worker in self.workers:   # a child launched just after stop() goes too
                    worker.runner.abort()
        closing = [threading.Thread(target=w.runner.close, name=f"close-gpu-{w.gpu}") for w in self.workers]
        for thread in closing:   # side by side: each child's exit tears its device context down
            thread.start()
        for thread in closing:
            thread.join()

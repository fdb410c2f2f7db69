"""Many graphs x configurations: run each, record it, report it, go on.

A graph that fails (bad file, unsupported op, backend error) is one row with its
status and message; the suite continues. Results are written after every graph,
so an interrupted suite keeps every finished graph. Each graph runs through a
*runner*: in this process (the default, with unexpected exceptions recorded as
errors) or in a child process per graph (:mod:`hipdnn_trace.bench.isolation`),
which also survives segfaults, aborts, hangs and the out-of-memory killer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings, run_graph
from hipdnn_trace.bench.records import ERROR, FAILED, OK, GraphRun
from hipdnn_trace.device.clock import now_ns
from hipdnn_trace.errors import describe
from hipdnn_trace.graph.sources import GraphSource
from hipdnn_trace.markers import Markers

# exit codes, as 'hipdnn-trace run --help' lists them
EXIT_OK, EXIT_ERROR, EXIT_MISMATCH = 0, 1, 2


class GraphRunner(Protocol):
    """Runs one graph on every configuration: :func:`run_in_process` or an isolating runner;
    ``on_stage`` hears each stage as it starts (:mod:`hipdnn_trace.bench.stages`)."""

    def __call__(self, source: GraphSource, configs: Sequence[Config], settings: RunSettings,
                 markers: Markers, *, on_iteration: Callable[[int], None] | None = None,
                 on_stage: Callable[[str], None] | None = None) -> GraphRun: ...


@dataclass
class SuiteCallbacks:
    """How the suite reports: each hook is optional."""

    before_graph: Callable[[int, GraphSource], None] | None = None
    #: the graph at this 1-based position is about to go to the runner: a last chance to wait for what it
    #: needs (a plan its builder is still making, runs/plan_builders.py); may be called twice for one graph
    before_start: Callable[[int], None] | None = None
    after_graph: Callable[[int, GraphRun], None] | None = None
    #: --gpus: graphs finished while the suite thread was busy, handed over together (one commit)
    after_graphs: Callable[[list[tuple[int, GraphRun]]], None] | None = None
    on_iteration: Callable[[int], None] | None = None
    on_stage: Callable[[str], None] | None = None


@dataclass
class SuiteOutcome:
    runs: list[GraphRun] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """1 if anything errored or nothing ran, else 2 on a validation mismatch, else 0."""
        statuses = [ERROR for g in self.runs if g.unrunnable]
        statuses += [c.status for g in self.runs for c in g.configs]
        return exit_code_for(statuses)


def exit_code_for(statuses: Iterable[str | None]) -> int:
    """The suite's exit code from the status of every summary row (also of a resumed run)."""
    seen = list(statuses)
    if ERROR in seen or not any(s in (OK, FAILED) for s in seen):
        return EXIT_ERROR
    if FAILED in seen:
        return EXIT_MISMATCH
    return EXIT_OK


def run_in_process(source: GraphSource, configs: Sequence[Config], settings: RunSettings, markers: Markers,
                   *, on_iteration: Callable[[int], None] | None = None,
                   on_stage: Callable[[str], None] | None = None) -> GraphRun:
    """:func:`run_graph` here; an exception it lets through (a bug, MemoryError while
    making inputs) becomes this graph's error row instead of ending the suite. The bytes read
    are kept for that row, so the failure path never reads the source a second time."""
    read: list[bytes] = []

    def read_once() -> bytes:
        read.append(source.read())
        return read[-1]

    try:
        return run_graph(replace(source, read=read_once), configs, settings, markers, on_iteration=on_iteration,
                         on_stage=on_stage)
    except Exception as exc:   # recorded, the suite goes on
        from hipdnn_trace.bench.isolation import failure_run

        what = "out of memory" if isinstance(exc, MemoryError) else "unexpected error"
        return failure_run(source, configs, f"{what} ({describe(exc)})", data=read[-1] if read else None)


def run_suite(
    sources: Sequence[GraphSource],
    configs: Sequence[Config],
    settings: RunSettings,
    markers: Markers,
    callbacks: SuiteCallbacks,
    *,
    runner: GraphRunner | None = None,
) -> SuiteOutcome:
    run_one = runner or run_in_process
    outcome = SuiteOutcome()
    hand_over = getattr(run_one, "hand_over_next", None)   # a resident child takes the next graph early
    handed_at: int | None = None
    for index, source in enumerate(sources, 1):
        if callbacks.before_graph:
            callbacks.before_graph(index, source)
        if handed_at is None and callbacks.before_start:
            callbacks.before_start(index)
        started = handed_at or now_ns()
        g = run_one(source, configs, settings, markers, on_iteration=callbacks.on_iteration,
                    on_stage=callbacks.on_stage)
        g.started_ns = started   # the breakdown's wall clock starts here (results/breakdown.py)
        handed_at = None
        if hand_over is not None and index < len(sources):
            if callbacks.before_start:
                callbacks.before_start(index + 1)
            if hand_over(sources[index], configs, settings, markers):
                handed_at = now_ns()   # the child runs it while this graph is noted and committed
        if callbacks.after_graph:
            callbacks.after_graph(index, g)
        g.drop_arrays()
        outcome.runs.append(g)
        between = getattr(run_one, "between_graphs", None)   # an isolated runner replaces a spent child here
        if between is not None and index < len(sources):
            between()
    return outcome

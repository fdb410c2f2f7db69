"""Many graphs x configurations: run each, record it, report it, go on.

A graph that fails (bad file, unsupported op, backend error) is one row with its
status and message; the suite continues. Results are written after every graph,
so an interrupted suite keeps every finished graph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings, run_graph
from hipdnn_trace.bench.records import ERROR, FAILED, OK, GraphRun
from hipdnn_trace.graph.sources import GraphSource
from hipdnn_trace.markers import Markers

# exit codes (docs/cli.md)
EXIT_OK, EXIT_ERROR, EXIT_MISMATCH = 0, 1, 2


@dataclass
class SuiteCallbacks:
    """How the suite reports: each hook is optional."""

    before_graph: Callable[[int, GraphSource], None] | None = None
    after_graph: Callable[[int, GraphRun], None] | None = None
    on_iteration: Callable[[int], None] | None = None


@dataclass
class SuiteOutcome:
    runs: list[GraphRun] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """1 if anything errored or nothing ran, else 2 on a validation mismatch, else 0."""
        statuses = [ERROR for g in self.runs if g.graph is None]
        statuses += [c.status for g in self.runs for c in g.configs]
        if ERROR in statuses or not any(s in (OK, FAILED) for s in statuses):
            return EXIT_ERROR
        if FAILED in statuses:
            return EXIT_MISMATCH
        return EXIT_OK


def run_suite(
    sources: Sequence[GraphSource],
    configs: Sequence[Config],
    settings: RunSettings,
    markers: Markers,
    callbacks: SuiteCallbacks,
) -> SuiteOutcome:
    outcome = SuiteOutcome()
    for index, source in enumerate(sources, 1):
        if callbacks.before_graph:
            callbacks.before_graph(index, source)
        g = run_graph(source, configs, settings, markers, on_iteration=callbacks.on_iteration)
        if callbacks.after_graph:
            callbacks.after_graph(index, g)
        g.drop_arrays()
        outcome.runs.append(g)
    return outcome

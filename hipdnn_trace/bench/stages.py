"""Which stage a graph is in, reported as it changes: for the progress line and an isolated child.

A graph's run goes load -> inputs -> reference (the validating float64 oracle) -> per
configuration prepare, init, bind, warmup, execute (the timed iterations), fetch -> validate.
:func:`~hipdnn_trace.bench.graph_run.run_graph` reports the graph's own stages; the configurations'
come from the markers the harness already sets (``graph <id> <config>``, ``init``, ``warmup``,
``execute``), through :class:`StageMarkers`, so nothing is added inside the timed loop. An isolated
child sends the same texts to its parent, which names the last one when the child dies.
"""

from __future__ import annotations

from collections.abc import Callable

from hipdnn_trace.markers import Markers

Report = Callable[[str], None]

#: the stage that follows the end of a marker range (the loop pops "execute", then fetches)
_AFTER = {"init": "bind", "warmup": "execute", "execute": "fetch"}


class StageMarkers(Markers):
    """The real markers, plus ``report(stage)`` at every range boundary (``config: stage`` inside
    a configuration's ``graph <id> <config>`` range); iterations are never reported."""

    def __init__(self, inner: Markers, report: Report) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.iteration_ranges = inner.iteration_ranges
        self._report = report
        self._stack: list[str] = []
        self.config = ""

    def _stage(self, text: str) -> None:
        self._report(f"{self.config}: {text}" if self.config else text)

    def push(self, name: str) -> None:
        self.inner.push(name)
        self._stack.append(name)
        if name.startswith("graph ") and len(self._stack) == 1:
            self.config = name.split(" ", 2)[2] if name.count(" ") >= 2 else name
            self._stage("prepare")
        else:
            self._stage(name)

    def pop(self) -> None:
        self.inner.pop()
        name = self._stack.pop() if self._stack else ""
        after = _AFTER.get(name)
        if after:
            self._stage(after)
        elif not self._stack:
            self.config = ""
            self._stage("validate")

    def mark(self, name: str) -> None:
        self.inner.mark(name)

    def prepare_iterations(self, count: int) -> None:
        self.inner.prepare_iterations(count)

    def push_iteration(self, i: int) -> None:
        self.inner.push_iteration(i)   # inside the loop: no reporting (progress goes through on_iteration)

    def pop_iteration(self) -> None:
        self.inner.pop_iteration()

    def pause(self) -> None:
        self.inner.pause()

    def resume(self) -> None:
        self.inner.resume()


def with_stages(markers: Markers, report: Report | None) -> Markers:
    """``markers`` reporting its stages to ``report`` (unchanged without one, or when it already does)."""
    if report is None or isinstance(markers, StageMarkers):
        return markers
    return StageMarkers(markers, report)

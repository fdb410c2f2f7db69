"""What every marker API shares: the domain, the range names, and the no-op base class.

A module of its own so that ``markers`` (which picks an API and may load roctx) and
``markers_roctx`` (which subclasses the base) both import it and not each other.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

DOMAIN = "hipdnn_trace"
ROCTX_PREFIX = DOMAIN + ":"


def graph_range_name(graph_id: str, config: str) -> str:
    """Name of the range around one graph x config; parsers split it back apart."""
    safe = config.replace("/", "_").replace("@", "_").replace(" ", "_")
    return f"graph {graph_id} {safe}"


def iteration_name(i: int) -> str:
    return f"iter {i}"


class Markers:
    """No-op markers; subclasses talk to a real marker API."""

    kind = "none"
    #: Whether the loop opens a range per timed iteration. False where no tool could receive it
    #: (no marker API, or NVTX without an attached tool): next to a 1 us kernel the two marker
    #: calls were a large part of the loop's own cost.
    iteration_ranges = True

    def push(self, name: str) -> None:
        pass

    def pop(self) -> None:
        pass

    def mark(self, name: str) -> None:
        pass

    def prepare_iterations(self, count: int) -> None:
        """Build what ``push_iteration`` needs for iterations 0..count-1."""

    def push_iteration(self, i: int) -> None:
        self.push(iteration_name(i))

    def pop_iteration(self) -> None:
        """Close the range :meth:`push_iteration` opened."""
        self.pop()

    def pause(self) -> None:
        """Stop profiler collection (roctxProfilerPause) outside the timed region."""

    def resume(self) -> None:
        """Resume profiler collection before the timed region."""

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        self.push(name)
        try:
            yield
        finally:
            self.pop()

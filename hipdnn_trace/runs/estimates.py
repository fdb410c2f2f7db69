"""A suite's estimate up front: per graph (bench/estimate.py), the note a long suite gets, and the
rates it used (run.json ``estimate``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.estimate import GraphEstimate, estimate_suite
from hipdnn_trace.bench.run_settings import RunSettings
from hipdnn_trace.console import fmt_duration
from hipdnn_trace.graph.sources import GraphSource

#: a suite estimated to take longer than this gets a note with the estimate up front
ESTIMATE_ABOVE_S = 10.0


def suite_estimates(sources: Sequence[GraphSource], configs: Sequence[Config], settings: RunSettings,
                    timeout: float | None, fresh_child: bool) -> list[GraphEstimate]:
    """Per-graph estimates (bench/estimate.py) for the note and the progress line's ETA."""
    isolation = None if timeout is None else ("fresh" if fresh_child else "resident")
    return estimate_suite(sources, configs, settings, isolation=isolation)


def suite_rates() -> Any:
    """The rates the estimate used: this machine's when they were measured, else the defaults."""
    from hipdnn_trace.backends.reference import cost
    from hipdnn_trace.bench.estimate import DEFAULT_RATES

    return cost.measured_rates() if cost.measured_rates.cache_info().currsize else DEFAULT_RATES


def estimate_note(estimates: list[GraphEstimate]) -> str | None:
    """A note with the suite's estimated wall time and its longest graph, when the suite is long;
    None for a short one."""
    total = sum(e.seconds for e in estimates)
    if total < ESTIMATE_ABOVE_S:
        return None
    longest = max(estimates, key=lambda e: e.seconds)
    slowest = "" if len(estimates) < 2 else \
        f"; longest {Path(longest.source).stem} about {fmt_duration(longest.seconds)}"
    return (f"estimate: about {fmt_duration(total)} for {len(estimates)} graph(s) on this machine{slowest} "
            "(the progress line corrects it as graphs finish); Ctrl-C stops, --resume continues")

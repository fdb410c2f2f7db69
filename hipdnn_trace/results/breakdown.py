"""Where a graph's wall time went: the ``breakdown`` frame (schemas.BREAKDOWN).

A suite's wall time is mostly not the timed loop: process start, inputs, the float64
reference, plan builds and writing files can dominate. Each column is the summed duration of
the host phases bench recorded under one name (``GraphRun.phases`` for the graph's own,
``ConfigRun.phases`` for each configuration's), so the numbers are the same intervals the
trace shows. ``t_queue_ms`` is the time a graph's record waited for the run's one writer (``--gpus``:
while its worker ran the next graph; else while the graphs committed with it ran). ``t_other_ms`` is
what no phase covers (config expansion, result transfer from an isolated child, console output), so
the columns of a graph add up to its ``wall_ms``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hipdnn_trace.bench.loop import Phase
from hipdnn_trace.bench.records import GraphRun

#: column -> phase name, for phases of the graph (once per graph, repeated on each row)
GRAPH_PHASES = {
    "t_process_ms": "process start",
    "t_load_ms": "load",
    "t_inputs_ms": "inputs",
    "t_reference_ms": "reference",
    "t_validate_ms": "validate",
}
#: column -> phase name, for phases of one configuration
CONFIG_PHASES = {
    "t_init_ms": "init",
    "t_bind_ms": "bind",
    "t_warmup_ms": "warmup",
    "t_timed_ms": "execute",
    "t_fetch_ms": "fetch",
}


def _ms(phases: Iterable[Phase], name: str) -> float:
    return sum(max(0, p.end_ns - p.start_ns) for p in phases if p.name == name) / 1e6


def breakdown_rows(run_id: str, g: GraphRun, *, write_ms: float, end_ns: int) -> list[dict[str, Any]]:
    """One row per configuration of ``g`` (one row without a config for a graph that never
    reached one). ``end_ns``: when its files were written; the wall starts at
    ``g.started_ns`` (the suite handing it to the runner), else at its earliest phase."""
    graph_cols = {col: _ms(g.phases, name) for col, name in GRAPH_PHASES.items()}
    config_cols = [{col: _ms(c.phases, name) for col, name in CONFIG_PHASES.items()} for c in g.configs]
    starts = [p.start_ns for p in g.phases] + [p.start_ns for c in g.configs for p in c.phases]
    start = g.started_ns if g.started_ns is not None else min(starts, default=end_ns)
    wall = max(0, end_ns - start) / 1e6
    accounted = sum(graph_cols.values()) + g.queue_ms + write_ms + sum(sum(cols.values()) for cols in config_cols)
    shared = {**graph_cols, "t_queue_ms": g.queue_ms, "t_write_ms": write_ms,
              "t_other_ms": max(0.0, wall - accounted), "wall_ms": wall}
    key = {"run_id": run_id, "graph": g.name, "graph_id": g.graph_id, "source": g.source}
    if not g.configs:
        return [{**key, "config": None, "backend": None, **{col: 0.0 for col in CONFIG_PHASES}, **shared}]
    return [{**key, "config": c.config.name, "backend": c.config.backend, **cols, **shared}
            for c, cols in zip(g.configs, config_cols)]

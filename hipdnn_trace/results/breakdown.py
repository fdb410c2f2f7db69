"""Where a graph's wall time went: the ``breakdown`` frame (schemas.BREAKDOWN).

A suite's wall time is mostly not the timed loop: process start, inputs, the float64
reference, plan builds and writing files can dominate. Each column is the summed duration of
the host phases bench recorded under one name (``GraphRun.phases`` for the graph's own,
``ConfigRun.phases`` for each configuration's), so the numbers are the same intervals the
trace shows.

A graph's ``wall_ms`` is what the graph cost the run: from the suite handing it to its runner until
its result was ready (``GraphRun.ready_ns``), plus its share of the commit that recorded it
(``t_write_ms``: a commit of k graphs' rows, table rewrites and trace costs each of them 1/k of its
time). ``t_queue_ms``, the time its record then waited for the run's one writer (``--gpus``: while its
worker ran the next graph; else while the graphs committed with it ran), is shown beside the wall and
is not part of it: that time belongs to the graphs that ran meanwhile, so counting it would count it
twice. ``t_release_ms`` is a resident child still freeing the previous graph's memory after this graph
was handed to it. ``t_other_ms`` is what no phase covers (config expansion, the profilers' hooks, result transfer
from an isolated child, console output), so the stage columns, ``t_write_ms`` and ``t_other_ms`` of a graph add up to
its ``wall_ms``; summed over a serial run's graphs they give the run's time, less the commits that ran
while a resident child already worked on the next graph (bench/isolation.py ``hand_over_next``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hipdnn_trace.bench.loop import KERNEL_CLOCK_PHASE, SIDE_PHASE, Phase
from hipdnn_trace.bench.records import RELEASE_PHASE, GraphRun

#: column -> phase name, for phases of the graph (once per graph, repeated on each row)
GRAPH_PHASES = {
    "t_process_ms": "process start",
    "t_release_ms": RELEASE_PHASE,
    "t_load_ms": "load",
    "t_inputs_ms": "inputs",
    "t_reference_ms": "reference",
    "t_validate_ms": "validate",
}
#: a resident child freeing the previous graph's memory (bench/isolation.py): only the part after this
#: graph was handed out is this graph's (the job waited for it); the rest overlapped the suite's own work
RELEASE = "t_release_ms"
#: column -> phase name, for phases of one configuration
CONFIG_PHASES = {
    "t_init_ms": "init",
    "t_bind_ms": "bind",
    "t_warmup_ms": "warmup",
    "t_timed_ms": "execute",
    "t_fetch_ms": "fetch",
    "t_kernel_clock_ms": KERNEL_CLOCK_PHASE,   # CUPTI's records flushed and matched to the iterations
    "t_side_ms": SIDE_PHASE,                   # the latency/span side blocks after the timed loop
    "t_close_ms": "close",                 # the session's plan, workspace and buffers freed
}


def _ms(phases: Iterable[Phase], name: str) -> float:
    return sum(max(0, p.end_ns - p.start_ns) for p in phases if p.name == name) / 1e6


def breakdown_rows(run_id: str, g: GraphRun, *, write_ms: float, commit_ns: int) -> list[dict[str, Any]]:
    """One row per configuration of ``g`` (one row without a config for a graph that never
    reached one). ``write_ms``: its share of the commit that records it; ``commit_ns``: when that
    commit began (the end of its own work when ``g.ready_ns`` is unset). The wall starts at
    ``g.started_ns`` (the suite handing it to the runner), else at its earliest phase."""
    graph_cols = {col: _ms(g.phases, name) for col, name in GRAPH_PHASES.items()}
    config_cols = [{col: _ms(c.phases, name) for col, name in CONFIG_PHASES.items()} for c in g.configs]
    ready = g.ready_ns if g.ready_ns is not None else commit_ns
    release = GRAPH_PHASES[RELEASE]
    starts = [p.start_ns for p in g.phases if p.name != release] + [p.start_ns for c in g.configs for p in c.phases]
    start = g.started_ns if g.started_ns is not None else min(starts, default=ready)
    graph_cols[RELEASE] = sum(max(0, min(p.end_ns, ready) - max(p.start_ns, start))
                              for p in g.phases if p.name == release) / 1e6
    wall = max(0, ready - start) / 1e6 + write_ms
    accounted = sum(graph_cols.values()) + write_ms + sum(sum(cols.values()) for cols in config_cols)
    shared = {**graph_cols, "t_queue_ms": g.queue_ms, "t_write_ms": write_ms,
              "t_other_ms": max(0.0, wall - accounted), "wall_ms": wall}
    key = {"run_id": run_id, "graph": g.name, "graph_id": g.graph_id, "source": g.source}
    if not g.configs:
        return [{**key, "config": None, "backend": None, **{col: 0.0 for col in CONFIG_PHASES}, **shared}]
    return [{**key, "config": c.config.name, "backend": c.config.backend, **cols, **shared}
            for c, cols in zip(g.configs, config_cols)]

"""cuDNN plans a suite will need, built by several processes ahead of it (``run --build-workers``).

A run on a fresh machine spends most of cuDNN's init compiling runtime kernels: graphs/perf on an H200
took 40-44 s with 23-24 s of plan builds, against 16-18 s when every plan came from the plan cache
(docs/benchmarks.md, issue 36). The compiling is the library's CPU work, and the suite builds one plan after
another in one process. Each builder process here takes a slice of the suite, builds the plans the cache
lacks and stores them (backends/cudnn_plan_store.py), saying each graph as it is done; the suite restores
each plan once its graph is said (runs/plan_builders.py). Nothing depends on it
for correctness: the suite's session checks every entry against its own key, so a plan built here for a
graph the suite translates differently is a miss there and is built again, and a builder that fails or is
slow only leaves the suite to build as it would have.

    python -m hipdnn_trace.backends.cudnn_prebuild JOB_FILE   # JOB_FILE: a pickled BuildJob
"""

from __future__ import annotations

import json
import pickle
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hipdnn_trace.backends import cudnn_graph, cudnn_plan_store
from hipdnn_trace.backends.cudnn import _cudnn, _refuse_known_crashes, build_graph, notes_to_deselect
from hipdnn_trace.backends.cudnn_graph import Plan
from hipdnn_trace.backends.plan_cache import PlanCache
from hipdnn_trace.device import cuda
from hipdnn_trace.errors import UserError
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.sources import GraphSource


@dataclass
class BuildJob:
    """One builder's slice: the graphs, the cache they go to, the device (as the suite's children see it);
    ``positions``: each graph's place in the suite, said as it is done so the suite can start it."""

    sources: list[GraphSource]
    cache: PlanCache
    device: int = 0
    allow_unknown: bool = False
    counts: Counter[str] = field(default_factory=Counter)
    positions: list[int] = field(default_factory=list)


def build_missing(job: BuildJob, frontend: Any = None,
                  done: Callable[[int, str], None] | None = None) -> dict[str, int]:
    """Build and store the plan of every graph in the slice whose entry the cache lacks (the engine the
    heuristic picks first, as the suite's default configuration asks); how many were ``built``,
    ``cached`` already, ``not_stored`` (a note from the cache), ``refused`` (our translation refuses the graph,
    or it does not load), ``not_built`` (cuDNN's build raised, e.g. no engine for it: the suite builds it
    again and its row says why; remembered, so the next run's builder does not try again under the same
    library, driver and GPU). ``done(position, result)`` hears each graph as it is finished. The CUDA context
    and cuDNN handle are made at the first graph to build: a builder that finds its whole slice in the cache
    (every warm run) never touches the GPU, whose context the suite's own child is making meanwhile."""
    cudnn = frontend or _cudnn()
    positions = job.positions or list(range(len(job.sources)))
    handle: Any = None
    try:
        for position, source in zip(positions, job.sources):
            found = _look_up(cudnn, job, source)
            if isinstance(found, str):
                result = found
            else:
                if handle is None:
                    cuda.set_device(job.device)
                    handle = cudnn.create_handle()
                result = _build(handle, job, *found)
            job.counts[result] += 1
            if done is not None:
                done(position, result)
    finally:
        if handle is not None:
            cudnn.destroy_handle(handle)
    return dict(job.counts)


def _look_up(cudnn: Any, job: BuildJob, source: GraphSource) -> str | tuple[Plan, dict[str, Any]]:
    """``refused``, ``cached`` or ``not_built`` (a build that failed before under this very key), else the plan
    to build and its key."""
    try:
        plan = cudnn_graph.plan(load_bytes(source.read(), source.name, allow_unknown=job.allow_unknown))
        _refuse_known_crashes(plan, cudnn.backend_version())
    except UserError:   # GraphError, UnsupportedError: the suite refuses it with the reason
        return "refused"
    key = cudnn_plan_store.plan_key(cudnn, plan, None, notes_to_deselect(plan), job.device)
    if job.cache.get(key).plan is not None:
        return "cached"
    if job.cache.get(cudnn_plan_store.failed_key(key)).plan is not None:
        return "not_built"
    return plan, key


def _build(handle: Any, job: BuildJob, plan: Plan, key: dict[str, Any]) -> str:
    try:
        built = build_graph(plan, handle)
        chosen = built.select(None)
    except Exception as exc:   # noqa: BLE001 - the suite's row says why (again, or as remembered: a refusal)
        cudnn_plan_store.remember_failure(job.cache, key, exc)
        return "not_built"
    note = cudnn_plan_store.store(job.cache, key, built.graph, chosen, built.deselected)
    return "built" if note is None else "not_stored"


def main(argv: list[str]) -> int:
    """Run the pickled job in ``argv[0]``: one JSON line per graph as it is done (``{"graph": position,
    "result": ...}``, runs/plan_builders.py reads them while the suite runs), then the counts as the last line."""
    job: BuildJob = pickle.loads(Path(argv[0]).read_bytes())

    def say(position: int, result: str) -> None:
        print(json.dumps({"graph": position, "result": result}), flush=True)

    print(json.dumps(build_missing(job, done=say)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

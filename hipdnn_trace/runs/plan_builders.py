"""``run --build-workers``: cuDNN plans the plan cache lacks, built by several processes before the first graph.

The builders (backends/cudnn_prebuild.py) start as soon as the run is planned, so their imports and plan
builds run beside the suite's own set-up (its fork server, the worker's CUDA context and warm-up); the suite
waits for them before its first graph and then restores each plan from the cache. On a machine where the
cache already holds the suite's plans a builder finds every entry and ends after its imports. What they did
is run.json's ``plan_builders`` and the ``plan_builds`` phase of ``phases_s``.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hipdnn_trace.backends.plan_cache import OPTION as PLAN_CACHE_OPTION, PlanCache
from hipdnn_trace.bench.config import Config
from hipdnn_trace.runs.plan import RunPlan

#: fewer graphs than this: building them in the suite costs less than starting builder processes
MIN_GRAPHS = 8
#: ``auto`` starts at most this many builders (measured on an H200 host: 8 and 12 shards built graphs/perf's
#: plans in 11.3 and 11.4 s, 4 in 14.6 s; docs/benchmarks.md)
MAX_AUTO = 8
#: graphs per builder below which another builder is not worth its start
GRAPHS_PER_BUILDER = 6
#: a builder still running after this long is stopped; the suite builds what it left
WAIT_LIMIT_S = 600.0


def builds_for(config: Config) -> bool:
    """A configuration whose plans a builder makes as the suite would: cuDNN's heuristic choice."""
    return config.backend == "cudnn" and config.engine is None and not config.autotune and not config.tuned \
        and config.plugin_path is None


def worker_count(choice: str | int, configs: list[Config], graphs: int, cache: PlanCache | None,
                 cpus: int | None = None) -> int:
    """How many builders to start: none without a plan cache, without a cuDNN configuration that uses the
    heuristic's plan, or (``auto``) for fewer than MIN_GRAPHS graphs; ``auto`` is up to MAX_AUTO, half the
    cores, one per GRAPHS_PER_BUILDER graphs."""
    if cache is None or not any(builds_for(c) for c in configs) or graphs == 0:
        return 0
    if choice == "auto":
        if graphs < MIN_GRAPHS:
            return 0
        return max(1, min(MAX_AUTO, (cpus or os.cpu_count() or 2) // 2, math.ceil(graphs / GRAPHS_PER_BUILDER)))
    return min(int(choice), graphs)


@dataclass
class Builders:
    """The running builder processes and where their job files and logs are."""

    procs: list[subprocess.Popen]
    folder: Path
    started: float = field(default_factory=time.monotonic)

    def wait(self, limit_s: float = WAIT_LIMIT_S) -> dict[str, Any]:
        """Wait for every builder (stopping one past ``limit_s``); run.json's ``plan_builders`` block."""
        counts: Counter[str] = Counter()
        failed: list[str] = []
        deadline = self.started + limit_s
        for i, proc in enumerate(self.procs):
            try:
                out, _ = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
                failed.append(f"builder {i}: stopped after {limit_s:g} s")
                continue
            last = (out or "").strip().splitlines()[-1:] or [""]
            try:
                counts.update(json.loads(last[0]))
            except json.JSONDecodeError:
                log = (self.folder / f"builder{i}.log").read_text(errors="replace").strip().splitlines()
                failed.append(f"builder {i}: exit {proc.returncode}: {(log or ['no output'])[-1][:200]}")
        self.close()
        return {"workers": len(self.procs), "seconds": round(time.monotonic() - self.started, 3),
                **dict(sorted(counts.items())), **({"failed": failed} if failed else {})}

    def close(self) -> None:
        """Stop whatever still runs (an interrupted suite) and remove the job files."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def start(plan: RunPlan) -> Builders | None:
    """Start the builders ``plan`` asks for (``--build-workers``); None when none is worth starting. Not with
    ``--gpus`` (each worker builds on its own GPU, which may not be the first's kind)."""
    from hipdnn_trace.backends.cudnn_prebuild import BuildJob

    options = plan.settings.options
    cache = (options.extra or {}).get(PLAN_CACHE_OPTION)
    n = 0 if plan.gpus is not None else worker_count(plan.request.build_workers, plan.configs, len(plan.sources),
                                                     cache if isinstance(cache, PlanCache) else None)
    if n == 0:
        return None
    folder = Path(tempfile.mkdtemp(prefix="hipdnn-trace-builders-"))
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    procs = []
    for i in range(n):
        job = BuildJob(plan.sources[i::n], cache, options.device, plan.request.allow_unknown_fields)
        (folder / f"builder{i}.job").write_bytes(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
        with open(folder / f"builder{i}.log", "wb") as log:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "hipdnn_trace.backends.cudnn_prebuild", str(folder / f"builder{i}.job")],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=env, text=True))
    return Builders(procs, folder)

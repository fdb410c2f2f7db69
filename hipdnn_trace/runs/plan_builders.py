"""``run --build-workers``: cuDNN plans the plan cache lacks, built by several processes ahead of the suite.

The builders (backends/cudnn_prebuild.py) start as soon as the run is planned, so their imports and plan
builds run beside the suite's own set-up (its fork server, the worker's CUDA context and warm-up) and its
first graphs: before it hands a graph to its runner the suite waits only until that graph's builder has done
it (:meth:`Builders.ready`), then restores the plan from the cache. Waiting for every builder before the first
graph left the GPU idle for the slowest builder's whole slice (5-7 s of a cold graphs/perf run on an H200,
docs/benchmarks.md). On a machine where the cache already holds the suite's plans a builder finds every entry
and ends after its imports. What they did is run.json's ``plan_builders``.
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
import threading
import time
from collections import Counter
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


class Builders:
    """The running builder processes, where their job files and logs are, and which graphs they have done.

    A thread per builder reads its lines as they come: ``{"graph": position, ...}`` per graph done, its counts
    last. The suite asks :meth:`ready` before it hands a graph to its runner and waits only while that graph's
    builder has not yet done it, so the builders' work overlaps the suite's first graphs instead of preceding
    them."""

    def __init__(self, procs: list[subprocess.Popen], folder: Path, limit_s: float = WAIT_LIMIT_S) -> None:
        self.procs, self.folder = procs, folder
        self.started = time.monotonic()
        self.deadline = self.started + limit_s
        self.limit_s = limit_s
        self.waited_s = 0.0
        self.started_while_building = 0
        self._last_ended = self.started
        self._done: set[int] = set()
        self._asked: set[int] = set()
        self._ended: set[int] = set()
        self._last: dict[int, str] = {}
        self._changed = threading.Condition()
        self._readers = [threading.Thread(target=self._read, args=(i, proc), daemon=True, name=f"builder {i}")
                         for i, proc in enumerate(procs)]
        for reader in self._readers:
            reader.start()

    def _read(self, i: int, proc: subprocess.Popen) -> None:
        for line in proc.stdout or ():
            line = line.strip()
            try:
                said = json.loads(line)
            except json.JSONDecodeError:
                continue
            with self._changed:
                if isinstance(said, dict) and isinstance(said.get("graph"), int):
                    self._done.add(said["graph"])
                else:
                    self._last[i] = line
                self._changed.notify_all()
        with self._changed:
            self._ended.add(i)
            self._last_ended = time.monotonic()
            self._changed.notify_all()

    def building(self) -> bool:
        """Whether some builder is still at work."""
        with self._changed:
            return len(self._ended) < len(self.procs)

    def ready(self, position: int) -> None:
        """Return once the graph at ``position`` (0-based, in the suite's order) is done by its builder, that
        builder has ended, or the builders' time is up; the wait counts in ``waited_s``."""
        owner = position % len(self.procs)   # start() gives builder i every len(procs)-th graph from i
        t0 = time.monotonic()
        with self._changed:
            while position not in self._done and owner not in self._ended:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(timeout=left)
            if len(self._ended) < len(self.procs) and position not in self._asked:
                self.started_while_building += 1
            self._asked.add(position)
        self.waited_s += time.monotonic() - t0

    def wait(self) -> dict[str, Any]:
        """Wait for every builder (stopping one past the time limit); run.json's ``plan_builders`` block."""
        counts: Counter[str] = Counter()
        failed: list[str] = []
        for i, proc in enumerate(self.procs):
            try:
                proc.wait(timeout=max(0.0, self.deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                failed.append(f"builder {i}: stopped after {self.limit_s:g} s")
                continue
            finally:
                self._readers[i].join()
            try:
                counts.update(json.loads(self._last.get(i, "")))
            except json.JSONDecodeError:
                path = self.folder / f"builder{i}.log"
                log = path.read_text(errors="replace").strip().splitlines() if path.is_file() else []
                failed.append(f"builder {i}: exit {proc.returncode}: {(log or ['no output'])[-1][:200]}")
        seconds = round(self._last_ended - self.started, 3)   # until the last one ended
        self.close()
        return {"workers": len(self.procs), "seconds": seconds, **dict(sorted(counts.items())),
                "waited_s": round(self.waited_s, 3), "graphs_started_while_building": self.started_while_building,
                **({"failed": failed} if failed else {})}

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
        job = BuildJob(plan.sources[i::n], cache, options.device, plan.request.allow_unknown_fields,
                       positions=list(range(len(plan.sources)))[i::n])
        (folder / f"builder{i}.job").write_bytes(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
        with open(folder / f"builder{i}.log", "wb") as log:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "hipdnn_trace.backends.cudnn_prebuild", str(folder / f"builder{i}.job")],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, env=env, text=True))
    return Builders(procs, folder)

"""Configurations that cannot share a process (two hipDNN plugin builds, an --oracle tuned twin).

hipDNN's ``set_engine_plugin_paths`` is process-wide and must precede the first
handle, so A with plugins from one build and B from another need one process
each. Per graph, each group of configurations with the same ``process_key`` runs
in its own isolated child that sends its outputs back; B is then validated
against A here, on the same seeded inputs, exactly as in a one-process A/B.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace

from hipdnn_trace import backends
from hipdnn_trace.backends.base import RunOptions
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings, validate_ab
from hipdnn_trace.bench.isolation import IsolatedRunner
from hipdnn_trace.bench.records import GraphRun
from hipdnn_trace.graph.sources import GraphSource
from hipdnn_trace.markers import Markers


def process_key(config: Config, options: RunOptions) -> Hashable:
    """Configurations with equal keys may share a process; backends without the hook (or whose hook
    answers None) always can. ``run --oracle``'s tuned twin asks with its own options (``tuned``), so a
    backend whose tuning is process-wide (torch, hipDNN) keeps it out of the ootb plan's process."""
    key = getattr(backends.get(config.backend), "process_key", None)
    value = key(config.run_options(options)) if key else None
    return None if value is None else (config.backend, value)


def groups(configs: Sequence[Config], options: RunOptions) -> list[list[Config]]:
    """Configurations grouped by process key, in their order."""
    by_key: dict[Hashable, list[Config]] = {}
    for cfg in configs:
        by_key.setdefault(process_key(cfg, options), []).append(cfg)
    return list(by_key.values())


def needs_split(configs: Sequence[Config], options: RunOptions) -> bool:
    return len(groups(configs, options)) > 1


class SplitRunner:
    """Runs each process group of a graph's configurations in its own child, then joins them."""

    def __init__(self, isolated: IsolatedRunner) -> None:
        self.isolated = isolated

    def close(self) -> None:
        self.isolated.close()

    def abort(self) -> None:
        """Kill the child now running (an interrupted --gpus pool)."""
        self.isolated.abort()

    def __call__(self, source: GraphSource, configs: Sequence[Config], settings: RunSettings,
                 markers: Markers, *, on_iteration: Callable[[int], None] | None = None,
                 on_stage: Callable[[str], None] | None = None) -> GraphRun:
        parts = [
            self.isolated(source, group, replace(settings, ab=False, keep_outputs=True), markers,
                          on_iteration=on_iteration, on_stage=on_stage)
            for group in groups(configs, settings.options)
        ]
        run = parts[0]
        for part in parts[1:]:
            run.configs.extend(part.configs)
            run.validation.extend(part.validation)
            run.notes.extend(n for n in part.notes if n not in run.notes)
            run.phases.extend(p for p in part.phases if p.name != "load")
            if not run.reference:
                run.reference = part.reference
            if run.graph is None:
                run.graph, run.graph_id, run.name, run.status, run.error = (
                    part.graph, part.graph_id, part.name, part.status, part.error)
        if settings.ab and run.graph is not None:
            validate_ab(run.graph, run, settings)
        run.notes.append(f"configurations ran in {len(parts)} processes (process-wide plugin paths)")
        return run

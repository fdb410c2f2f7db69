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
from hipdnn_trace.bench.isolation import IsolatedRunner
from hipdnn_trace.bench.output_validation import validate_ab
from hipdnn_trace.bench.records import GraphRun
from hipdnn_trace.bench.run_settings import RunSettings
from hipdnn_trace.graph.sources import GraphSource
from hipdnn_trace.markers import Markers


def process_key(config: Config, options: RunOptions) -> Hashable:
    """Configurations with equal keys may share a process; backends without the hook (or whose hook
    answers None) always can. ``run --oracle``'s tuned twin asks with its own options (``tuned``), so a
    backend whose tuning is process-wide (torch, hipDNN) keeps it out of the ootb plan's process."""
    key = getattr(backends.get(config.backend), "process_key", None)
    value = key(config.run_options(options)) if key else None
    return None if value is None else (config.backend, value)


def keyed_groups(configs: Sequence[Config], options: RunOptions) -> list[tuple[Hashable, list[Config]]]:
    """(process key, its configurations), in the configurations' order."""
    by_key: dict[Hashable, list[Config]] = {}
    for cfg in configs:
        by_key.setdefault(process_key(cfg, options), []).append(cfg)
    return list(by_key.items())


def groups(configs: Sequence[Config], options: RunOptions) -> list[list[Config]]:
    """Configurations grouped by process key, in their order."""
    return [group for _, group in keyed_groups(configs, options)]


def _part_settings(settings: RunSettings) -> RunSettings:
    """A group's settings: no A/B inside it; for an A/B its outputs come back (B is validated against
    A here). Without one (--oracle's twins validate against the reference each in its own child) the
    outputs stay in the child: sending them kept the data on the host and moved every output over a pipe."""
    return replace(settings, ab=False, keep_outputs=settings.ab)


def needs_split(configs: Sequence[Config], options: RunOptions) -> bool:
    return len(groups(configs, options)) > 1


class SplitRunner:
    """Runs each process group of a graph's configurations in its own child, then joins them.

    Each group has an isolating runner of its own (the first is the one given; the others are made
    like it), so with resident children every group keeps its process from graph to graph: one
    runner alternating between groups would end its child at every switch and pay a process start
    (a CUDA context, the libraries) per group per graph."""

    def __init__(self, isolated: IsolatedRunner) -> None:
        self.isolated = isolated
        self._runners: dict[Hashable, IsolatedRunner] = {}

    def _runner_for(self, key: Hashable) -> IsolatedRunner:
        """The group's runner: the given one for the first group, a new one like it for each other."""
        if key not in self._runners:
            base = self.isolated
            self._runners[key] = base if not self._runners else IsolatedRunner(
                base.timeout_s, tail_bytes=base.tail_bytes, env=base.server.env, resident=base.resident)
        return self._runners[key]

    def _all(self) -> list[IsolatedRunner]:
        return list(dict.fromkeys([self.isolated, *self._runners.values()]))

    def close(self) -> None:
        for runner in self._all():
            runner.close()

    def abort(self) -> None:
        """Kill the children now running (an interrupted --gpus pool)."""
        for runner in self._all():
            runner.abort()

    def warm(self, configs: Sequence[Config], settings: RunSettings) -> dict[str, float] | None:
        """Set up each group's resident child before the first graph (bench/warm.py): seconds per part,
        summed over the groups; None when none could be set up."""
        spent: dict[str, float] = {}
        worked = False
        for key, group in keyed_groups(configs, settings.options):
            parts = self._runner_for(key).warm(group, _part_settings(settings))
            worked = worked or parts is not None
            for name, seconds in (parts or {}).items():
                spent[name] = round(spent.get(name, 0.0) + seconds, 3)
        return spent if worked else None

    def between_graphs(self) -> None:
        """Replace any group's spent child now, between graphs (IsolatedRunner.between_graphs)."""
        for runner in self._all():
            runner.between_graphs()

    @property
    def successor_warm_ups(self) -> list[float]:
        return [s for runner in self._all() for s in runner.successor_warm_ups]

    @property
    def versions(self) -> dict[str, str]:
        """The libraries' versions as the groups' set-up children loaded them."""
        return {k: v for runner in self._all() for k, v in runner.versions.items()}

    def __call__(self, source: GraphSource, configs: Sequence[Config], settings: RunSettings,
                 markers: Markers, *, on_iteration: Callable[[int], None] | None = None,
                 on_stage: Callable[[str], None] | None = None) -> GraphRun:
        parts = [
            self._runner_for(key)(source, group, _part_settings(settings), markers,
                                  on_iteration=on_iteration, on_stage=on_stage)
            for key, group in keyed_groups(configs, settings.options)
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

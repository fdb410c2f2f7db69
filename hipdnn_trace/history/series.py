"""Series out of the store (one per graph x configuration x GPU, in time order) and the step changes in
each, with what changed between the run after a step and the run before it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from hipdnn_trace.history.changes import find_steps
from hipdnn_trace.history.store import Store

SERIES_KEY = ("graph_id", "config", "gpu")

_QUERY = """
SELECT r.graph, r.graph_id, r.config, u.gpu, r.run_id, u.created, r.median_ms, r.ci_low_ms, r.ci_high_ms,
       r.status, r.engine, u.driver, u.versions_json, u.path
FROM results r JOIN runs u ON u.run_id = r.run_id
{where}
ORDER BY r.graph, r.config, u.gpu, u.created, r.run_id"""


def load_series(store: Store, graphs: list[str] | None = None) -> pl.DataFrame:
    """Every (graph, configuration, GPU, run) point; ``graphs``: names or graph_ids to keep (all: None)."""
    where, params = "", []
    if graphs:
        marks = ", ".join("?" for _ in graphs)
        where, params = f"WHERE r.graph IN ({marks}) OR r.graph_id IN ({marks})", [*graphs, *graphs]
    return store.frame(_QUERY.format(where=where), params)


@dataclass(frozen=True)
class Change:
    """A step in one series: the first run after it, its size and what else changed then."""

    graph: str
    graph_id: str
    config: str
    gpu: str
    run_id: str
    created: Any
    previous_run_id: str
    ratio: float
    ratio_low: float
    ratio_high: float
    sigmas: float
    versions_changed: str
    path: str

    @property
    def kind(self) -> str:
        return "regression" if self.ratio > 1 else "improvement"


def version_changes(before: dict[str, Any], after: dict[str, Any]) -> str:
    """'cudnn 9.18.0 -> 9.19.0, driver 570 -> 580' for the keys whose values differ ('' when none)."""
    keys = sorted(set(before) | set(after))
    return ", ".join(f"{k} {before.get(k, '-')} -> {after.get(k, '-')}" for k in keys
                     if str(before.get(k)) != str(after.get(k)))


def _versions(row: dict[str, Any]) -> dict[str, Any]:
    try:
        found = json.loads(row.get("versions_json") or "{}")
    except ValueError:
        found = {}
    return {**(found if isinstance(found, dict) else {}), "driver": row.get("driver") or "-",
            "engine": row.get("engine") or "-"}


def changes_in(points: pl.DataFrame) -> list[Change]:
    """The steps of every series in ``points`` (only runs whose row was ok and timed count)."""
    ok = points.filter((pl.col("status") == "ok") & (pl.col("median_ms") > 0))
    found: list[Change] = []
    for _, group in ok.group_by(list(SERIES_KEY), maintain_order=True):
        rows = group.sort("created", "run_id").to_dicts()
        med = np.array([r["median_ms"] for r in rows], dtype=float)
        low = np.array([r["ci_low_ms"] if r["ci_low_ms"] else r["median_ms"] for r in rows], dtype=float)
        high = np.array([r["ci_high_ms"] if r["ci_high_ms"] else r["median_ms"] for r in rows], dtype=float)
        for step in find_steps(med, low, high):
            after, before = rows[step.index], rows[step.index - 1]
            found.append(Change(
                graph=after["graph"], graph_id=after["graph_id"], config=after["config"], gpu=after["gpu"],
                run_id=after["run_id"], created=after["created"], previous_run_id=before["run_id"],
                ratio=step.ratio, ratio_low=step.ratio_low, ratio_high=step.ratio_high, sigmas=step.sigmas,
                versions_changed=version_changes(_versions(before), _versions(after)), path=after["path"]))
    return sorted(found, key=lambda c: (-abs(np.log(c.ratio)), c.graph, c.config))

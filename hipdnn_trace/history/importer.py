"""``db import``: run folders -> the store's ``runs`` and ``results`` rows. A run is read through the same
loader every command uses (results/rundir.py load_run: the read gate, run.json's checks), its summary
only; a run already in the store (same run_id and creation time) is skipped, so importing twice changes
nothing; a different run with the same run_id is refused."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl

from hipdnn_trace.errors import UserError
from hipdnn_trace.history.schema import RESULT_COLUMNS, RUN_COLUMNS
from hipdnn_trace.history.store import Store
from hipdnn_trace.results.rundir import Run, load_run

#: summary.csv column -> results column (the rest are named alike)
RENAMED = {"median": "median_ms", "median_ci_low": "ci_low_ms", "median_ci_high": "ci_high_ms", "mean": "mean_ms",
           "std": "std_ms"}


@dataclass
class ImportOutcome:
    imported: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)   # already in the store
    rows: int = 0


def _created(meta: dict[str, Any], path: Path) -> datetime:
    text = meta.get("created")
    if not isinstance(text, str):
        raise UserError(f"{path / 'run.json'}: 'created' missing or not text; cannot place the run in time")
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UserError(f"{path / 'run.json'}: 'created' {text[:40]!r} is not an ISO date") from None
    return when.astimezone(timezone.utc).replace(tzinfo=None) if when.tzinfo else when


def run_row(run: Run, now: datetime) -> dict[str, Any]:
    """The ``runs`` row of a run folder: when, what, on which machine and GPU, with which libraries."""
    meta = run.meta
    gpu = meta.get("gpu") if isinstance(meta.get("gpu"), dict) else {}
    machine = meta.get("machine") if isinstance(meta.get("machine"), dict) else {}
    versions = meta.get("versions") if isinstance(meta.get("versions"), dict) else {}
    clock = gpu.get("sm_clock_mhz", gpu.get("max_sm_clock_mhz"))
    return {"run_id": str(meta.get("run_id") or run.path.name), "created": _created(meta, run.path),
            "status": str(meta.get("status") or ""), "path": str(run.path.resolve()),
            "tool_version": str(versions.get("hipdnn_trace", "")), "host": str(machine.get("host", "")),
            "cpu": str(machine.get("cpu", "")), "gpu": str(gpu.get("name", "") or "cpu"),
            "driver": str(gpu.get("driver", "")),
            "sm_clock_mhz": float(clock) if isinstance(clock, (int, float)) else None,
            "versions_json": json.dumps(versions, sort_keys=True), "imported_at": now,
            "clocks_json": json.dumps({"clocks": meta.get("clocks"), "timing_clocks": (meta.get("timing") or {})
                                       .get("clocks") if isinstance(meta.get("timing"), dict) else None},
                                      sort_keys=True, default=str)}


def result_rows(run: Run, run_id: str) -> pl.DataFrame:
    """The ``results`` rows of a run: one per graph x configuration, its statistics and verdict."""
    summary = run.summary.rename({k: v for k, v in RENAMED.items() if k in run.summary.columns})
    missing = [c for c in ("graph", "graph_id", "config", "median_ms") if c not in summary.columns]
    if missing:
        raise UserError(f"{run.path / 'summary.csv'}: no column {', '.join(missing)}")
    out = summary.with_columns(pl.lit(run_id).alias("run_id"))
    return out.select([
        pl.col(c).cast(pl.Int64 if c == "n" else pl.Float64 if c.endswith("_ms") else pl.String)
        if c in out.columns else pl.lit(None, dtype=pl.Int64 if c == "n" else
                                        pl.Float64 if c.endswith("_ms") else pl.String).alias(c)
        for c in RESULT_COLUMNS])


def _known(store: Store, run_id: str) -> datetime | None | bool:
    rows = store.sql("SELECT created FROM runs WHERE run_id = ?", [run_id])
    return rows[0][0] if rows else False


def import_runs(store: Store, folders: list[Path]) -> ImportOutcome:
    """Import every run folder in one transaction (all or none)."""
    outcome = ImportOutcome()
    now = datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)
    loaded = [load_run(f, strict=True, frames=("summary",)) for f in folders]   # every refusal before a write
    with store.transaction():
        for run in loaded:
            row = run_row(run, now)
            known = _known(store, row["run_id"])
            if known is not False:
                if known != row["created"]:
                    raise UserError(f"{run.path}: run_id {row['run_id']} is already in the store for another run "
                                    f"(created {known}); rename the folder's run or use another store")
                outcome.skipped.append(row["run_id"])
                continue
            results = result_rows(run, row["run_id"])
            store.insert("runs", pl.DataFrame([row], schema_overrides={"sm_clock_mhz": pl.Float64})
                         .select(RUN_COLUMNS))
            store.insert("results", results)
            outcome.imported.append(row["run_id"])
            outcome.rows += results.height
    return outcome


def import_into(target: str, folder: Path) -> str:
    """``run --db`` and the Slurm merge job: one run folder into the store ``target``; the line to print."""
    store = Store(target)
    try:
        outcome = import_runs(store, [folder])
    finally:
        store.close()
    if outcome.skipped:
        return f"db: {folder.name} already in {target}"
    return f"db: imported {outcome.rows} row(s) of {folder.name} into {target}"

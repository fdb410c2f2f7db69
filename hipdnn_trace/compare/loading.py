"""Turn what a user names on the command line into a loaded run.

``compare`` and ``report`` accept a run directory, any file inside one (run.json,
summary.json, iterations.parquet, ...), or a bare ``iterations.parquet`` written
elsewhere (then there is no run.json, so the timing method is unknown).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

import polars as pl

from hipdnn_trace.errors import UserError
from hipdnn_trace.results import schemas

#: Files a run directory may hold; naming any of them means "this run".
RUN_FILES = {
    "run.json",
    "summary.csv",
    "summary.json",
    "iterations.parquet",
    "validation.csv",
    "kernels.parquet",
    "counters.parquet",
    "trace.pftrace",
}


@dataclass
class LoadedRun:
    """The frames of one run; same fields as ``hipdnn_trace.results.rundir.Run``."""

    path: Path
    meta: dict[str, Any]
    summary: pl.DataFrame
    iterations: pl.DataFrame
    validation: pl.DataFrame
    kernels: pl.DataFrame = field(default_factory=lambda: schemas.empty(schemas.KERNELS))
    counters: pl.DataFrame = field(default_factory=lambda: schemas.empty(schemas.COUNTERS))


def _read_frame(path: Path, schema: schemas.Schema) -> pl.DataFrame:
    if not path.exists():
        return schemas.empty(schema)
    try:
        if path.suffix == ".parquet":
            df = pl.read_parquet(path)
        else:
            present = pl.read_csv(path, n_rows=0).columns
            overrides = {c: t for c, t in schema.items() if c in present}
            df = pl.read_csv(path, schema_overrides=overrides)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise UserError(f"{path}: cannot read: {exc}") from exc
    return schemas.conform(df, schema)


def _load_run_directory(path: Path) -> LoadedRun:
    """Stand-in for ``hipdnn_trace.results.rundir.load_run`` (same files, same frames)."""
    meta_path = path / "run.json"
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"{meta_path}: cannot read: {exc}") from exc
    if not isinstance(meta, dict):
        raise UserError(f"{meta_path}: expected a JSON object")
    return LoadedRun(
        path=path,
        meta=meta,
        summary=_read_frame(path / "summary.csv", schemas.SUMMARY),
        iterations=_read_frame(path / "iterations.parquet", schemas.ITERATIONS),
        validation=_read_frame(path / "validation.csv", schemas.VALIDATION),
        kernels=_read_frame(path / "kernels.parquet", schemas.KERNELS),
        counters=_read_frame(path / "counters.parquet", schemas.COUNTERS),
    )


def _load_bare_iterations(path: Path) -> LoadedRun:
    iterations = _read_frame(path, schemas.ITERATIONS)
    run_ids = iterations["run_id"].drop_nulls().unique().to_list()
    meta: dict[str, Any] = {"run_id": run_ids[0] if len(run_ids) == 1 else path.stem}
    return LoadedRun(
        path=path,
        meta=meta,
        summary=schemas.empty(schemas.SUMMARY),
        iterations=iterations,
        validation=schemas.empty(schemas.VALIDATION),
    )


def load_input(source: Any) -> Any:
    """A run object (returned as is) or a path -> a loaded run.

    Anything with ``meta`` and ``iterations`` attributes counts as a run object, so
    ``hipdnn_trace.load_run(...)`` results pass straight through.
    """
    if hasattr(source, "meta") and hasattr(source, "iterations"):
        return source
    if not isinstance(source, (str, PathLike)):
        raise UserError(f"expected a run directory or a loaded run, got {type(source).__name__}")
    path = Path(source)
    if not path.exists():
        raise UserError(f"{path}: no such run directory or file")
    if path.is_file():
        if path.name in RUN_FILES and (path.parent / "run.json").exists():
            path = path.parent
        elif path.suffix == ".parquet":
            return _load_bare_iterations(path)
        else:
            raise UserError(
                f"{path}: not part of a run directory (no run.json beside it); "
                "compare needs raw samples: a run directory or an iterations.parquet"
            )
    if not (path / "run.json").exists():
        raise UserError(f"{path}: not a run directory (no run.json)")
    return _load_run_directory(path)


def run_label(run: Any) -> str:
    """Short name of a run for tables and plots: its run_id, else its folder name."""
    label = run.meta.get("run_id") if isinstance(run.meta, dict) else None
    return str(label) if label else Path(run.path).name

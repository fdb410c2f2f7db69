"""Turn what a user names on the command line into a loaded run.

``compare`` and ``report`` accept a run directory, any file inside one (run.json,
summary.json, iterations.parquet, ...), or a bare ``iterations.parquet`` written
elsewhere (then there is no run.json, so the timing method is unknown). Run
directories are read by ``hipdnn_trace.results.rundir.load_run`` in strict mode: a
missing, empty or garbage summary.csv is a one-line error naming the file, never an
empty table.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any

import polars as pl

from hipdnn_trace import read_gate
from hipdnn_trace.errors import UserError
from hipdnn_trace.results import frame_cells, schemas
from hipdnn_trace.results.rundir import Run, load_run


def _load_bare_iterations(path: Path) -> Run:
    """A lone iterations file: raw samples without run.json (timing method unknown)."""
    read_gate.check(path, read_gate.TABLE_PARQUET)
    try:
        iterations = pl.read_parquet(path)
    except Exception as exc:  # polars raises several types for corrupt files
        raise UserError(f"{path}: cannot read ({' '.join(str(exc).split())[:200]})") from None
    iterations = frame_cells.typed(path, iterations, schemas.ITERATIONS, frame_cells.table_row)
    run_ids = iterations["run_id"].drop_nulls().unique().to_list()
    meta: dict[str, Any] = {"run_id": run_ids[0] if len(run_ids) == 1 else path.stem}
    empty = {name: schemas.empty(schema) for name, schema in schemas.FRAMES.items()}
    return Run(path=path, meta=meta, **{**empty, "iterations": iterations})


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
        if (path.parent / "run.json").exists():  # any file of a run names that run
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
    return load_run(path, strict=True)


def run_label(run: Any) -> str:
    """Short name of a run for tables and plots: its run_id, else its folder name."""
    label = run.meta.get("run_id") if isinstance(run.meta, dict) else None
    return str(label) if label else Path(run.path).name

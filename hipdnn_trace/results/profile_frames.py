"""The counter frames a profiled run folder holds beside its tables (``kernel_metrics``, ``graph_limiters``,
written by profilers/), read back through the read gate for ``compare --why`` and the report."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from hipdnn_trace import read_gate
from hipdnn_trace.errors import UserError

PROFILE_FRAMES = ("kernel_metrics", "graph_limiters")


def load_profile_frame(folder: Path, name: str) -> pl.DataFrame | None:
    """``name`` of the run folder (Parquet first, then CSV); None when the run was not profiled so."""
    if name not in PROFILE_FRAMES:
        raise ValueError(name)
    for fmt in ("parquet", "csv"):
        path = Path(folder) / f"{name}.{fmt}"
        if not path.exists():
            continue
        try:
            read_gate.check(path, read_gate.TABLE_PARQUET if fmt == "parquet" else read_gate.TABLE_TEXT)
            return pl.read_parquet(path) if fmt == "parquet" else pl.read_csv(path, infer_schema_length=None)
        except read_gate.ReadRefused as exc:
            raise UserError(f"{path}: {exc.problem}") from None
        except Exception as exc:   # polars raises several types for corrupt files
            raise UserError(f"{path}: cannot read ({' '.join(str(exc).split())[:200]})") from None
    return None

"""What a run's summary.csv must be before compare, report or merge take it as a record.

A run writes each (file, graph, configuration) once and every statistic finite or null; a row that breaks
one of these was damaged or edited, and read as it stands it would become a NaN median in a report or a
doubled graph in a comparison. (A cell its column's type cannot hold, ``n = many``, is refused as every
frame is read: results/frame_cells.py.) Each check names the file, the line (as in summary.csv, header =
line 1) and the column, in one line.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from hipdnn_trace.errors import UserError

#: a run writes these finite or null; NaN or Inf here is a damaged or hand-edited table
#: (median_ci_* are NaN for n = 0, so they are not listed)
FINITE_STATISTICS = ("n", "mean", "std", "min", "p5", "p25", "median", "p75", "p95", "p99", "max")


def check_statistics(path: Path, summary: pl.DataFrame) -> None:
    """Refuse a NaN or infinite statistic, naming the line and the column."""
    for column in (c for c in FINITE_STATISTICS if c in summary.columns and summary[c].dtype.is_float()):
        bad = summary.with_row_index("row").filter(~pl.col(column).is_finite()).head(1)
        if bad.height:
            row, graph = bad["row"][0], bad["graph"][0] if "graph" in summary.columns else None
            raise UserError(f"{path}: line {row + 2} (graph {graph!r}): column {column!r} is {bad[column][0]}, "
                            "not a measured value (damaged or edited); rerun that graph")


def check_repeated_rows(path: Path, summary: pl.DataFrame) -> None:
    """One run records each (file, graph, configuration, engine) once: a summary holding one twice was written
    by two writers at once (two resumes before the run folder had a lock) or edited, and its other
    tables and trace are doubled too. Refused, never de-duplicated, even when the two rows are
    identical: which copy's iterations and trace belong to the row cannot be told apart."""
    if not summary.height:
        return
    cols = [c for c in ("source", "graph_id", "config", "engine") if c in summary.columns]   # engines: rows apart
    seen = summary.with_row_index("row").with_columns(
        pl.concat_str([pl.col(c).cast(pl.Utf8).fill_null("\x01") for c in cols], separator="\x00").alias("key"))
    repeated = seen.filter(pl.col("key").is_duplicated())
    if repeated.height:
        first = repeated.row(0, named=True)
        second = repeated.filter(pl.col("key") == first["key"]).row(1, named=True)
        raise UserError(f"{path}: graph {first.get('graph')!r} ({first.get('source')}) on config "
                        f"{first.get('config')!r} is recorded twice (lines {first['row'] + 2} and "
                        f"{second['row'] + 2}); a run records each graph once, so this folder was written twice "
                        "or edited: rerun it")

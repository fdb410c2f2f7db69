"""A run's interleaved A/B verdicts (its ``ab`` frame, ab.csv) as ``compare`` and ``report`` show them.

The verdicts were decided while the run ran (bench/ab.py, bench/paired.py); this module only
orders, counts and formats them: regressions first, then improvements, undecided, same.
"""

from __future__ import annotations

import json
import math
from typing import Any

import polars as pl

from hipdnn_trace.compare.result import RATIO_LABEL
from hipdnn_trace.results import schemas

ORDER = {"SLOWER": 0, "FASTER": 1, "UNDECIDED": 2, "SAME": 3}
COLUMNS = ["graph", "A", "B", RATIO_LABEL, "CI", "verdict", "rounds", "blocks", "band", "stop"]


def ab_frame(run: Any) -> pl.DataFrame:
    """The run's ab frame in display order (empty when the run has none)."""
    df = getattr(run, "ab", None)
    if df is None or not df.height:
        return schemas.empty(schemas.AB)
    return df.with_columns(
        pl.col("verdict").replace_strict(ORDER, default=len(ORDER), return_dtype=pl.Int64).alias("_order"),
        pl.col("ratio").log().abs().alias("_size"),
    ).sort(["_order", "_size"], descending=[False, True], nulls_last=True).drop("_order", "_size")


def counts(df: pl.DataFrame) -> dict[str, int]:
    found = dict(df.get_column("verdict").value_counts().iter_rows()) if df.height else {}
    return {v: int(found.get(v, 0)) for v in ORDER}


def excluding_one(df: pl.DataFrame) -> int:
    """Rows whose interval lies wholly on one side of 1.0 (in an A/A, each one is a false alarm)."""
    if not df.height:
        return 0
    return df.filter((pl.col("ci_low") > 1.0) | (pl.col("ci_high") < 1.0)).height


def exit_code(df: pl.DataFrame) -> int:
    """3 when a row is SLOWER (compare's code for a regression), else 0."""
    return 3 if counts(df)["SLOWER"] else 0


def _num(value: Any) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.3f}"


def rows(df: pl.DataFrame) -> list[list[str]]:
    """Text cells in :data:`COLUMNS` order."""
    out = []
    for r in df.iter_rows(named=True):
        ci = f"[{_num(r['ci_low'])}, {_num(r['ci_high'])}] at {r['confidence']:.1%}" \
            if r["confidence"] is not None else "-"
        out.append([r["graph"] or "", r["config"] or "", r["config_b"] or "", _num(r["ratio"]), ci,
                    r["verdict"] or "", str(r["rounds"]), str(r["blocks"]), f"+-{r['band'] * 100:g}%",
                    r["stop"] or ""])
    return out


def summary_line(df: pl.DataFrame) -> str:
    c = counts(df)
    return (", ".join(f"{n} {v}" for v, n in c.items()) + f"; {excluding_one(df)} of {df.height} intervals "
            "exclude 1.0")


def console(df: pl.DataFrame, label: str) -> str:
    """A plain-text table with a heading naming the run, and the counts."""
    cells = [COLUMNS, *rows(df)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    lines = [f"interleaved A/B in {label} ({RATIO_LABEL}, decided while it ran):"]
    lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in cells]
    lines.append(f"  {summary_line(df)}")
    return "\n".join(lines) + "\n"


def to_json(df: pl.DataFrame) -> str:
    data = {"counts": counts(df), "excluding_one": excluding_one(df),
            "rows": [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}
                     for r in df.iter_rows(named=True)]}
    return json.dumps(data, indent=2) + "\n"

"""What a comparison of two runs returns: the :class:`Comparison`, its table schemas and the words
for a ratio. Its own module so that both ways of comparing (samples in ``comparison.py``, a
dnn-benchmarking file's statistics in ``dnnbench_input.py``) build the same result without
importing each other."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from hipdnn_trace.compare.verdict import FASTER, INCONCLUSIVE, SAME, SLOWER, VERDICTS
from hipdnn_trace.errors import UserError

#: The one ratio every output shows (run's A/B line, compare's table, CSV and JSON, the report): B's median
#: time over A's, so above 1 B is slower. One direction and one name everywhere, so no reader has to
#: guess whether 1.05 is good news.
RATIO_NAME = "B/A time"
RATIO_LABEL = f"{RATIO_NAME} (>1: B slower)"
RATIO_DEFINITION = "median(B) / median(A) of kernel time; > 1: B slower"
#: the same ratio with ``compare --cycles``: GPU cycles, so runs at different clocks compare
RATIO_DEFINITION_CYCLES = "median(B) / median(A) of kernel cycles (kernel_ms x SM clock); > 1: B slower"


def fmt_change(ratio: float) -> str:
    """Ratio B/A in words, e.g. ``B 3.1% slower``."""
    if math.isnan(ratio):
        return "no rows tested"
    pct = (ratio - 1.0) * 100.0
    return f"B {abs(pct):.1f}% {'slower' if pct > 0 else 'faster'}"


#: Row order of every comparison output: what needs attention first.
SEVERITY = {SLOWER: 0, FASTER: 1, INCONCLUSIVE: 2, SAME: 3}


def display_order(table: pl.DataFrame) -> pl.DataFrame:
    """Rows needing attention first: SLOWER by ratio desc, FASTER asc, then the rest (by ratio, graph,
    config). The one order of the console, the report, the CSV, the JSON and ``Comparison.table``."""
    return (
        table.with_columns(
            pl.col("verdict").replace_strict(SEVERITY, default=9).alias("_sev"),
            pl.when(pl.col("verdict") == SLOWER).then(-pl.col("ratio")).otherwise(pl.col("ratio"))
            .alias("_key"),
        )
        .sort(["_sev", "_key", "graph", "config"], nulls_last=True, maintain_order=True)
        .drop("_sev", "_key")
    )


TABLE_SCHEMA: dict[str, pl.DataType] = {
    "graph": pl.String(),
    "graph_id": pl.String(),
    "config": pl.String(),
    "config_a": pl.String(),
    "config_b": pl.String(),
    "engine_a": pl.String(),
    "engine_b": pl.String(),
    "status_a": pl.String(),
    "status_b": pl.String(),
    "n_a": pl.Int64(),
    "n_b": pl.Int64(),
    "median_a": pl.Float64(),
    "median_b": pl.Float64(),
    "ratio": pl.Float64(),       # median_b / median_a (> 1: B slower)
    "ci_low": pl.Float64(),      # 95% CI of the ratio: sampling (bootstrap) and drift
    "ci_high": pl.Float64(),
    "boot_low": pl.Float64(),    # 95% CI from the bootstrap alone (within-run noise)
    "boot_high": pl.Float64(),
    "p_value": pl.Float64(),     # two-sided Mann-Whitney U
    "p_holm": pl.Float64(),      # Holm-adjusted across the suite
    "verdict": pl.String(),
    "note": pl.String(),
    "warnings_a": pl.String(),   # each run's row warnings (summary.warnings: noisy, outlier, throttled)
    "warnings_b": pl.String(),
}

UNMATCHED_SCHEMA: dict[str, pl.DataType] = {
    "only_in": pl.String(),      # "A" | "B"
    "graph": pl.String(),
    "graph_id": pl.String(),
    "config": pl.String(),
    "engine": pl.String(),
    "status": pl.String(),
    "n": pl.Int64(),
}


Z95 = 1.959963984540054


class TimingMismatchError(UserError):
    """The two runs measured time differently; their numbers do not compare."""


@dataclass(repr=False)
class Comparison:
    """Everything ``compare`` found; ``table`` has one row per matched pair."""

    table: pl.DataFrame
    geomean: float                        # geometric mean of ratio (B/A time) over tested rows
    geomean_ci: tuple[float, float]
    validation_changes: pl.DataFrame
    unmatched: pl.DataFrame
    label_a: str
    label_b: str
    settings: dict[str, Any]
    method_differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        # regressions first in the frame itself, so .table, --format csv/json and the console agree
        self.table = display_order(self.table)

    def __repr__(self) -> str:
        """One line: what was compared and how it came out (the frames have their own reprs)."""
        verdicts = ", ".join(f"{n} {v}" for v, n in self.counts.items() if n)
        return (f"Comparison({self.label_b} vs {self.label_a}: {self.table.height} matched pair(s)"
                f"{': ' + verdicts if verdicts else ''}; geomean {RATIO_NAME} {self.geomean:.3f}; "
                f"{self.unmatched.height} unmatched; .table .validation_changes .unmatched)")

    @property
    def counts(self) -> dict[str, int]:
        found = dict(self.table.group_by("verdict").len().iter_rows())
        return {v: int(found.get(v, 0)) for v in VERDICTS}

    @property
    def newly_failing(self) -> pl.DataFrame:
        return self.validation_changes.filter(pl.col("change") == "newly failing")

    @property
    def coverage(self) -> tuple[int, int]:
        """(rows in both runs, rows in either run): how much of the two suites the verdicts cover."""
        return self.table.height, self.table.height + self.unmatched.height

    @property
    def overall_claim(self) -> bool:
        """Whether the geomean may speak for the suites: enough of them matched (``min_coverage``)."""
        matched, total = self.coverage
        return matched > 0 and matched >= self.settings.get("min_coverage", 0.0) * total

    @property
    def exit_code(self) -> int:
        """3 if any row is SLOWER, else 2 if an output newly fails validation, else 1 if too few rows
        matched for an overall claim, else 0."""
        if self.counts[SLOWER]:
            return 3
        if self.newly_failing.height:
            return 2
        if not self.overall_claim:
            return 1
        return 0

    def top(self, verdict: str, n: int = 5) -> pl.DataFrame:
        """The ``n`` largest regressions (SLOWER) or improvements (FASTER)."""
        rows = self.table.filter(pl.col("verdict") == verdict)
        return rows.sort("ratio", descending=verdict == SLOWER).head(n)



"""Compare two runs: pair their measurements, test each pair, give verdicts."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from hipdnn_trace.compare import stats
from hipdnn_trace.compare.loading import load_input, run_label
from hipdnn_trace.compare.matching import match, units
from hipdnn_trace.compare.method import method_differences, run_status_notes
from hipdnn_trace.compare.validation_changes import validation_changes
from hipdnn_trace.compare.verdict import (
    FASTER,
    INCONCLUSIVE,
    MIN_SAMPLES,
    SLOWER,
    VERDICTS,
    decide,
)
from hipdnn_trace.errors import UserError

#: Bootstrap replicates per row; 2000 keeps the 2.5% / 97.5% percentiles stable to
#: well under the threshold's resolution while a 500-row suite stays a few seconds.
N_BOOT = 2000

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
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "p_value": pl.Float64(),     # two-sided Mann-Whitney U
    "p_holm": pl.Float64(),      # Holm-adjusted across the suite
    "verdict": pl.String(),
    "note": pl.String(),
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


class TimingMismatchError(UserError):
    """The two runs measured time differently; their numbers do not compare."""


@dataclass
class Comparison:
    """Everything ``compare`` found; ``table`` has one row per matched pair."""

    table: pl.DataFrame
    geomean: float                        # geometric mean of ratio (B/A) over tested rows
    geomean_ci: tuple[float, float]
    validation_changes: pl.DataFrame
    unmatched: pl.DataFrame
    label_a: str
    label_b: str
    settings: dict[str, Any]
    method_differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        found = dict(self.table.group_by("verdict").len().iter_rows())
        return {v: int(found.get(v, 0)) for v in VERDICTS}

    @property
    def newly_failing(self) -> pl.DataFrame:
        return self.validation_changes.filter(pl.col("change") == "newly failing")

    @property
    def exit_code(self) -> int:
        """3 if any row is SLOWER, else 2 if an output newly fails validation, else 0."""
        if self.counts[SLOWER]:
            return 3
        if self.newly_failing.height:
            return 2
        return 0

    def top(self, verdict: str, n: int = 5) -> pl.DataFrame:
        """The ``n`` largest regressions (SLOWER) or improvements (FASTER)."""
        rows = self.table.filter(pl.col("verdict") == verdict)
        return rows.sort("ratio", descending=verdict == SLOWER).head(n)


def _samples(values: Any) -> np.ndarray:
    return np.asarray(values if values is not None else [], dtype=float)


def _missing_note(label: str, n: int, status: str | None) -> str | None:
    if n == 0:
        return f"no timed samples in {label} (status {status or 'unknown'})"
    return None


def _test_pairs(
    pairs: pl.DataFrame, *, n_boot: int, seed: int
) -> tuple[list[dict[str, Any]], list[np.ndarray]]:
    """Per pair: medians, ratio with bootstrap CI, rank-test p (before Holm)."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    boots: list[np.ndarray] = []
    for pair in pairs.iter_rows(named=True):
        a, b = _samples(pair["samples_a"]), _samples(pair["samples_b"])
        row: dict[str, Any] = {
            name: pair.get(name)
            for name in ("graph", "graph_id", "config", "config_a", "config_b",
                         "engine_a", "engine_b", "status_a", "status_b")
        }
        row.update(n_a=len(a), n_b=len(b))
        row["median_a"] = float(np.median(a)) if len(a) else None
        row["median_b"] = float(np.median(b)) if len(b) else None
        if len(a) and len(b):
            row["ratio"] = row["median_b"] / row["median_a"]
        notes = [
            note
            for note in (
                _missing_note("A", len(a), pair["status_a"]),
                _missing_note("B", len(b), pair["status_b"]),
            )
            if note
        ]
        if not notes and min(len(a), len(b)) < MIN_SAMPLES:
            notes.append(f"too few samples (need {MIN_SAMPLES} per run)")
        if not notes:
            estimate = stats.median_ratio(a, b, n_boot=n_boot, rng=rng)
            row.update(
                ci_low=estimate.ci_low,
                ci_high=estimate.ci_high,
                p_value=stats.mann_whitney_u(a, b).p_value,
            )
            row["_boot"] = len(boots)
            boots.append(estimate.log_boot)
        row["note"] = "; ".join(notes) or None
        rows.append(row)
    return rows, boots


def compare_runs(
    a: Any,
    b: Any,
    *,
    by: str = "graph",
    threshold: float = 0.05,
    alpha: float = 0.05,
    allow_mismatch: bool = False,
    seed: int = 0,
    n_boot: int = N_BOOT,
) -> Comparison:
    """Compare run B against run A (run directories, files in them, or loaded runs).

    Raises :class:`TimingMismatchError` when the runs were timed differently (timer,
    cache mode, clock control, ...) unless ``allow_mismatch``.
    """
    if not threshold > 0:
        raise UserError(f"--threshold must be > 0, got {threshold}")
    if not 0 < alpha < 1:
        raise UserError(f"--alpha must be in (0, 1), got {alpha}")
    if n_boot < 100:
        raise UserError(f"--bootstrap must be >= 100, got {n_boot}")
    run_a, run_b = load_input(a), load_input(b)
    label_a, label_b = run_label(run_a), run_label(run_b)
    differences = method_differences(run_a.meta, run_b.meta)
    notes = run_status_notes(run_a.meta, "A") + run_status_notes(run_b.meta, "B")
    if differences and not allow_mismatch:
        raise TimingMismatchError(
            f"runs {label_a} and {label_b} were timed differently ({'; '.join(differences)}); "
            "their times do not compare. Pass --allow-mismatch to compare anyway"
        )
    if differences:
        notes.append("timed differently (allowed): " + "; ".join(differences))

    matched = match(units(run_a), units(run_b), by, (label_a, label_b))
    notes.extend(matched.notes)
    rows, boots = _test_pairs(matched.pairs, n_boot=n_boot, seed=seed)

    p_raw = np.array(
        [math.nan if r.get("p_value") is None else r["p_value"] for r in rows], dtype=float
    )
    p_adj = stats.holm(p_raw)
    tested_log_ratios, tested_boot = [], []
    for row, p in zip(rows, p_adj):
        row["p_holm"] = None if math.isnan(p) else float(p)
        row["verdict"] = decide(
            row.get("ci_low"), row.get("ci_high"), row["p_holm"], threshold=threshold, alpha=alpha
        )
        index = row.pop("_boot", None)
        if index is not None:
            tested_log_ratios.append(math.log(row["ratio"]))
            tested_boot.append(boots[index])
    geo, geo_lo, geo_hi = stats.geomean_ratio(
        np.array(tested_log_ratios),
        np.array(tested_boot) if tested_boot else np.zeros((0, n_boot)),
    )
    table = pl.DataFrame(
        {name: [r.get(name) for r in rows] for name in TABLE_SCHEMA}, schema=TABLE_SCHEMA
    )
    unmatched = pl.concat(
        [
            side.select(
                pl.lit(name).alias("only_in"), "graph", "graph_id", "config", "engine", "status", "n"
            )
            for name, side in (("A", matched.only_a), ("B", matched.only_b))
        ]
    ).cast(UNMATCHED_SCHEMA)  # type: ignore[arg-type]
    changes = validation_changes(
        run_a.validation, run_b.validation, pair_configs=matched.configs_paired
    )
    return Comparison(
        table=table,
        geomean=geo,
        geomean_ci=(geo_lo, geo_hi),
        validation_changes=changes,
        unmatched=unmatched,
        label_a=label_a,
        label_b=label_b,
        settings={
            "by": by,
            "threshold": threshold,
            "alpha": alpha,
            "seed": seed,
            "n_boot": n_boot,
            "min_samples": MIN_SAMPLES,
            "test": "Mann-Whitney U (two-sided), Holm-adjusted",
            "ci": "percentile bootstrap of median(B)/median(A), 95%",
        },
        method_differences=differences,
        notes=notes,
    )


__all__ = ["Comparison", "TimingMismatchError", "compare_runs", "FASTER", "SLOWER", "INCONCLUSIVE"]

"""Compare two runs: pair their measurements, test each pair, give verdicts."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from hipdnn_trace.compare import dnnbench_input, stats
from hipdnn_trace.compare.loading import load_input, run_label
from hipdnn_trace.compare.matching import match, units
from hipdnn_trace.compare.method import clock_difference, method_differences, run_status_notes
from hipdnn_trace.compare.result import (  # re-exported: callers import them from here
    RATIO_DEFINITION,
    RATIO_DEFINITION_CYCLES,
    TABLE_SCHEMA,
    UNMATCHED_SCHEMA,
    Z95,
    Comparison,
    TimingMismatchError,
    fmt_change,
)
from hipdnn_trace.compare.validation_changes import validation_changes
from hipdnn_trace.compare.verdict import (
    FASTER,
    INCONCLUSIVE,
    MIN_SAMPLES,
    SLOWER,
    band,
    decide,
)
from hipdnn_trace.errors import UserError

#: Bootstrap replicates per row; 2000 keeps the 2.5% / 97.5% percentiles stable to
#: well under the threshold's resolution while a 500-row suite stays a few seconds.
N_BOOT = 2000


def _parse_drift(drift: float | str) -> float | None:
    """``"auto"`` -> None (estimate), ``"off"`` -> 0, else a non-negative fraction."""
    if drift == "auto":
        return None
    if drift == "off":
        return 0.0
    try:
        value = float(drift)
    except (TypeError, ValueError):
        raise UserError(f"--drift must be auto, off or a fraction like 0.02, got {drift!r}") from None
    if not 0 <= value < 1:
        raise UserError(f"--drift must be in [0, 1), got {value}")
    return value


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
                         "engine_a", "engine_b", "status_a", "status_b", "warnings_a", "warnings_b")
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
                boot_low=estimate.ci_low,
                boot_high=estimate.ci_high,
                p_value=stats.mann_whitney_u(a, b).p_value,
            )
            row["_boot"] = len(boots)
            row["_samples"] = (a, b)
            boots.append(estimate.log_boot)
        row["note"] = "; ".join(notes) or None
        rows.append(row)
    return rows, boots


@dataclass
class _Judged:
    geomean: float
    geomean_ci: tuple[float, float]
    drift: float
    relative_to: float | None
    notes: list[str]


def _relative_to_centre(tested: list[dict[str, Any]], centre: float, notes: list[str]) -> float:
    """--relative: each tested row's ratio, CI and test against the suite's centre (in place); the centre."""
    if len(tested) < stats.MIN_DRIFT_ROWS:
        raise UserError(
            f"--relative needs at least {stats.MIN_DRIFT_ROWS} tested graphs to find the "
            f"suite's centre; this comparison has {len(tested)}"
        )
    relative_to = math.exp(centre)
    notes.append(
        f"ratios are relative to the suite's centre ({relative_to:.3f}): each verdict says "
        "how a graph moved against the rest; the geomean is absolute"
    )
    for row in tested:
        a, b = row["_samples"]
        row["p_value"] = stats.mann_whitney_u(a, b / relative_to).p_value
        for name in ("ratio", "boot_low", "boot_high"):
            row[name] /= relative_to
    return relative_to


def _judge(
    rows: list[dict[str, Any]],
    boots: list[np.ndarray],
    *,
    threshold: float,
    alpha: float,
    fixed_drift: float | None,
    relative: bool,
    n_boot: int,
) -> _Judged:
    """Drift, Holm, widened CIs and verdicts for the tested rows (in place), and the geomean."""
    notes: list[str] = []
    tested = [r for r in rows if "_boot" in r]
    log_ratios = np.array([math.log(r["ratio"]) for r in tested])
    sampling_se = np.array(
        [(math.log(r["boot_high"]) - math.log(r["boot_low"])) / (2 * Z95) for r in tested]
    )
    centre, tau = stats.suite_noise(log_ratios, sampling_se)
    if fixed_drift is not None:
        tau = fixed_drift
    relative_to = _relative_to_centre(tested, centre, notes) if relative else None
    if Z95 * tau >= math.log1p(threshold):
        source = "estimated from the suite" if fixed_drift is None else "given"
        notes.append(
            f"run-to-run drift of {tau:.1%} per graph ({source}) is as large as the "
            f"{threshold:.0%} threshold: only much larger changes get a verdict. More "
            "iterations do not shrink drift; a quieter machine (or runs made back to back) does"
        )
    if len(tested) >= stats.MIN_DRIFT_ROWS:
        z = np.abs(log_ratios - centre) / np.sqrt(sampling_se**2 + tau**2 + 1e-300)
        outliers = int((z > 3).sum())
        if outliers > max(2, 0.05 * len(tested)):  # a normal suite has ~0.3% beyond 3 sd
            notes.append(
                f"{outliers} of {len(tested)} graphs moved far more than the suite's drift "
                f"({tau:.1%}): either B changed them, or this machine has per-run states "
                "(allocation, clocks) that single runs cannot see; an A/A calibration "
                "(benchmarks/aa_calibration.py) tells which"
            )
    p_raw = np.array(
        [math.nan if r.get("p_value") is None else r["p_value"] for r in rows], dtype=float
    )
    for row, p in zip(rows, stats.holm(p_raw)):
        row["p_holm"] = None if math.isnan(p) else float(p)
        if "_boot" in row:
            low, high = stats.widen_log_interval(
                math.log(row["ratio"]), math.log(row["boot_low"]), math.log(row["boot_high"]), tau
            )
            row["ci_low"], row["ci_high"] = math.exp(low), math.exp(high)
        row["verdict"] = decide(
            row.get("ci_low"), row.get("ci_high"), row["p_holm"], threshold=threshold, alpha=alpha
        )
    geo, geo_lo, geo_hi = stats.geomean_ratio(
        log_ratios,
        np.array([boots[r["_boot"]] for r in tested]) if tested else np.zeros((0, n_boot)),
    )
    if tested and tau > 0:  # independent per-graph drift averages down as 1/sqrt(rows)
        low, high = stats.widen_log_interval(
            math.log(geo), math.log(geo_lo), math.log(geo_hi), tau / math.sqrt(len(tested))
        )
        geo_lo, geo_hi = math.exp(low), math.exp(high)
    lower, upper = band(threshold)
    if tested and not relative and (geo_lo > upper or geo_hi < lower):
        notes.append(
            f"the whole suite moved ({fmt_change(geo)} geomean, CI beyond the "
            f"{threshold:.0%} band): if B did not change every graph, the machine differed "
            "between the runs (load, clocks, thermals); run back to back on an idle machine, "
            "or judge graphs against each other with --relative"
        )
    return _Judged(geo, (geo_lo, geo_hi), tau, relative_to, notes)


def _check_cycles(run: Any, label: str) -> None:
    """``--cycles`` needs clocks on the timed samples; say so in one line where a run has none."""
    frame = run.iterations
    has = "cycles" in frame.columns and frame.filter(
        (pl.col("phase") == "timed") & pl.col("cycles").is_not_null()).height > 0
    if not has:
        raise UserError(f"--cycles: run {label} has no SM clock on its timed samples (cycles need NVML clock "
                        "samples: a GPU run on NVIDIA); compare times instead")


def _check_settings(threshold: float, alpha: float, n_boot: int, min_coverage: float) -> None:
    if not threshold > 0:
        raise UserError(f"--threshold must be > 0, got {threshold}")
    if not 0 < alpha < 1:
        raise UserError(f"--alpha must be in (0, 1), got {alpha}")
    if n_boot < 100:
        raise UserError(f"--bootstrap must be >= 100, got {n_boot}")
    if not 0 <= min_coverage <= 1:
        raise UserError(f"--min-coverage must be in [0, 1], got {min_coverage}")


def _method_gate(run_a: Any, run_b: Any, label_a: str, label_b: str, allow_mismatch: bool,
                 allow_clock_mismatch: bool, cycles: bool = False) -> tuple[list[str], list[str]]:
    """(how the runs were timed differently, notes); TimingMismatchError where that is not allowed.
    With ``cycles`` (compared in GPU cycles) clock policies may differ, and both runs need clocks."""
    differences = method_differences(run_a.meta, run_b.meta)
    notes = run_status_notes(run_a.meta, "A") + run_status_notes(run_b.meta, "B")
    if differences and not allow_mismatch:
        raise TimingMismatchError(
            f"runs {label_a} and {label_b} were timed differently ({'; '.join(differences)}); "
            "their times do not compare. Pass --allow-mismatch to compare anyway"
        )
    if differences:
        notes.append("timed differently (allowed): " + "; ".join(differences))
    if cycles:
        for label, run in ((label_a, run_a), (label_b, run_b)):
            _check_cycles(run, label)
    clocks = clock_difference(run_a.meta, run_b.meta)
    if clocks and not (allow_clock_mismatch or cycles):
        raise TimingMismatchError(
            f"runs {label_a} and {label_b} were taken under different clock policies ({clocks}); "
            "boost and locked clocks move medians more than most changes. Pass --allow-clock-mismatch "
            "to compare anyway"
        )
    if clocks:
        differences = [*differences, clocks]
        notes.append(f"clocks differ (allowed): {clocks}; " + ("compared in GPU cycles (--cycles)" if cycles
                     else "a change in a large graph may be the clocks"))
    return differences, notes


def _unmatched(matched: Any) -> pl.DataFrame:
    """The units only one run has, with the side they are in."""
    return pl.concat(
        [
            side.select(
                pl.lit(name).alias("only_in"), "graph", "graph_id", "config", "engine", "status", "n"
            )
            for name, side in (("A", matched.only_a), ("B", matched.only_b))
        ]
    ).cast(UNMATCHED_SCHEMA)  # type: ignore[arg-type]


def compare_runs(
    a: Any,
    b: Any,
    *,
    by: str = "graph",
    threshold: float = 0.05,
    alpha: float = 0.05,
    allow_mismatch: bool = False,
    allow_clock_mismatch: bool = False,
    seed: int = 0,
    n_boot: int = N_BOOT,
    drift: float | str = "auto",
    relative: bool = False,
    min_coverage: float = 0.5,
    cycles: bool = False,
) -> Comparison:
    """Compare run B against run A (run directories, files in them, or loaded runs).

    ``drift`` is the run-to-run sd of log(B/A) per graph that widens every CI:
    ``"auto"`` estimates it from the suite (0 below 10 rows), ``"off"`` is 0, a number
    sets it (e.g. from an A/A calibration of the machine). ``relative`` judges each
    graph against the suite's centre instead of 1, for machines whose overall speed
    moves between runs (a suite-wide change then shows only in the geomean).
    Raises :class:`TimingMismatchError` when the runs were timed differently (timer,
    cache mode, ...) unless ``allow_mismatch``, or under different clock policies (run.json
    ``clocks``: ``--clocks`` and whether the lock held) unless ``allow_clock_mismatch``.
    ``cycles`` compares GPU cycles (kernel_ms x the SM clock of each sample) instead of times, so runs
    at different clocks compare (a clock-policy difference is then allowed and noted).
    """
    _check_settings(threshold, alpha, n_boot, min_coverage)
    fixed_drift = _parse_drift(drift)
    if dnnbench_input.is_dnnbench(a) or dnnbench_input.is_dnnbench(b):   # statistics, not samples
        (label_a, rows_a), (label_b, rows_b) = dnnbench_input.load_side(a), dnnbench_input.load_side(b)
        return dnnbench_input.compare_stats(rows_a, rows_b, label_a, label_b, threshold=threshold, alpha=alpha,
                                             min_coverage=min_coverage)
    run_a, run_b = load_input(a), load_input(b)
    label_a, label_b = run_label(run_a), run_label(run_b)
    differences, notes = _method_gate(run_a, run_b, label_a, label_b, allow_mismatch, allow_clock_mismatch,
                                      cycles)
    metric = "cycles" if cycles else "kernel_ms"
    matched = match(units(run_a, metric), units(run_b, metric), by, (label_a, label_b))
    notes.extend(matched.notes)
    rows, boots = _test_pairs(matched.pairs, n_boot=n_boot, seed=seed)

    judged = _judge(rows, boots, threshold=threshold, alpha=alpha, fixed_drift=fixed_drift,
                    relative=relative, n_boot=n_boot)
    notes.extend(judged.notes)
    table = pl.DataFrame({name: [r.get(name) for r in rows] for name in TABLE_SCHEMA}, schema=TABLE_SCHEMA)
    changes = validation_changes(run_a.validation, run_b.validation, pair_configs=matched.configs_paired)
    settings = {
        "min_coverage": min_coverage, "by": by, "threshold": threshold, "alpha": alpha, "seed": seed,
        "n_boot": n_boot, "min_samples": MIN_SAMPLES, "test": "Mann-Whitney U (two-sided), Holm-adjusted",
        "ratio": RATIO_DEFINITION_CYCLES if cycles else RATIO_DEFINITION, "metric": metric,
        "ci": "percentile bootstrap of median(B)/median(A), 95%, widened by drift", "drift": judged.drift,
        "drift_source": "estimated from the suite" if fixed_drift is None else "given",
        "relative_to": judged.relative_to,
    }
    return Comparison(table=table, geomean=judged.geomean, geomean_ci=judged.geomean_ci, validation_changes=changes,
                      unmatched=_unmatched(matched), label_a=label_a, label_b=label_b, settings=settings,
                      method_differences=differences, notes=notes)


__all__ = ["Comparison", "TimingMismatchError", "compare_runs", "FASTER", "SLOWER", "INCONCLUSIVE"]

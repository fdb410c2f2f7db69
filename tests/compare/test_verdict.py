"""The verdict rule at its boundaries, and known answers on synthetic samples."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hipdnn_trace.compare import FASTER, INCONCLUSIVE, SAME, SLOWER, compare_runs
from hipdnn_trace.compare.verdict import band, decide


@pytest.mark.parametrize("low,high,p,expected", [
    (1.06, 1.10, 0.001, SLOWER),
    (1.06, 1.10, 0.2, INCONCLUSIVE),     # beyond the band but not significant after Holm
    (1.04, 1.10, 0.001, INCONCLUSIVE),   # significant, but could be under the threshold
    (0.90, 0.94, 0.001, FASTER),         # 0.94 < 1/1.05 = 0.952
    (0.94, 0.96, 0.001, INCONCLUSIVE),   # 0.94 < 0.952 < 0.96: straddles the lower edge
    (0.96, 1.04, 0.9, SAME),
    (0.96, 1.04, 0.001, SAME),           # significant but smaller than the threshold
    (0.96, 1.06, 0.9, INCONCLUSIVE),
    (None, None, None, INCONCLUSIVE),
    (math.nan, 1.0, 0.5, INCONCLUSIVE),
])
def test_decide(low, high, p, expected) -> None:
    assert decide(low, high, p, threshold=0.05, alpha=0.05) == expected


def test_band_is_symmetric_in_log_space() -> None:
    lower, upper = band(0.05)
    assert math.log(upper) == pytest.approx(-math.log(lower))
    with pytest.raises(ValueError):
        band(0.0)


def _one_row(make_run, a: np.ndarray, b: np.ndarray, **kw):
    run_a = make_run("A", {"g": a})
    run_b = make_run("B", {"g": b})
    return compare_runs(run_a, run_b, **kw).table.row(0, named=True)


def test_identical_samples_are_same(make_run, timings) -> None:
    samples = timings(2.0, 0.05, 100)
    row = _one_row(make_run, samples, samples.copy())
    assert row["verdict"] == SAME
    assert row["ratio"] == 1.0
    assert row["p_value"] == pytest.approx(1.0)


def test_ten_percent_shift_with_enough_samples_is_slower(make_run, timings) -> None:
    row = _one_row(make_run, timings(1.0, 0.05, 200), timings(1.1, 0.05, 200))
    assert row["verdict"] == SLOWER
    assert row["ci_low"] > 1.05  # the CI excludes 1 and even the threshold
    assert row["ci_low"] <= row["ratio"] <= row["ci_high"]
    assert row["p_holm"] < 1e-6


def test_ten_percent_speedup_is_faster(make_run, timings) -> None:
    row = _one_row(make_run, timings(1.1, 0.05, 200), timings(1.0, 0.05, 200))
    assert row["verdict"] == FASTER
    assert row["ci_high"] < 1 / 1.05


def test_noisy_overlapping_samples_are_inconclusive(make_run, timings) -> None:
    row = _one_row(make_run, timings(1.0, 0.3, 15), timings(1.05, 0.3, 15))
    assert row["verdict"] == INCONCLUSIVE
    assert row["ci_low"] < 1.0 < row["ci_high"]


def test_too_few_samples_claim_nothing(make_run) -> None:
    row = _one_row(make_run, np.array([1.0, 1.0, 1.0]), np.array([2.0, 2.0, 2.0]))
    assert row["verdict"] == INCONCLUSIVE
    assert "too few samples" in row["note"]
    assert row["ratio"] == 2.0 and row["ci_low"] is None


def test_seed_makes_the_table_reproducible(make_run, timings, tmp_path: Path) -> None:
    a = make_run("A", {"g": timings(1.0, 0.1, 40), "h": timings(3.0, 0.1, 40)})
    b = make_run("B", {"g": timings(1.0, 0.1, 40), "h": timings(3.0, 0.1, 40)})
    first = compare_runs(a, b, seed=4).table
    assert first.equals(compare_runs(a, b, seed=4).table)
    assert not first.equals(compare_runs(a, b, seed=5).table)  # the CI does depend on it


def test_holm_turns_a_lone_significance_into_inconclusive_in_a_large_suite(
    make_run, timings
) -> None:
    """One marginal row: significant alone, not after correcting across 60 rows."""
    base = {f"g{i}": timings(1.0, 0.02, 30) for i in range(60)}
    same = {name: values.copy() for name, values in base.items()}
    marginal_a = np.linspace(0.9, 1.1, 12)
    marginal_b = np.linspace(0.9, 1.1, 12) * 1.08  # exact p = 0.012
    base["m"], same["m"] = marginal_a, marginal_b
    alone = compare_runs(make_run("A1", {"m": marginal_a}), make_run("B1", {"m": marginal_b}))
    suite = compare_runs(make_run("A2", base), make_run("B2", same))
    alone_row = alone.table.row(0, named=True)
    suite_row = suite.table.filter(suite.table["graph"] == "m").row(0, named=True)
    assert alone_row["p_holm"] == alone_row["p_value"] < 0.05
    assert suite_row["p_value"] == pytest.approx(alone_row["p_value"])
    assert suite_row["p_holm"] >= 0.05
    assert suite_row["verdict"] != SLOWER


def _drifting_suite(make_run, rng, drift: float, n_graphs: int = 40):
    """Two runs of the same code whose graphs each drift by a per-run offset."""
    a, b = {}, {}
    for i in range(n_graphs):
        base = 1.0 + i * 0.1
        a[f"g{i}"] = base * np.exp(rng.normal(0, drift) + rng.normal(0, 0.01, 100))
        b[f"g{i}"] = base * np.exp(rng.normal(0, drift) + rng.normal(0, 0.01, 100))
    return make_run("A", a), make_run("B", b)


def test_drift_widens_intervals_and_avoids_false_verdicts(make_run) -> None:
    a, b = _drifting_suite(make_run, np.random.default_rng(2), drift=0.03)
    off = compare_runs(a, b, drift="off")
    auto = compare_runs(a, b)
    false_off = off.counts[SLOWER] + off.counts[FASTER]
    false_auto = auto.counts[SLOWER] + auto.counts[FASTER]
    assert false_off >= 4  # tight within-run CIs alone: drift reads as change
    assert false_auto <= 1
    assert auto.settings["drift"] == pytest.approx(0.03 * math.sqrt(2), rel=0.3)
    row = auto.table.row(0, named=True)
    assert row["ci_low"] < row["boot_low"] and row["ci_high"] > row["boot_high"]


def test_given_drift_is_used_as_is(make_run, timings) -> None:
    a = make_run("A", {"g": timings(1.0, 0.01, 100)})
    b = make_run("B", {"g": timings(1.1, 0.01, 100)})
    assert compare_runs(a, b).table["verdict"][0] == SLOWER  # one row: no drift estimate
    result = compare_runs(a, b, drift=0.05)
    assert result.settings["drift"] == 0.05
    assert result.table["verdict"][0] == INCONCLUSIVE
    assert any("as large as the 5% threshold" in n for n in result.notes)


def test_whole_suite_shift_is_noted(make_run, timings) -> None:
    a = make_run("A", {f"g{i}": timings(1.0 + i, 0.01, 60) for i in range(12)})
    b = make_run("B", {f"g{i}": timings((1.0 + i) * 1.2, 0.01, 60) for i in range(12)})
    result = compare_runs(a, b)
    assert result.counts[SLOWER] == 12
    assert any("the whole suite moved (B 20" in n for n in result.notes)

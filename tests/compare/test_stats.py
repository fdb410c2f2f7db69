"""Known answers for the numpy statistics (and agreement with scipy where installed)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from hipdnn_trace.compare import stats


def brute_force_u_pmf(n1: int, n2: int) -> np.ndarray:
    """P(U = u) by enumerating every placement of sample-1 ranks (no ties)."""
    counts = np.zeros(n1 * n2 + 1)
    for ranks in itertools.combinations(range(1, n1 + n2 + 1), n1):
        counts[sum(ranks) - n1 * (n1 + 1) // 2] += 1
    return counts / counts.sum()


@pytest.mark.parametrize("n1,n2", [(1, 1), (2, 3), (3, 4), (4, 4), (5, 2)])
def test_exact_u_distribution_matches_enumeration(n1: int, n2: int) -> None:
    got = stats._exact_u_distribution(min(n1, n2), max(n1, n2))
    np.testing.assert_allclose(got, brute_force_u_pmf(n1, n2), atol=1e-12)


def test_identical_samples_have_p_one_and_effect_one_half() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    result = stats.mann_whitney_u(x, x.copy())
    assert result.p_value == pytest.approx(1.0)
    assert result.effect == pytest.approx(0.5)
    assert result.method == "asymptotic"  # pooled sample has ties


def test_all_values_equal_gives_p_one() -> None:
    result = stats.mann_whitney_u(np.ones(10), np.ones(12))
    assert result.p_value == 1.0


def test_complete_separation_exact_p() -> None:
    # every b above every a, n=4 each: U=16, P(U>=16) = 1/C(8,4) = 1/70, two-sided 2/70
    result = stats.mann_whitney_u(np.arange(4.0), np.arange(10.0, 14.0))
    assert result.method == "exact"
    assert result.u == 16
    assert result.p_value == pytest.approx(2 / 70)
    assert result.effect == 1.0


def test_direction_of_u_is_b_above_a() -> None:
    low, high = np.arange(10.0), np.arange(100.0, 110.0)
    assert stats.mann_whitney_u(low, high).effect == 1.0
    assert stats.mann_whitney_u(high, low).effect == 0.0


@pytest.mark.parametrize("n1,n2,method", [
    (3, 5, "exact"), (8, 8, "exact"), (10, 25, "exact"), (20, 30, "exact"),
    (30, 40, "asymptotic"), (200, 150, "asymptotic"),
])
def test_mann_whitney_agrees_with_scipy(n1: int, n2: int, method: str) -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(n1 * 100 + n2)
    for shift in (0.0, 0.4, 1.0):
        a, b = rng.normal(size=n1), rng.normal(shift, size=n2)
        ours = stats.mann_whitney_u(a, b, method=method)
        theirs = scipy_stats.mannwhitneyu(b, a, method=method, alternative="two-sided")
        assert ours.u == pytest.approx(theirs.statistic)
        assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-9, abs=1e-15)


def test_mann_whitney_tie_correction_agrees_with_scipy() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(7)
    a = np.round(rng.normal(size=40), 1)  # coarse timer resolution: many ties
    b = np.round(rng.normal(0.3, size=55), 1)
    ours = stats.mann_whitney_u(a, b)
    theirs = scipy_stats.mannwhitneyu(b, a, method="asymptotic")
    assert ours.method == "asymptotic"
    assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-9)


def test_exact_refuses_ties() -> None:
    with pytest.raises(ValueError, match="ties"):
        stats.mann_whitney_u(np.array([1.0, 1.0]), np.array([2.0]), method="exact")


def test_holm_known_answer_and_nan_passthrough() -> None:
    p = np.array([0.01, 0.04, math.nan, 0.03, 0.005])
    # m = 4 valid: sorted 0.005, 0.01, 0.03, 0.04 scaled by 4, 3, 2, 1 -> .02 .03 .06 .04,
    # then made monotone -> .02 .03 .06 .06
    np.testing.assert_allclose(stats.holm(p), [0.03, 0.06, math.nan, 0.06, 0.02])
    assert np.isnan(stats.holm(np.array([math.nan]))).all()
    assert stats.holm(np.array([0.5, 0.9])).max() == 1.0


def test_bootstrap_median_matches_classic_resampling() -> None:
    """The order-statistic shortcut must give the classic bootstrap's distribution."""
    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 6, 31, 64):
        sample = rng.lognormal(size=n)
        fast = stats.bootstrap_medians(sample, 100_000, rng)
        idx = rng.integers(0, n, size=(100_000, n))
        classic = np.median(sample[idx], axis=1)
        values = np.union1d(np.unique(fast), np.unique(classic))
        if len(values) <= 200:  # small n: compare the probability of every value
            p_fast = np.searchsorted(np.sort(fast), values, side="right") / len(fast)
            p_classic = np.searchsorted(np.sort(classic), values, side="right") / len(classic)
            assert np.abs(p_fast - p_classic).max() < 0.01, n
        quantiles = [2.5, 25, 50, 75, 97.5]
        spread = classic.std() + 1e-12
        diff = np.abs(np.percentile(fast, quantiles) - np.percentile(classic, quantiles))
        assert (diff <= 0.05 * spread + 1e-12).all() or n < 7, n


def test_median_ratio_reproducible_with_seed() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.lognormal(size=50), rng.lognormal(size=50)
    one = stats.median_ratio(a, b, n_boot=500, rng=np.random.default_rng(9))
    two = stats.median_ratio(a, b, n_boot=500, rng=np.random.default_rng(9))
    assert (one.ci_low, one.ci_high) == (two.ci_low, two.ci_high)
    assert one.ci_low <= one.ratio <= one.ci_high
    assert one.ratio == pytest.approx(np.median(b) / np.median(a))


def test_geomean_of_known_ratios() -> None:
    logs = np.log(np.array([2.0, 0.5, 1.0]))
    boot = np.tile(logs[:, None], (1, 100))
    point, lo, hi = stats.geomean_ratio(logs, boot)
    assert point == pytest.approx(1.0)
    assert lo == pytest.approx(1.0) and hi == pytest.approx(1.0)
    assert all(math.isnan(v) for v in stats.geomean_ratio(np.array([]), np.zeros((0, 5))))


def test_drift_needs_ten_rows() -> None:
    assert stats.suite_drift(np.array([0.5] * 9), np.full(9, 0.01)) == 0.0


def test_drift_is_zero_when_the_scatter_is_explained_by_sampling() -> None:
    rng = np.random.default_rng(0)
    se = rng.uniform(0.005, 0.05, 400)
    assert stats.suite_drift(rng.normal(0, se), se) < 0.004


@pytest.mark.parametrize("tau", [0.01, 0.03, 0.08])
def test_drift_recovers_the_extra_scatter(tau: float) -> None:
    rng = np.random.default_rng(int(tau * 1000))
    se = rng.uniform(0.002, 0.04, 400)  # rows of very different noise
    log_ratios = 0.02 + rng.normal(0, np.sqrt(se**2 + tau**2))  # plus a common shift
    assert stats.suite_drift(log_ratios, se) == pytest.approx(tau, rel=0.25)


def test_drift_ignores_a_fifth_of_the_suite_really_changing() -> None:
    rng = np.random.default_rng(5)
    se = np.full(200, 0.005)
    log_ratios = rng.normal(0, np.sqrt(se**2 + 0.01**2))
    log_ratios[:40] += np.log(1.15)  # 20% of graphs got 15% slower
    assert stats.suite_drift(log_ratios, se) == pytest.approx(0.01, rel=0.3)


def test_widen_log_interval_adds_variances_per_side() -> None:
    low, high = stats.widen_log_interval(0.0, -0.03, 0.01, drift=0.0)
    assert (low, high) == pytest.approx((-0.03, 0.01))
    z = 1.959963984540054
    low, high = stats.widen_log_interval(0.1, 0.07, 0.14, drift=0.02)
    assert 0.1 - low == pytest.approx(math.hypot(0.03, z * 0.02))
    assert high - 0.1 == pytest.approx(math.hypot(0.04, z * 0.02))

"""Statistics for run-vs-run comparison, on numpy alone.

scipy is not a dependency of hipdnn-trace, so the rank test, the multiple-testing
correction and the bootstrap live here; the tests check them against scipy when it
is installed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Largest n_a + n_b for which the exact Mann-Whitney distribution is used (when
#: there are no ties). The generating-function product costs O(n_a^2 * n_b).
EXACT_MAX_TOTAL = 50


@dataclass(frozen=True)
class RankTest:
    """Result of a two-sided Mann-Whitney U test of sample B against sample A."""

    u: float            # U statistic of B (number of (a, b) pairs with b > a, ties 1/2)
    p_value: float      # two-sided
    method: str         # "exact" | "asymptotic"
    effect: float       # P(B > A) + P(B = A) / 2 (0.5: no shift; > 0.5: B larger)


def _rank(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mid-ranks (1-based, ties averaged) and the size of every tie group."""
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    boundaries = np.flatnonzero(np.diff(sorted_values)) + 1
    starts = np.concatenate(([0], boundaries))
    ends = np.concatenate((boundaries, [len(values)]))
    mid = (starts + ends + 1) / 2.0  # average of 1-based ranks starts+1 .. ends
    ranks = np.empty(len(values), dtype=float)
    ranks[order] = np.repeat(mid, ends - starts)
    return ranks, ends - starts


def _exact_u_distribution(n1: int, n2: int) -> np.ndarray:
    """P(U = u) for u = 0 .. n1*n2 under H0, no ties.

    The counts are the coefficients of the Gaussian binomial [n1+n2 choose n1]_q
    = prod_{i=1..n1} (1 - q^(n2+i)) / (1 - q^i); dividing by (1 - q^i) is a
    running sum with stride i. Floats keep it overflow-free; the result is normalised.
    """
    size = n1 * n2 + 1
    poly = np.zeros(size)
    poly[0] = 1.0
    for i in range(1, n1 + 1):
        shift = n2 + i
        if shift < size:
            poly[shift:] -= poly[: size - shift].copy()
        for start in range(i):  # divide by (1 - q^i): cumulative sums per residue class
            poly[start::i] = np.cumsum(poly[start::i])
    poly = np.clip(poly, 0.0, None)
    return poly / poly.sum()


def mann_whitney_u(a: np.ndarray, b: np.ndarray, method: str = "auto") -> RankTest:
    """Two-sided Mann-Whitney U test (Wilcoxon rank-sum) of ``b`` against ``a``.

    ``method="auto"`` is exact when there are no ties and n_a + n_b <= 50; otherwise
    the normal approximation with tie correction and continuity correction (the
    same conventions as ``scipy.stats.mannwhitneyu``).
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        raise ValueError("mann_whitney_u needs two non-empty samples")
    ranks, ties = _rank(np.concatenate((a, b)))
    u_b = float(ranks[n1:].sum() - n2 * (n2 + 1) / 2.0)
    effect = u_b / (n1 * n2)
    has_ties = bool((ties > 1).any())
    if method == "auto":
        method = "exact" if not has_ties and n1 + n2 <= EXACT_MAX_TOTAL else "asymptotic"
    if method == "exact":
        if has_ties:
            raise ValueError("the exact Mann-Whitney distribution assumes no ties")
        pmf = _exact_u_distribution(min(n1, n2), max(n1, n2))
        k = int(round(u_b))
        p = 2.0 * min(pmf[: k + 1].sum(), pmf[k:].sum())
        return RankTest(u_b, float(min(1.0, p)), "exact", effect)
    if method != "asymptotic":
        raise ValueError(f"unknown method {method!r}")
    n = n1 + n2
    mean_u = n1 * n2 / 2.0
    tie_term = float((ties.astype(float) ** 3 - ties).sum()) / (n * (n - 1)) if n > 1 else 0.0
    var_u = n1 * n2 / 12.0 * ((n + 1) - tie_term)
    if var_u <= 0:  # every value identical: no evidence of a shift at all
        return RankTest(u_b, 1.0, "asymptotic", effect)
    z = (abs(u_b - mean_u) - 0.5) / math.sqrt(var_u)
    p = math.erfc(max(z, 0.0) / math.sqrt(2.0))
    return RankTest(u_b, float(min(1.0, p)), "asymptotic", effect)


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm-Bonferroni step-down adjusted p-values (NaN stays NaN, not counted in m)."""
    p = np.asarray(p_values, dtype=float)
    adjusted = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    m = len(valid)
    if m == 0:
        return adjusted
    order = valid[np.argsort(p[valid], kind="mergesort")]
    scaled = p[order] * (m - np.arange(m))
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return adjusted


def bootstrap_medians(
    samples: np.ndarray, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """Medians of ``n_boot`` resamples (with replacement) of one sample, in O(n_boot).

    Drawing n indices uniformly from {0..n-1} is ``floor(n * U)`` for n uniform U, and
    the k-th smallest index is ``floor(n * U_(k))``. So instead of resampling n values
    and partitioning, draw the order statistics a median needs directly:
    ``U_(k) ~ Beta(k, n-k+1)`` and, for even n, ``U_(k+1) = U_(k) + (1-U_(k)) * W``
    with ``W ~ Beta(1, n-k)`` (the smallest of the n-k uniforms above U_(k)). The
    result has exactly the distribution of the classic bootstrap median, ~100x faster.
    """
    ordered = np.sort(np.asarray(samples, dtype=float))
    n = len(ordered)
    k = (n + 1) // 2  # 1-based rank of the (lower) median
    u_k = rng.beta(k, n - k + 1, size=n_boot)
    low = ordered[np.minimum((n * u_k).astype(np.int64), n - 1)]
    if n % 2:
        return low
    u_next = u_k + (1.0 - u_k) * rng.beta(1, n - k, size=n_boot)
    high = ordered[np.minimum((n * u_next).astype(np.int64), n - 1)]
    return (low + high) / 2.0


@dataclass(frozen=True)
class RatioEstimate:
    """median(B) / median(A) with a percentile bootstrap confidence interval."""

    ratio: float
    ci_low: float
    ci_high: float
    log_boot: np.ndarray  # log ratio of each bootstrap replicate (kept for the geomean CI)


def median_ratio(
    a: np.ndarray,
    b: np.ndarray,
    *,
    n_boot: int,
    rng: np.random.Generator,
    confidence: float = 0.95,
) -> RatioEstimate:
    """Ratio of medians B/A and its bootstrap CI; A and B are resampled independently."""
    boot_a = bootstrap_medians(a, n_boot, rng)
    boot_b = bootstrap_medians(b, n_boot, rng)
    log_boot = np.log(boot_b) - np.log(boot_a)
    tail = (1.0 - confidence) / 2.0 * 100.0
    lo, hi = np.percentile(log_boot, [tail, 100.0 - tail])
    ratio = float(np.median(b) / np.median(a))
    return RatioEstimate(ratio, float(math.exp(lo)), float(math.exp(hi)), log_boot)


#: Fewest tested rows from which the run-to-run drift is estimated; below it, 0.
MIN_DRIFT_ROWS = 10


def _normal_quantile(p: float) -> float:
    """Inverse standard normal CDF by bisection on math.erf (no scipy)."""
    low, high = -10.0, 10.0
    for _ in range(80):
        mid = (low + high) / 2.0
        if 0.5 * (1.0 + math.erf(mid / math.sqrt(2.0))) < p:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0


#: Rows whose standardised deviation exceeds this are set aside as probable real
#: changes while the drift is estimated from the rest.
DRIFT_TRIM = 2.5


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    order = np.argsort(values)
    cumulative = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cumulative, cumulative[-1] / 2.0)])


def _drift_for_target(deviation: np.ndarray, variance: np.ndarray, target: float) -> float:
    """Smallest tau with weighted-median(|z|) <= target, z = deviation / sqrt(variance + tau^2).

    Weights 1 / (variance + tau^2): a row whose own noise dwarfs any drift says nothing
    about the drift, and must not pull the median of |z| down.
    """

    def median_z(tau: float) -> float:
        total = variance + tau**2 + 1e-300
        return _weighted_median(deviation / np.sqrt(total), 1.0 / total)

    if median_z(0.0) <= target:
        return 0.0
    low, high = 0.0, float(deviation.max()) / target + 1e-12
    for _ in range(60):  # median_z falls as tau grows
        mid = (low + high) / 2.0
        low, high = (mid, high) if median_z(mid) > target else (low, mid)
    return high


def suite_noise(log_ratios: np.ndarray, sampling_se: np.ndarray) -> tuple[float, float]:
    """(centre, tau) of a suite's log ratios: where the unchanged graphs sit, and the
    run-to-run drift, the sd of log(B/A) per graph that the within-run samples miss.

    Two runs of the same code differ graph by graph (clocks, thermals, neighbours,
    memory placement) by more than each run's own samples suggest. Across a suite,
    that shows as log ratios scattered wider than their bootstrap standard errors:
    tau is the extra sd that makes ``z = (log_ratio - centre) / sqrt(se^2 + tau^2)``
    standard normal, judged by the median of |z| (a robust Paule-Mandel estimator;
    the median is weighted by 1 / (se^2 + tau^2), so rows too noisy to show any drift
    do not dilute it).

    Real changes must not count as drift, or a regression of part of the suite would
    hide itself. So after a first estimate from every row, rows with |z| > 2.5 are set
    aside as probable changes and centre and tau are re-estimated from the rest (the
    target is then the median |z| of a normal truncated at 2.5, so trimming does not
    shrink tau), until the rows kept stop changing. Starting from the all-rows
    estimate errs on the side of a larger tau (fewer false verdicts): when a large
    share of the suite really changed, tau grows and those rows turn INCONCLUSIVE
    rather than hiding the change completely (the geomean still shows it).
    Returns (0, 0) for fewer than ``MIN_DRIFT_ROWS`` rows: no estimate is possible.
    """
    log_ratios = np.asarray(log_ratios, dtype=float)
    variance = np.asarray(sampling_se, dtype=float) ** 2
    if len(log_ratios) < MIN_DRIFT_ROWS:
        return 0.0, 0.0
    kept_mass = math.erf(DRIFT_TRIM / math.sqrt(2.0))  # P(|Z| <= trim)
    trimmed_target = _normal_quantile(0.5 + kept_mass / 4.0)  # median |Z| given |Z| <= trim
    centre = _weighted_median(log_ratios, 1.0 / (variance + 1e-300))
    tau = _drift_for_target(np.abs(log_ratios - centre), variance, _normal_quantile(0.75))
    keep = np.ones(len(log_ratios), dtype=bool)
    for _ in range(100):
        z = np.abs(log_ratios - centre) / np.sqrt(variance + tau**2 + 1e-300)
        new_keep = z <= DRIFT_TRIM
        if new_keep.sum() < MIN_DRIFT_ROWS or (new_keep == keep).all():
            break
        keep = new_keep
        centre = _weighted_median(log_ratios[keep], 1.0 / (variance[keep] + tau**2 + 1e-300))
        tau = _drift_for_target(np.abs(log_ratios[keep] - centre), variance[keep], trimmed_target)
    return centre, tau


def suite_drift(log_ratios: np.ndarray, sampling_se: np.ndarray) -> float:
    """The drift tau of :func:`suite_noise` alone."""
    return suite_noise(log_ratios, sampling_se)[1]


def widen_log_interval(
    log_ratio: float, log_low: float, log_high: float, drift: float, z: float = 1.959963984540054
) -> tuple[float, float]:
    """A CI (log scale) widened by drift: each side's half-width h becomes sqrt(h^2 + (z*drift)^2).

    Adding variances side by side keeps the bootstrap's asymmetry.
    """
    extra = (z * drift) ** 2
    low = log_ratio - math.sqrt((log_ratio - log_low) ** 2 + extra)
    high = log_ratio + math.sqrt((log_high - log_ratio) ** 2 + extra)
    return low, high


def geomean_ratio(
    log_ratios: np.ndarray, log_boot: np.ndarray, confidence: float = 0.95
) -> tuple[float, float, float]:
    """Geometric mean of per-row ratios and its CI.

    ``log_boot`` is rows x replicates; replicate j of the geomean averages replicate j
    of every row, so each row's own uncertainty carries into the suite-level CI.
    """
    if len(log_ratios) == 0:
        return (math.nan, math.nan, math.nan)
    point = math.exp(float(np.mean(log_ratios)))
    per_replicate = log_boot.mean(axis=0)
    tail = (1.0 - confidence) / 2.0 * 100.0
    lo, hi = np.percentile(per_replicate, [tail, 100.0 - tail])
    return point, math.exp(float(lo)), math.exp(float(hi))

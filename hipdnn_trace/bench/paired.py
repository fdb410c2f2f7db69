"""The interleaved A/B's statistic, its confidence interval and its verdict (docs/compare.md).

Each round of four blocks (A B B A, or B A A B) gives one number: the mean log block median of
B's two blocks minus A's. A linear drift inside the round cancels, and a block's median shrugs
off a spike inside it. The interval on B/A comes from the rounds' numbers by Wilcoxon's signed-rank
test inverted (the Hodges-Lehmann centre and its exact interval): distribution-free, so a round
spoiled by a neighbour's burst widens it little, and exact for an A/A whatever the noise, since
swapping the labels of a round flips its sign. With few rounds it is honest by refusing: below
6 rounds no 95% interval exists (2/2^n > 5%), and the verdict stays UNDECIDED.

The rule looks only at planned rounds (the minimum, then doubling up to the cap), and every
interval is at level ``1 - alpha / looks`` (Bonferroni over the planned looks), so the chance
that *any* look's interval misses the true ratio stays within ``alpha``: stopping when decided
cannot manufacture a verdict by looking often.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

FASTER, SLOWER, SAME, UNDECIDED = "FASTER", "SLOWER", "SAME", "UNDECIDED"
VERDICTS = (FASTER, SLOWER, SAME, UNDECIDED)
METHOD = "ABBA/BAAB rounds: Wilcoxon signed-rank interval on log block-median ratios, Bonferroni over looks"


@dataclass(frozen=True)
class ABPlan:
    """How an interleaved A/B runs and when it stops (``run --ab-*`` flags)."""

    band: float = 0.02            # equivalence band: B/A within [1/(1+band), 1+band] is SAME
    block_iters: int = 10         # timed iterations per block, at least
    block_ms: float = 20.0        # and timed iterations until this much time passed
    min_rounds: int = 8           # rounds before the first look (one round = 4 blocks)
    max_rounds: int = 32          # cap: UNDECIDED when still open here
    max_seconds: float = 60.0     # cap on a graph's interleaved timing (0: none)
    alpha: float = 0.05           # family-wise error over the looks
    fresh_every: int = 1          # re-create both sessions every this many rounds (0: keep the first pair)

    def looks(self, min_rounds: int | None = None) -> list[int]:
        """Rounds after which the rule looks: the minimum, doubling, and the cap."""
        first = max(1, min(min_rounds or self.min_rounds, self.max_rounds))
        out, r = [], first
        while r < self.max_rounds:
            out.append(r)
            r *= 2
        return [*out, self.max_rounds]

    def confidence(self, min_rounds: int | None = None) -> float:
        return 1.0 - self.alpha / len(self.looks(min_rounds))


@dataclass
class ABResult:
    """An interleaved A/B's outcome for one graph (one row of the ``ab`` frame)."""

    config_a: str
    config_b: str
    ratio: float
    ci_low: float
    ci_high: float
    verdict: str
    rounds: int
    blocks: int
    block_iters: int
    band: float
    confidence: float
    stop: str
    recreated: int = 0            # times both sessions were closed, prepared and bound again
    method: str = METHOD
    log_ratios: list[float] = field(default_factory=list)


def signed_rank_cdf(n: int) -> np.ndarray:
    """P(T+ <= s), s = 0 .. n(n+1)/2, for Wilcoxon's signed-rank statistic of n values with no
    ties (exact: subsets of the ranks 1..n counted by their sum)."""
    counts = np.zeros(n * (n + 1) // 2 + 1, dtype=np.float64)
    counts[0] = 1.0
    for rank in range(1, n + 1):
        counts[rank:] = counts[rank:] + counts[:-rank].copy()
    return np.cumsum(counts) / 2.0 ** n


def _walsh_bounds(n: int, confidence: float) -> int | None:
    """k (1-based) such that the k-th smallest and k-th largest Walsh averages bound the centre with
    at least ``confidence``; None when n values are too few for any such interval."""
    cdf = signed_rank_cdf(n)
    tail = (1.0 - confidence) / 2.0
    ok = np.nonzero(cdf <= tail)[0]   # P(T+ <= k - 1) <= tail
    return int(ok[-1]) + 1 if len(ok) else None


def round_log_ratio(a_blocks: Sequence[np.ndarray], b_blocks: Sequence[np.ndarray]) -> float:
    """One ABBA round: mean log median of B's blocks minus A's."""
    log_a = [math.log(float(np.median(x))) for x in a_blocks]
    log_b = [math.log(float(np.median(x))) for x in b_blocks]
    return sum(log_b) / len(log_b) - sum(log_a) / len(log_a)


def interval(log_ratios: Sequence[float], confidence: float) -> tuple[float, float, float]:
    """(ratio, low, high) of B/A: the Hodges-Lehmann centre of the rounds' log ratios (the median of
    their Walsh averages) and the exact Wilcoxon signed-rank interval; bounds 0 and inf when there
    are too few rounds for ``confidence`` (4 rounds can never give 95%)."""
    d = np.asarray(log_ratios, dtype=np.float64)
    if not len(d):
        return math.nan, math.nan, math.nan
    i, j = np.triu_indices(len(d))
    walsh = np.sort((d[i] + d[j]) / 2.0)
    centre = math.exp(float(np.median(walsh)))
    k = _walsh_bounds(len(d), confidence)
    if k is None:
        return centre, 0.0, math.inf
    return centre, math.exp(float(walsh[k - 1])), math.exp(float(walsh[len(walsh) - k]))


def verdict(low: float, high: float, band: float) -> str:
    """SAME inside [1/(1+band), 1+band]; SLOWER / FASTER wholly beyond it; else UNDECIDED."""
    top, bottom = 1.0 + band, 1.0 / (1.0 + band)
    if not (math.isfinite(low) and math.isfinite(high)):
        return UNDECIDED
    if low > top:
        return SLOWER
    if high < bottom:
        return FASTER
    if bottom <= low and high <= top:
        return SAME
    return UNDECIDED

"""The verdict rule (docs/compare.md explains the choice).

ratio = median(B) / median(A) of kernel time, so ratio > 1 means B is slower.
With t the threshold, the band of "no practical change" is [1/(1+t), 1+t]:

- SLOWER  when the Holm-adjusted rank-test p < alpha AND the whole CI > 1+t
- FASTER  when the Holm-adjusted rank-test p < alpha AND the whole CI < 1/(1+t)
- SAME    when the whole CI lies inside [1/(1+t), 1+t]
- INCONCLUSIVE otherwise (CI straddles a band edge, or too few samples)

SLOWER therefore claims, at 95% confidence, a change *larger than the threshold*,
not merely a significant one; SAME claims, at 95% confidence, that any change is
smaller than it (an equivalence test). Between the two the data cannot tell.
"""

from __future__ import annotations

import math

FASTER = "FASTER"
SLOWER = "SLOWER"
SAME = "SAME"
INCONCLUSIVE = "INCONCLUSIVE"
VERDICTS = (SLOWER, FASTER, SAME, INCONCLUSIVE)

#: Fewer timed samples than this per side and no verdict is claimed: a bootstrap of
#: a median from a handful of values is too coarse to trust its interval.
MIN_SAMPLES = 5


def band(threshold: float) -> tuple[float, float]:
    """The ratios that count as "no practical change" at this threshold."""
    if not threshold > 0:
        raise ValueError("threshold must be > 0")
    return 1.0 / (1.0 + threshold), 1.0 + threshold


def decide(
    ci_low: float | None,
    ci_high: float | None,
    p_holm: float | None,
    *,
    threshold: float,
    alpha: float,
) -> str:
    """Verdict of one row from its ratio CI and its Holm-adjusted p-value."""
    if ci_low is None or ci_high is None or math.isnan(ci_low) or math.isnan(ci_high):
        return INCONCLUSIVE
    lower, upper = band(threshold)
    significant = p_holm is not None and not math.isnan(p_holm) and p_holm < alpha
    if significant and ci_low > upper:
        return SLOWER
    if significant and ci_high < lower:
        return FASTER
    if ci_low >= lower and ci_high <= upper:
        return SAME
    return INCONCLUSIVE

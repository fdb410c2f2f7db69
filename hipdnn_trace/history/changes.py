"""Step changes in one series of medians (a graph x configuration x GPU over runs), found by a maintained
detector and judged against the runs' own noise.

Detector: PELT (Killick, Fearnhead and Eckley 2012) with the least-absolute-deviation cost (robust to a
night's outlier), from ``ruptures``
(docs/history.md says why not Otava: its wheel pins numpy 2.2 and scipy 1.16). It runs on the log of the
medians divided by the series' noise, so a penalty is in units of that noise: ``PENALTY_LOG_N`` x log(n)
per change point (a BIC-like penalty; calibrated on the synthetic history of docs/history.md).

Noise: the larger of (a) the per-run median confidence intervals the runs recorded (their half-width on
the log scale, over 1.96: a standard error; the median of those over the series) and (b) the night-to-night
scatter (the MAD of successive log differences / sqrt(2) x 1.4826), so neither a run that claims too much
precision nor one noisy night makes a step.

A change point is reported only when its step is sure: the ratio of the medians after and before (each
segment up to the neighbouring change points), with a 95% interval from the segments' scatter (normal
approximation of each segment's mean log), excludes 1 and the step is at least ``MIN_STEP_SIGMAS`` noise
units."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: penalty per change point, in noise units squared times log(n)
PENALTY_LOG_N = 8.0
#: a step smaller than this many noise units is not reported even when the detector puts one there
MIN_STEP_SIGMAS = 3.0
#: fewest runs on each side of a step
MIN_SEGMENT = 3
#: the cost PELT minimises
COST = "l1"
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Step:
    """A step change: ``index`` is the first run after it."""

    index: int
    ratio: float          # median after / median before (>1: slower)
    ratio_low: float      # 95% interval of the ratio
    ratio_high: float
    sigmas: float         # the step in noise units


def series_noise(medians: np.ndarray, ci_low: np.ndarray, ci_high: np.ndarray) -> float:
    """The noise of one run's log median, for this series (see the module's docstring)."""
    logs = np.log(medians)
    half = (np.log(ci_high) - np.log(ci_low)) / 2.0
    claimed = float(np.nanmedian(half)) / Z95 if np.isfinite(half).any() else 0.0
    diffs = np.diff(logs)
    scatter = 1.4826 * float(np.median(np.abs(diffs - np.median(diffs)))) / math.sqrt(2.0) if diffs.size else 0.0
    return max(claimed, scatter, 1e-6)


def _segments(n: int, breaks: list[int]) -> list[tuple[int, int]]:
    edges = [0, *breaks, n]
    return list(zip(edges[:-1], edges[1:]))


def _judge(logs: np.ndarray, before: tuple[int, int], after: tuple[int, int], sigma: float) -> Step | None:
    a, b = logs[before[0]:before[1]], logs[after[0]:after[1]]
    delta = float(np.mean(b) - np.mean(a))
    spread = max(float(np.std(a, ddof=1)) if a.size > 1 else sigma, float(np.std(b, ddof=1)) if b.size > 1 else sigma,
                 sigma)
    se = spread * math.sqrt(1.0 / a.size + 1.0 / b.size)
    low, high = delta - Z95 * se, delta + Z95 * se
    if (low <= 0.0 <= high) or abs(delta) < MIN_STEP_SIGMAS * sigma:
        return None
    return Step(index=after[0], ratio=math.exp(delta), ratio_low=math.exp(low), ratio_high=math.exp(high),
                sigmas=abs(delta) / sigma)


def find_steps(medians: np.ndarray, ci_low: np.ndarray, ci_high: np.ndarray) -> list[Step]:
    """The sure step changes of a series in time order (medians > 0, one per run)."""
    import ruptures

    n = medians.size
    if n < 2 * MIN_SEGMENT:
        return []
    sigma = series_noise(medians, ci_low, ci_high)
    logs = np.log(medians)
    signal = (logs / sigma).reshape(-1, 1)
    breaks = ruptures.Pelt(model=COST, min_size=MIN_SEGMENT, jump=1).fit(signal).predict(
        pen=PENALTY_LOG_N * math.log(n))[:-1]
    segments = _segments(n, breaks)
    steps = [_judge(logs, segments[i], segments[i + 1], sigma) for i in range(len(segments) - 1)]
    return [s for s in steps if s is not None]

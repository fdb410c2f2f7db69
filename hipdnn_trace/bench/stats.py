"""Summary statistics of timing samples, computed with polars.

Percentiles use linear interpolation (numpy's default), so every number in
summary.csv can be checked against ``numpy.percentile`` on iterations.parquet.
The median's 95% confidence interval is distribution-free (order statistics),
which suits skewed, outlier-prone GPU timings better than mean +- sd.
It lives in bench because the measurement loop's stopping rule needs the CI's
width; results builds summary rows from it, an import down the floors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import polars as pl

PERCENTILES = {"p5": 0.05, "p25": 0.25, "p75": 0.75, "p95": 0.95, "p99": 0.99}
Z95 = 1.959963984540054


def timing_stats(samples: pl.Series | Sequence[float]) -> dict[str, float | int | None]:
    """n, mean, std, min, p5..p99, median, max, iqr, cv and the median's 95% CI."""
    s = samples if isinstance(samples, pl.Series) else pl.Series("t", list(samples), dtype=pl.Float64)
    s = s.drop_nulls().cast(pl.Float64)
    n = s.len()
    if n == 0:
        return {"n": 0}
    df = pl.DataFrame({"t": s})
    row = df.select(
        pl.len().alias("n"),
        pl.col("t").mean().alias("mean"),
        pl.col("t").std().alias("std"),
        pl.col("t").min().alias("min"),
        *[pl.col("t").quantile(q, interpolation="linear").alias(k) for k, q in PERCENTILES.items()],
        pl.col("t").median().alias("median"),
        pl.col("t").max().alias("max"),
    ).row(0, named=True)
    row["iqr"] = row["p75"] - row["p25"]
    row["cv"] = (row["std"] / row["mean"]) if row["std"] is not None and row["mean"] else None
    low, high = median_ci(s.to_numpy())
    row["median_ci_low"], row["median_ci_high"] = low, high
    return row


def median_ci(values: np.ndarray, z: float = Z95) -> tuple[float, float]:
    """Order-statistic CI of the median (normal approximation to the binomial)."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    ordered = np.sort(values)
    half = z * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half) - 1)   # 1-based j = floor(n/2 - z*sqrt(n)/2)
    hi = min(n - 1, math.ceil(n / 2 + half))    # 1-based k = ceil(1 + n/2 + z*sqrt(n)/2)
    return float(ordered[lo]), float(ordered[hi])


def relative_ci_width(values: np.ndarray) -> float:
    """Width of the median's CI relative to the median (the --max-rel-ci stopping test)."""
    if len(values) < 5:
        return math.inf
    lo, hi = median_ci(values)
    med = float(np.median(values))
    return (hi - lo) / med if med > 0 else math.inf

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


# ----------------------------------------------------------------- clocks and row warnings

#: NVIDIA nvbench's defaults (docs/cli_help.md ``--throttle-threshold 75``, ``--throttle-recovery-delay
#: 0.05``; nvbench/detail/measure_cold.cu ``record_measurements``): a sample whose SM clock is below 75%
#: of the reference clock is throttled, and the GPU is given 50 ms to recover after it.
THROTTLE_THRESHOLD = 0.75
THROTTLE_RECOVERY_S = 0.05

#: ROCm dnn-benchmarking's row warnings (src/dnn_benchmarking/reporting/statistics.py ``noise_warnings``,
#: execution/suite_runner.py ``_measure_row``): noisy when IQR / median > 5% over >= 10 samples, outlier
#: when the slowest sample is > 2x the median (its upper median ``sorted(x)[n // 2]``), and ``throttled``.
NOISY_IQR = 0.05
NOISY_MIN_N = 10
OUTLIER_RATIO = 2.0
THROTTLED = "throttled"
#: how a frame cell joins a row's warnings (dnn-benchmarking's JSON keeps them as a list)
WARNING_SEPARATOR = "; "


def throttled_flags(sm_mhz: Sequence[float | None], start_ns: Sequence[int], end_ns: Sequence[int],
                    reference_mhz: float | None, threshold: float = THROTTLE_THRESHOLD,
                    recovery_s: float = THROTTLE_RECOVERY_S) -> list[bool | None]:
    """Per sample: whether its SM clock is below ``threshold`` x ``reference_mhz`` (nvbench's rule), or it
    started within ``recovery_s`` after such a sample ended (nvbench pauses that long after a throttled
    trial; a sample taken in that pause here is left out instead). None where the sample has no clock;
    all None without a reference clock or with ``threshold`` 0 (detection off, as nvbench's 0)."""
    n = len(sm_mhz)
    if not reference_mhz or not threshold or not any(v is not None and math.isfinite(v) for v in sm_mhz):
        return [None] * n
    limit = threshold * reference_mhz
    flags: list[bool | None] = [None if v is None or not math.isfinite(v) else bool(v < limit) for v in sm_mhz]
    recovery_ns = int(recovery_s * 1e9)
    last_end: int | None = None
    for k in sorted(range(n), key=start_ns.__getitem__):
        if flags[k]:
            last_end = end_ns[k] if last_end is None else max(last_end, end_ns[k])
        elif last_end is not None and start_ns[k] - last_end <= recovery_ns:
            flags[k] = True
    return flags


def cycles(ms: float | None, mhz: float | None) -> float | None:
    """GPU cycles a time took at a clock: ms x MHz x 1e3 (None without either, or for NaN)."""
    if ms is None or mhz is None or not (math.isfinite(ms) and math.isfinite(mhz)):
        return None
    return ms * mhz * 1e3


def noise_warnings(values: Sequence[float] | np.ndarray) -> list[str]:
    """dnn-benchmarking's dispersion warnings, in its words: ``noisy: IQR 6.2% of median`` (robust spread
    over the threshold with enough samples) and ``outlier: max 2.3x median``. Samples are never trimmed."""
    arr = np.sort(np.asarray(values, dtype=np.float64))
    arr = arr[np.isfinite(arr)]
    if not arr.size:
        return []
    median = float(arr[arr.size // 2])
    out: list[str] = []
    if arr.size >= NOISY_MIN_N and median > 0:
        p25, p75 = np.percentile(arr, [25, 75])
        spread = float(p75 - p25) / median
        if spread > NOISY_IQR:
            out.append(f"noisy: IQR {spread:.1%} of median")
    if median > 0 and float(arr[-1]) > OUTLIER_RATIO * median:
        out.append(f"outlier: max {float(arr[-1]) / median:.1f}x median")
    return out


def row_warnings(values: Sequence[float] | np.ndarray, n_throttled: int) -> list[str]:
    """A row's warnings: the dispersion of the samples its statistic uses, then ``throttled`` when any
    timed sample ran below the clock threshold (dnn-benchmarking's order)."""
    return noise_warnings(values) + ([THROTTLED] if n_throttled else [])

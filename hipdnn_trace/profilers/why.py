"""Why a kernel is slow: one limiter per kernel, and each graph's time by limiter. Vendor-neutral.

``classify(row)`` reads the per-kernel why columns (docs/frames.md ``kernel_metrics``) and
returns ``(limiter, why)``: the limiter's first word is one of

* ``compute <pipe>`` / ``issue`` / ``memory <level>``: the higher of SM and memory throughput
  is at least ``Thresholds.peak_pct`` of peak (Nsight Compute's SOLBottleneck rule: below 60%
  for both "typically indicate[s] latency issues"). SM side: the busiest pipe names it
  (HighPipeUtilization; ``compute sm`` where no pipe was collected), unless instruction issue
  is busier (``issue``). Memory side: the
  level (dram, l2, l1, lds) with the highest throughput.
* ``parallelism``: neither near peak and the grid does not fill the GPU once (waves per SM
  below ``Thresholds.waves``: SOLBottleneck's "grid is too small to fill the available
  resources"; or fewer blocks than SMs: LaunchStats' LaunchConfiguration rule). Where the
  grid is smaller than the SM count, ``est_speedup_pct`` is LaunchConfiguration's model
  (the idle SMs' share, ``100 * (1 - grid / SMs)``) and the sentence says "estimate".
* ``latency``: neither near peak with enough blocks; ``latency <stall>`` names the top
  warp-state reason (WarpStateStats' CPIStall rule).

The thresholds and order are documented in docs/nvidia.md ("Why").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

VOCABULARY = ("parallelism", "compute", "issue", "memory", "latency")
MEMORY_LEVELS = (("dram", "dram_throughput_pct"), ("l2", "l2_throughput_pct"), ("l1", "l1_throughput_pct"),
                 ("lds", "lds_throughput_pct"))


@dataclass(frozen=True)
class Thresholds:
    """Decision thresholds, percent of peak unless said."""

    peak_pct: float = 60.0   # SOLBottleneck: a unit at or above this is the limit
    waves: float = 1.0       # fewer full waves than this: the grid does not fill the GPU


def _f(row: Mapping[str, object], key: str) -> float | None:
    v = row.get(key)
    return None if v is None else float(v)   # type: ignore[arg-type]


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}%"


def _levels(row: Mapping[str, object]) -> list[tuple[str, float]]:
    return [(lvl, v) for lvl, col in MEMORY_LEVELS if (v := _f(row, col)) is not None]


def _near_peak(row: Mapping[str, object], sm: float, mem: float) -> tuple[str, str]:
    levels = ", ".join(f"{lvl.upper()} {v:.1f}%" for lvl, v in _levels(row))
    if mem > sm:
        best = max(_levels(row), key=lambda kv: kv[1], default=("dram", mem))
        return f"memory {best[0]}", (f"memory throughput {mem:.1f}% of peak ({levels}); busiest level "
                                     f"{best[0].upper()}; SM {sm:.1f}%")
    pipe, pipe_pct, issue = row.get("top_pipe"), _f(row, "top_pipe_pct"), _f(row, "issue_active_pct")
    if issue is not None and (pipe_pct is None or issue >= pipe_pct):
        return "issue", f"SM throughput {sm:.1f}% of peak, instruction issue {issue:.1f}% busy (busiest pipe " \
                        f"{pipe or 'n/a'} {_pct(pipe_pct)}); memory {mem:.1f}%"
    name = pipe or "sm"
    return f"compute {name}", f"SM throughput {sm:.1f}% of peak, {name} pipe {_pct(pipe_pct)} busy, issue " \
                              f"{_pct(issue)}; memory {mem:.1f}% ({levels})"


def _grid_text(row: Mapping[str, object]) -> str:
    grid, block, sms, waves = row.get("grid_size"), row.get("block_size"), row.get("sm_count"), _f(row, "waves_per_sm")
    ach, theo = _f(row, "achieved_occupancy_pct"), _f(row, "theoretical_occupancy_pct")
    text = f"grid {grid} blocks of {block} threads on {sms} SMs, {'n/a' if waves is None else f'{waves:.2f}'} waves"
    text += f", achieved occupancy {_pct(ach)} of {_pct(theo)} theoretical"
    if row.get("occupancy_limiter") and theo is not None and theo < 100:
        text += f" (limited by {row['occupancy_limiter']})"
    eligible = _f(row, "eligible_pct")
    if eligible is not None:
        text += f", no eligible warp {100 - eligible:.1f}% of cycles"
    return text


def classify(row: Mapping[str, object], t: Thresholds = Thresholds()) -> tuple[str | None, str]:
    """(limiter, one sentence with the numbers that decided it); see the module docstring."""
    sm, mem = _f(row, "sm_throughput_pct"), _f(row, "memory_throughput_pct")
    if sm is None or mem is None:
        return None, "no limiter: SM / memory throughput not collected (use --profile-set why)"
    if max(sm, mem) >= t.peak_pct:
        return _near_peak(row, sm, mem)
    sol = f"SM {sm:.1f}% and memory {mem:.1f}% of peak (both below {t.peak_pct:g}%)"
    waves, grid, sms = _f(row, "waves_per_sm"), _f(row, "grid_size"), _f(row, "sm_count")
    if (waves is not None and waves < t.waves) or (grid is not None and sms and grid < sms):
        text = f"too little work: {_grid_text(row)}; {sol}"
        gain = est_speedup(row)
        if gain is not None:
            text += f"; estimate: up to {gain:.0f}% less time with every SM busy (ncu LaunchConfiguration model)"
        return "parallelism", text
    stalls = row.get("top_stalls")
    top = str(stalls).split(" ")[0] if stalls else None
    return (f"latency {top}" if top else "latency"), f"{sol} with {_grid_text(row)}; warps stall on " \
                                                     f"{stalls or 'n/a'}"


def est_speedup(row: Mapping[str, object]) -> float | None:
    """LaunchConfiguration's estimate for a grid smaller than the SM count: the idle SMs' share."""
    grid, sms = _f(row, "grid_size"), _f(row, "sm_count")
    if grid is None or not sms or grid >= sms:
        return None
    return 100.0 * (1.0 - grid / sms)


def with_limiters(frame: pl.DataFrame, t: Thresholds = Thresholds()) -> pl.DataFrame:
    """``limiter``, ``why`` and ``est_speedup_pct`` for every row (the rest unchanged)."""
    if frame.is_empty():
        return frame.with_columns(pl.lit(None, dtype=pl.String).alias("limiter"),
                                  pl.lit(None, dtype=pl.String).alias("why"),
                                  pl.lit(None, dtype=pl.Float64).alias("est_speedup_pct"))
    decided = [classify(r, t) for r in frame.iter_rows(named=True)]
    gains = [est_speedup(r) if lim == "parallelism" else None
             for r, (lim, _) in zip(frame.iter_rows(named=True), decided)]
    return frame.with_columns(pl.Series("limiter", [lim for lim, _ in decided], dtype=pl.String),
                              pl.Series("why", [w for _, w in decided], dtype=pl.String),
                              pl.Series("est_speedup_pct", gains, dtype=pl.Float64))

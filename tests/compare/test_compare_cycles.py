"""compare and clocks: throttled samples left out as the summary leaves them, ``--cycles`` (time x SM
clock) for runs taken at different clocks, and each side's row warnings in the outputs. Clock columns
are written into synthetic runs (no GPU here)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from hipdnn_trace.compare import compare_runs, render
from hipdnn_trace.compare.comparison import TimingMismatchError
from hipdnn_trace.errors import UserError
from hipdnn_trace.results.rundir import Run, load_run


def _with_clocks(path: Path, sm_mhz: float, *, policy: str = "off", throttled: set[int] = frozenset(),
                 keep: bool = False, warnings: str | None = None) -> Run:
    """The run at ``path`` as if its timed samples ran at ``sm_mhz`` (those in ``throttled`` flagged)."""
    run = load_run(path)
    timed = pl.col("phase") == "timed"
    iterations = run.iterations.with_columns(
        pl.when(timed).then(pl.lit(sm_mhz)).alias("sm_clock_mhz"),
        pl.when(timed).then(pl.col("iteration").is_in(sorted(throttled))).alias("throttled"),
        pl.when(timed).then(pl.col("kernel_ms") * sm_mhz * 1e3).alias("cycles"))
    meta = {**run.meta, "clocks": {"policy": policy, "state": "locked" if policy != "off" else "off",
                                   "throttle": {"threshold": 0.75, "keep": keep}}}
    summary = run.summary.with_columns(pl.lit(warnings, dtype=pl.String()).alias("warnings"))
    return dataclasses.replace(run, meta=meta, iterations=iterations, summary=summary)


@pytest.fixture
def pair(make_run: Callable[..., Path], timings: Callable[[float, float, int], np.ndarray]) -> tuple[Path, Path]:
    """B takes 20% longer at a 1650 MHz clock than A at 1980 MHz: the same number of cycles."""
    names = [f"g{k}" for k in range(4)]
    a = make_run("a", {n: timings(1.0, 0.01, 40) for n in names})
    b = make_run("b", {n: timings(1.2, 0.01, 40) for n in names})
    return a, b


def test_cycles_compare_runs_at_different_clocks(pair: tuple[Path, Path]) -> None:
    a = _with_clocks(pair[0], 1980.0, policy="lock-max")
    b = _with_clocks(pair[1], 1650.0)
    with pytest.raises(TimingMismatchError):     # times under different clock policies: refused
        compare_runs(a, b, drift="off")
    by_time = compare_runs(a, b, drift="off", allow_clock_mismatch=True)
    assert set(by_time.table["verdict"]) == {"SLOWER"}
    by_cycles = compare_runs(a, b, drift="off", cycles=True)   # a clock-policy difference is what --cycles is for
    assert set(by_cycles.table["verdict"]) == {"SAME"}
    assert by_cycles.geomean == pytest.approx(1.0, abs=0.02)
    assert by_cycles.settings["metric"] == "cycles" and "cycles" in by_cycles.settings["ratio"]
    assert any("compared in GPU cycles" in n for n in by_cycles.notes)
    assert "median A cycles" in render.console(by_cycles)


def test_cycles_without_clock_samples_is_one_line(pair: tuple[Path, Path]) -> None:
    with pytest.raises(UserError, match=r"--cycles: run .* has no SM clock on its timed samples"):
        compare_runs(pair[0], _with_clocks(pair[1], 1650.0), cycles=True)


def _n_b(comparison: Any) -> set[int]:
    return set(comparison.table["n_b"].to_list())


def test_throttled_samples_are_left_out_unless_the_run_kept_them(pair: tuple[Path, Path]) -> None:
    a = _with_clocks(pair[0], 1980.0)
    flagged = set(range(10))
    assert _n_b(compare_runs(a, _with_clocks(pair[1], 1980.0, throttled=flagged), drift="off")) == {30}
    assert _n_b(compare_runs(a, _with_clocks(pair[1], 1980.0, throttled=flagged, keep=True), drift="off")) == {40}
    everything = set(range(40))   # all throttled: all kept, as the summary keeps them
    assert _n_b(compare_runs(a, _with_clocks(pair[1], 1980.0, throttled=everything), drift="off")) == {40}


def test_each_sides_row_warnings_are_shown(pair: tuple[Path, Path]) -> None:
    a = _with_clocks(pair[0], 1980.0, warnings="noisy: IQR 6.2% of median")
    b = _with_clocks(pair[1], 1980.0, warnings="throttled")
    c = compare_runs(a, b, drift="off")
    assert set(c.table["warnings_a"]) == {"noisy: IQR 6.2% of median"} and set(c.table["warnings_b"]) == {"throttled"}
    assert "(A: noisy: IQR 6.2% of median; B: throttled)" in render.console(c)
    assert render.to_dict(c)["rows"][0]["warnings_b"] == "throttled"


def test_report_shows_warnings_and_throttled_counts(pair: tuple[Path, Path]) -> None:
    from hipdnn_trace.compare.report_model import Table, build_report

    a = _with_clocks(pair[0], 1980.0)
    b = _with_clocks(pair[1], 1980.0, warnings="outlier: max 2.5x median; throttled")
    b = dataclasses.replace(b, summary=b.summary.with_columns(pl.lit(3, dtype=pl.Int64()).alias("n_throttled")))
    report = build_report([a, b], compare_runs(a, b, drift="off"))
    tables = {s.id: [blk for blk in s.blocks if isinstance(blk, Table)] for s in report.sections}
    verdicts = tables["verdicts"][0]
    notes = [row[verdicts.columns.index("note")] for row in verdicts.rows]
    assert set(notes) == {"B: outlier: max 2.5x median; throttled"}
    summary_b = tables["summary"][1]
    assert {"throttled", "warnings"} <= set(summary_b.columns)
    assert {row[summary_b.columns.index("throttled")] for row in summary_b.rows} == {"3"}

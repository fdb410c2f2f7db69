"""Clocks on every sample: the clock in force during each sample, nvbench's throttle rule (flagged,
left out of the statistic, counted), the cycles view, and dnn-benchmarking's row warnings.

There is no GPU here: NVML is a stand-in module (``pynvml`` in sys.modules) where a test needs one,
and says so in its name; the reference backend's samples carry no clock at all."""

from __future__ import annotations

import json
import sys
import time
import types
from pathlib import Path
from typing import Any

import graph_dicts as hg
import numpy as np
import polars as pl
import pytest
from scripted_timer import ScriptedTimer

from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.loop import LoopSettings, Samples, run_loop
from hipdnn_trace.bench.records import ConfigRun, GraphRun
from hipdnn_trace.bench.sampling import BackgroundSampler
from hipdnn_trace.bench.stats import cycles, noise_warnings, row_warnings, throttled_flags
from hipdnn_trace.device.clock_lock import reference_clock
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.markers import Markers
from hipdnn_trace.results import schemas
from hipdnn_trace.results.dnnbench import to_dnnbench
from hipdnn_trace.results.rows import iterations_frame, summary_rows

MS = 1_000_000   # ns


# ------------------------------------------------------------------ which reading a sample gets

def _sampler_with(times: list[int], sm: list[float]) -> BackgroundSampler:
    sampler = BackgroundSampler([])
    sampler.times, sampler.readings = times, [{"sm_clock_mhz": v, "mem_clock_mhz": 2 * v} for v in sm]
    return sampler


def test_each_sample_gets_the_lowest_reading_during_it_else_the_latest_before_it() -> None:
    sampler = _sampler_with([0, 10 * MS, 12 * MS, 30 * MS], [1980.0, 1500.0, 1900.0, 1980.0])
    starts = [1 * MS, 9 * MS, 13 * MS, 29 * MS, 31 * MS]
    ends = [2 * MS, 14 * MS, 14 * MS, 31 * MS, 32 * MS]
    cols = sampler.columns(starts, ends)
    # no reading inside: the one before; two inside: the lower; a reading at the end counts as inside
    assert cols["sm_clock_mhz"] == [1980.0, 1500.0, 1900.0, 1980.0, 1980.0]
    assert cols["mem_clock_mhz"] == [3960.0, 3000.0, 3800.0, 3960.0, 3960.0]
    # without ends (the old call): the reading in force at each start
    assert sampler.columns(starts)["sm_clock_mhz"] == [1980.0, 1980.0, 1900.0, 1900.0, 1980.0]


def test_a_sample_before_the_first_reading_gets_the_first_one_after_it() -> None:
    sampler = _sampler_with([5 * MS, 50 * MS], [1200.0, 1980.0])
    assert sampler.columns([1 * MS], [2 * MS])["sm_clock_mhz"] == [1200.0]
    assert BackgroundSampler([]).columns([1], [2]) == {}


# ------------------------------------------------------------------ nvbench's throttle rule

def test_throttled_below_75_percent_of_the_reference_and_within_the_recovery_delay() -> None:
    sm = [1980.0, 1400.0, 1500.0, 1980.0, None, 1980.0]
    starts = [0, 10 * MS, 20 * MS, 40 * MS, 45 * MS, 200 * MS]
    ends = [9 * MS, 19 * MS, 29 * MS, 44 * MS, 49 * MS, 209 * MS]
    # 1400 < 0.75 x 1980 = 1485 < 1500; the next two start within 50 ms of its end (19 ms); the last does not
    assert throttled_flags(sm, starts, ends, 1980.0) == [False, True, True, True, True, False]
    assert throttled_flags(sm, starts, ends, 1980.0, recovery_s=0.0) == [False, True, False, False, None, False]
    assert throttled_flags(sm, starts, ends, 1980.0, threshold=0.8, recovery_s=0.0)[:3] == [False, True, True]


def test_no_reference_clock_or_a_zero_threshold_flags_nothing() -> None:
    sm, starts, ends = [100.0, 2000.0], [0, 1], [1, 2]
    assert throttled_flags(sm, starts, ends, None) == [None, None]
    assert throttled_flags(sm, starts, ends, 1980.0, threshold=0.0) == [None, None]
    assert throttled_flags([None, None], starts, ends, 1980.0) == [None, None]


def test_cycles_are_time_times_clock() -> None:
    assert cycles(2.0, 1500.0) == pytest.approx(3.0e6)     # 2 ms at 1.5 GHz
    assert cycles(None, 1500.0) is None and cycles(1.0, None) is None and cycles(float("nan"), 1.0) is None


def test_reference_clock_is_the_locked_clock_else_the_default_clock() -> None:
    locked = {"policy": "lock-base", "state": "locked", "requested": {"sm_mhz": 1755, "mem_mhz": None}}
    gpu = {"default_sm_clock_mhz": 1590}
    assert reference_clock(locked, gpu) == (1755.0, "locked clock (lock-base)")
    assert reference_clock({"policy": "lock-max", "state": "unlocked (needs root)"}, gpu) == \
        (1590.0, "default applications clock (NVML)")
    assert reference_clock({"policy": "off", "state": "off"}, None) == (None, None)


# ------------------------------------------------------------------ dnn-benchmarking's warnings

def test_noisy_needs_ten_samples_and_an_iqr_over_5_percent_of_the_median() -> None:
    tight = [1.0 + 0.001 * k for k in range(20)]
    assert noise_warnings(tight) == []
    wide = [1.0, 1.2] * 10            # IQR 0.2 over the upper median 1.2
    assert noise_warnings(wide) == ["noisy: IQR 16.7% of median"]
    assert noise_warnings(wide[:9]) == []          # under 10 samples: never noisy


def test_outlier_is_a_max_above_twice_the_median() -> None:
    samples = [1.0] * 19 + [2.5]
    assert noise_warnings(samples) == ["outlier: max 2.5x median"]
    assert noise_warnings([1.0] * 19 + [2.0]) == []   # exactly 2x is not above
    assert noise_warnings([1.0, 1.0, 3.0]) == ["outlier: max 3.0x median"]
    assert noise_warnings([1.0, 3.0]) == []   # upstream's upper median sorted(x)[n // 2] is 3.0 here
    assert noise_warnings([]) == []
    assert row_warnings([1.0] * 19 + [2.5], n_throttled=3) == ["outlier: max 2.5x median", "throttled"]


# ------------------------------------------------------------------ the loop with a stand-in NVML

def _stand_in_pynvml() -> types.ModuleType:
    """NVML whose SM clock a test sets; it counts the SM readings the sampling thread takes."""
    mod = types.ModuleType("pynvml")
    mod.NVML_CLOCK_SM, mod.NVML_CLOCK_MEM, mod.NVML_CLOCK_GRAPHICS = 0, 1, 2
    mod.sm, mod.sm_reads = 1980.0, 0

    def clock(handle: Any, kind: int) -> float:
        if kind == mod.NVML_CLOCK_SM:
            mod.sm_reads += 1
            return mod.sm
        return 3201.0

    mod.nvmlInit = mod.nvmlShutdown = lambda: None
    mod.nvmlDeviceGetHandleByIndex = lambda i: object()
    mod.nvmlDeviceGetClockInfo = clock
    return mod


class _ThrottlingSession:
    """Timed iterations ``first..last-1`` run while the stand-in NVML reports a throttled SM clock. The
    iterations that change the clock wait until the sampling thread has read it twice, so the readings
    fall inside them (the thread reads every 100 ms; every other iteration takes microseconds)."""

    engine = None

    def __init__(self, nvml: types.ModuleType, timer: ScriptedTimer, first: int, last: int) -> None:
        self.nvml, self.timer, self.first, self.last, self.executed = nvml, timer, first, last, 0

    def _clock(self, mhz: float) -> None:
        self.nvml.sm = mhz
        target, deadline = self.nvml.sm_reads + 2, time.monotonic() + 10
        while self.nvml.sm_reads < target and time.monotonic() < deadline:
            time.sleep(0.001)

    def execute(self) -> None:
        if self.executed == self.first:
            self._clock(900.0)
        elif self.executed == self.last:
            self._clock(1980.0)
        self.executed += 1

    def synchronize(self) -> None:
        pass

    def prepare_iteration(self) -> None:
        pass


def _throttled_run(monkeypatch: pytest.MonkeyPatch, keep: bool) -> GraphRun:
    from hipdnn_trace.device.nvml import ClockSampler

    monkeypatch.setitem(sys.modules, "pynvml", _stand_in_pynvml())
    nvml = sys.modules["pynvml"]
    times = [1.0] * 10 + [1.5] * 10 + [1.0] * 10   # 1.5 ms while throttled
    session = _ThrottlingSession(nvml, ScriptedTimer(times), first=10, last=20)
    settings = LoopSettings(warmup=0, iters=30, clock_reference_mhz=1980.0, keep_throttled=keep)
    samples, _ = run_loop(session, settings, Markers(), samplers=[ClockSampler(0)])
    run = ConfigRun(config=Config("cudnn", "cudnn"), samples=samples)
    graph = load_bytes(json.dumps(hg.add_relu()).encode(), "g.json")
    return GraphRun(source="missing/g.json", name="g", graph_id="gid", graph=graph, configs=[run])


def test_mocked_nvml_sampler_throttled_stretch_is_excluded_counted_and_warned(monkeypatch: pytest.MonkeyPatch) -> None:
    g = _throttled_run(monkeypatch, keep=False)
    samples = g.configs[0].samples
    assert samples is not None
    # 10..19 ran at 900 MHz < 0.75 x 1980; 20 started within nvbench's 50 ms recovery delay after 19
    assert samples.extra["throttled"] == [False] * 10 + [True] * 11 + [False] * 9
    assert samples.extra["sm_clock_mhz"][:10] == [1980.0] * 10 and samples.extra["sm_clock_mhz"][15] == 900.0
    assert samples.timing["throttle"] == {"reference_mhz": 1980.0, "threshold": 0.75, "recovery_s": 0.05,
                                          "keep": False}
    row = summary_rows("r", g)[0]
    assert row["n"] == 19 and row["n_throttled"] == 11 and row["median"] == 1.0
    assert row["warnings"] == "throttled"
    frame = iterations_frame("r", g)
    assert frame["throttled"].sum() == 11
    assert frame["cycles"].to_list()[:2] == [pytest.approx(1.0 * 1980.0 * 1e3)] * 2
    summary = schemas.frame(summary_rows("r", g), schemas.SUMMARY)
    doc = to_dnnbench({"clocks": {"throttle": {"keep": False}}}, summary, frame, schemas.empty(schemas.VALIDATION))
    result = doc["graphs"][0]["results"][0]
    assert result["warnings"] == ["throttled"] and result["ootb"]["kernel"]["n"] == 19
    assert result["metrics"]["clocks_after"]["sclk_mhz"] == 1980.0
    assert result["metrics"]["clocks_after"]["mclk_mhz"] == 3201.0


def test_mocked_nvml_sampler_keep_throttled_keeps_them_in_the_statistic(monkeypatch: pytest.MonkeyPatch) -> None:
    g = _throttled_run(monkeypatch, keep=True)
    row = summary_rows("r", g)[0]
    assert row["n"] == 30 and row["n_throttled"] == 11
    assert row["warnings"] == "noisy: IQR 50.0% of median; throttled"   # 11 of 30 samples at 1.5 ms


def test_every_sample_throttled_keeps_them_all_and_warns() -> None:
    samples = Samples(phase=["timed"] * 3, iteration=[0, 1, 2], kernel_ms=[1.0, 1.1, 1.2], host_ms=[1.0] * 3,
                      start_ns=[0, 1, 2], end_ns=[1, 2, 3], extra={"throttled": [True, True, True]})
    assert list(samples.statistic_kernel_ms()) == [1.0, 1.1, 1.2]
    graph = load_bytes(json.dumps(hg.add_relu()).encode(), "g.json")
    row = summary_rows("r", GraphRun(source="s", name="g", graph=graph,
                                     configs=[ConfigRun(Config("c", "cudnn"), samples=samples)]))[0]
    assert row["n"] == 3 and row["n_throttled"] == 3 and row["warnings"] == "throttled"


# ------------------------------------------------------------------ the CPU reference: no clock

def test_reference_backend_samples_have_no_clock_and_nothing_is_flagged(tmp_path: Path) -> None:
    from hipdnn_trace.cli import main
    from hipdnn_trace.results.rundir import load_run

    hg.write(tmp_path / "graphs", [hg.add_relu()])
    code = main(["run", str(tmp_path / "graphs"), "--out", str(tmp_path / "runs"), "--run-id", "r",
                 "-w", "1", "-i", "12", "--format", "parquet,dnnbench", "--quiet"])
    assert code == 0
    run = load_run(tmp_path / "runs" / "r")
    timed = run.iterations.filter(pl.col("phase") == "timed")
    for column in ("sm_clock_mhz", "mem_clock_mhz", "throttled", "cycles"):
        assert timed[column].null_count() == timed.height, column
    row = run.summary.row(0, named=True)
    assert row["n"] == 12 and row["n_throttled"] == 0
    assert "throttled" not in (row["warnings"] or "")
    clocks = run.meta["clocks"]["throttle"]
    assert clocks["reference_mhz"] is None and clocks["threshold"] == 0.75 and clocks["keep"] is False
    expected = noise_warnings(np.asarray(timed["kernel_ms"].to_list()))
    assert (row["warnings"] or "") == "; ".join(expected)

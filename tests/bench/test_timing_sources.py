"""Where kernel_ms comes from: the kernel clock (CUPTI sums), staged spans, unstaged latency.

No GPU here: the timer and the kernel clock are stand-ins with known readings (the names say
so); the GPU path is checked by tests/gpu and benchmarks/timing_fidelity.py on an H100.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hipdnn_trace.bench.loop import SIDE_ITERATIONS, SIDE_MIN, LoopSettings, run_loop, side_iterations
from hipdnn_trace.bench.stages import StageMarkers
from hipdnn_trace.device.kernel_clock import KernelClock, KernelTimes, kernel_times
from hipdnn_trace.markers import Markers


class FakeStagedTimer:
    """Stand-in for cuda.StagedEventTimer: a ring of laps read in batches; a staged lap reads
    ``span`` ms, an unstaged one ``latency`` ms (no GPU here)."""

    kind = "cuda-event-staged"
    capacity = 4

    def __init__(self, span: float = 0.004, latency: float = 0.030) -> None:
        self.staged = True
        self.span, self.latency = span, latency
        self._laps: list[float] = []
        self.reads = 0
        self.stops = 0

    def start(self) -> None:
        pass

    def stop(self) -> None:
        self.stops += 1
        self._laps.append(self.span if self.staged else self.latency)
        assert len(self._laps) <= self.capacity, "the loop must read laps before the ring wraps"

    def elapsed_ms(self) -> float:
        raise AssertionError("batched timers are read with take_laps")

    def take_laps(self) -> list[float]:
        self.reads += 1
        laps, self._laps = self._laps, []
        return laps


class FakeSession:
    engine = None

    def __init__(self, timer: object) -> None:
        self.timer = timer
        self.executed = 0

    def prepare_iteration(self) -> None:
        pass

    def execute(self) -> None:
        self.executed += 1

    def synchronize(self) -> None:
        pass


class FakeKernelClock:
    """Stand-in for device.kernel_clock.KernelClock: each host window gets ``per_window`` ms,
    except windows listed in ``missing`` (no CUPTI here)."""

    source = "cupti-activity"

    def __init__(self, per_window: float = 0.0012, missing: set[int] | None = None) -> None:
        self.per_window = per_window
        self.missing = missing or set()
        self.begun = self.finished = self.aborted = 0

    def begin(self) -> None:
        self.begun += 1

    def finish(self, starts, ends, iterations) -> KernelTimes:
        self.finished += 1
        assert len(starts) == len(ends) == len(iterations)
        sums = [None if k in self.missing else self.per_window for k in range(len(starts))]
        return KernelTimes(sums, [0 if s is None else 1 for s in sums], {"records": len(starts)})

    def abort(self) -> None:
        self.aborted += 1


def _rows(samples, phase):
    return [k for k, p in enumerate(samples.phase) if p == phase]


def test_kernel_clock_gives_kernel_ms_and_side_blocks_give_latency_and_span():
    timer = FakeStagedTimer()
    clock = FakeKernelClock()
    samples, phases = run_loop(FakeSession(timer), LoopSettings(warmup=3, iters=10), Markers(), kernel_clock=clock)
    timed = _rows(samples, "timed")
    assert len(timed) == 10
    assert all(samples.kernel_ms[k] == pytest.approx(0.0012) for k in timed)
    assert timer.stops == 2 * SIDE_MIN   # no event beside the timed executes, only in the side blocks
    latency = _rows(samples, "latency")
    assert len(latency) == SIDE_MIN
    assert all(samples.extra["latency_ms"][k] == pytest.approx(0.030) for k in latency)   # unstaged events
    span = _rows(samples, "span")
    assert len(span) == SIDE_MIN
    assert all(samples.extra["span_ms"][k] == pytest.approx(0.004) for k in span)
    assert all(samples.kernel_ms[k] is None for k in span)
    assert samples.timing["kernel_ms"] == "cupti-activity"
    assert timer.staged is True   # restored
    assert clock.begun == clock.finished == 1
    # what runs after the loop is in phases of its own (the breakdown's t_kernel_clock_ms, t_side_ms)
    names = [p.name for p in phases]
    assert names == ["warmup", "execute", "kernel clock", "side"]
    side = phases[-1]
    assert side.start_ns <= samples.start_ns[latency[0]] and samples.end_ns[span[-1]] <= side.end_ns
    assert phases[2].end_ns <= side.start_ns and phases[1].end_ns <= phases[2].start_ns


def test_a_side_block_runs_a_tenth_of_the_timed_iterations_within_its_bounds():
    assert [side_iterations(n) for n in (1, 10, 50, 51, 100, 150, 200, 1000)] == [SIDE_MIN, SIDE_MIN, SIDE_MIN, 6, 10,
                                                                                   15, SIDE_ITERATIONS, SIDE_ITERATIONS]
    timer = FakeStagedTimer()
    samples, _ = run_loop(FakeSession(timer), LoopSettings(warmup=1, iters=130), Markers(),
                          kernel_clock=FakeKernelClock())
    assert len(_rows(samples, "latency")) == len(_rows(samples, "span")) == 13


def test_a_cpu_loop_has_no_side_phase():
    timer = FakeStagedTimer()
    timer.kind, timer.staged = "host", None   # the CPU backends' timer: the host clock, no hold
    samples, phases = run_loop(FakeSession(timer), LoopSettings(warmup=1, iters=3), Markers())
    assert [p.name for p in phases] == ["warmup", "execute"] and len(samples) == 4


def test_without_a_kernel_clock_the_staged_span_is_kernel_ms_and_a_side_block_measures_latency():
    timer = FakeStagedTimer()
    samples, phases = run_loop(FakeSession(timer), LoopSettings(warmup=2, iters=9), Markers())
    timed = _rows(samples, "timed")
    assert [samples.kernel_ms[k] for k in timed] == [0.004] * 9
    assert [samples.extra["span_ms"][k] for k in timed] == [0.004] * 9
    latency = _rows(samples, "latency")
    assert len(latency) == SIDE_MIN
    assert [p.name for p in phases] == ["warmup", "execute", "side"]
    assert all(samples.extra["latency_ms"][k] == 0.030 for k in latency)
    assert samples.timing == {"kernel_ms": "cuda-event-staged", "span_ms": "cuda-event-staged",
                              "latency_ms": "cuda-event-staged (unstaged)"}
    assert timer.reads >= 9 // timer.capacity   # read in batches, never one query per iteration


def test_iterations_the_kernel_clock_missed_are_retimed_with_staged_events():
    timer = FakeStagedTimer()
    clock = FakeKernelClock(missing={5})
    samples, phases = run_loop(FakeSession(timer), LoopSettings(warmup=2, iters=6), Markers(), kernel_clock=clock)
    timed = _rows(samples, "timed")
    assert len(timed) == 6
    assert [p.name for p in phases] == ["warmup", "execute", "kernel clock", "side"]   # the re-timing is a side cost
    assert [samples.kernel_ms[k] for k in timed] == [0.004] * 6          # staged, not the unstaged 0.030
    assert not any(math.isnan(v) for v in samples.kernel_ms if v is not None)   # the first pass is gone
    assert "no kernel record" in samples.timing["kernel_clock_fallback"]
    assert samples.timing["kernel_ms"] == "cuda-event-staged"


def test_a_failed_measurement_releases_the_kernel_clock_and_restores_staging():
    timer = FakeStagedTimer()
    clock = FakeKernelClock()

    class Failing(FakeSession):
        def execute(self) -> None:
            raise RuntimeError("device lost")

    with pytest.raises(RuntimeError):
        run_loop(Failing(timer), LoopSettings(warmup=1, iters=3), Markers(), kernel_clock=clock)
    assert clock.aborted == 1 and timer.staged is True


def test_kernel_times_sum_per_window_and_skip_the_hold_kernel():
    # CUPTI clock = trace clock - 1000 ns; two windows
    rows = [("k1", 100, 150, 1, 1, 1, 1, 1, 1, 7, 0, 1), ("k2", 160, 200, 1, 1, 1, 1, 1, 1, 7, 0, 2),
            ("hipdnn_trace_hold", 1995, 2000, 1, 1, 1, 1, 1, 1, 7, 0, 3),
            ("k1", 2010, 2070, 1, 1, 1, 1, 1, 1, 7, 0, 4), ("stray", 5000, 5010, 1, 1, 1, 1, 1, 1, 7, 0, 5)]
    times = kernel_times(rows, 1000, starts=[1050, 2900], ends=[1500, 3300], iterations=[0, 1])
    assert times.sums_ms == [pytest.approx(90e-6), pytest.approx(60e-6)]
    assert times.counts == [2, 1]
    assert times.info["outside_windows"] == 1 and times.complete


def test_kernel_clock_is_unavailable_under_an_external_profiler_and_on_host_timers(monkeypatch):
    assert "not a CUDA stream" in KernelClock.unavailable("host")
    monkeypatch.setenv("CUDA_INJECTION64_PATH", "/opt/nsight/libinjection.so")
    assert "external profiler" in KernelClock.unavailable("cuda-event-staged")


def test_isolated_child_reports_phases_not_iterations():
    sent: list[tuple[str, str]] = []
    markers = StageMarkers(Markers(), lambda value: sent.append(("phase", value)))
    markers.push("graph g1 cudnn")
    markers.push("init")
    markers.pop()
    markers.push("warmup")
    markers.pop()
    markers.push("execute")
    before = len(sent)
    for i in range(500):
        markers.push_iteration(i)
        markers.pop_iteration()
    assert len(sent) == before, "a timed iteration must not send a pipe message"
    assert sent[-1] == ("phase", "cudnn: execute")   # a crash now is reported in execute
    markers.pop()
    assert sent[-1] == ("phase", "cudnn: fetch")
    markers.pop()
    assert sent[-1] == ("phase", "validate")


def test_summary_has_span_latency_and_the_kernel_source():
    from hipdnn_trace.bench.config import Config
    from hipdnn_trace.bench.records import ConfigRun, GraphRun
    from hipdnn_trace.results.rows import summary_rows

    timer = FakeStagedTimer()
    samples, _ = run_loop(FakeSession(timer), LoopSettings(warmup=1, iters=5), Markers(),
                          kernel_clock=FakeKernelClock())
    from pathlib import Path

    from hipdnn_trace.graph.load import load_bytes

    path = Path(__file__).resolve().parents[2] / "graphs" / "pointwise" / "relu_clip_fp16.json"
    g = GraphRun(source=str(path), name="g", graph=load_bytes(path.read_bytes(), str(path)))
    g.configs.append(ConfigRun(config=Config(name="cudnn", backend="cudnn"), samples=samples))
    (row,) = summary_rows("r", g)
    assert row["median"] == pytest.approx(0.0012)
    assert row["span_ms"] == pytest.approx(0.004) and row["latency_ms"] == pytest.approx(0.030)
    assert row["kernel_source"] == "cupti-activity"
    assert not math.isnan(np.float64(row["median"]))


def test_timing_kernel_on_the_cpu_reference_is_a_one_line_error(tmp_path, capsys):
    from pathlib import Path

    from hipdnn_trace.cli import main

    graph = Path(__file__).resolve().parents[2] / "graphs" / "pointwise" / "relu_clip_fp16.json"
    assert main(["run", str(graph), "--timing", "kernel", "--out", str(tmp_path), "-q"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--timing kernel: the CPU reference has no GPU kernels" in err[0]
    assert not any(tmp_path.iterdir())   # refused before a run directory exists

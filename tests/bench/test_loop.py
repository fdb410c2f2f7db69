"""The measurement loop: phases and marker order, stopping rules, raw samples kept."""

from __future__ import annotations

import time

import numpy as np
import pytest
from scripted_timer import ScriptedTimer

from hipdnn_trace.bench.loop import LoopSettings, run_loop, stop_reason
from hipdnn_trace.device.timers import HostTimer
from hipdnn_trace.markers import Markers, graph_range_name, iteration_name


class RecordingMarkers(Markers):
    kind = "recording"

    def __init__(self) -> None:
        self.events: list[str] = []

    def push(self, name: str) -> None:
        self.events.append(f"push {name}")

    def pop(self) -> None:
        self.events.append("pop")

    def pause(self) -> None:
        self.events.append("pause")

    def resume(self) -> None:
        self.events.append("resume")


class CountingSession:
    """Executes nothing but counts calls; its 'kernel' takes ``delay`` seconds."""

    engine = None

    def __init__(self, delays: list[float] | None = None, timer: object | None = None) -> None:
        self.timer = timer or HostTimer()
        self.executed = 0
        self.prepared = 0
        self.delays = delays or []

    def execute(self) -> None:
        if self.executed < len(self.delays):
            time.sleep(self.delays[self.executed])
        self.executed += 1

    def synchronize(self) -> None:
        pass

    def prepare_iteration(self) -> None:
        self.prepared += 1


def test_markers_nest_iterations_inside_execute() -> None:
    markers, session = RecordingMarkers(), CountingSession()
    samples, phases = run_loop(session, LoopSettings(warmup=2, iters=3), markers)
    assert markers.events == ["push warmup", "pop", "resume", "push execute",
                              "push iter 0", "pop", "push iter 1", "pop", "push iter 2", "pop", "pop", "pause"]
    assert [p.name for p in phases] == ["warmup", "execute"]
    assert samples.phase == ["warmup"] * 2 + ["timed"] * 3
    assert samples.iteration == [0, 1, 0, 1, 2]
    assert session.executed == 5 and session.prepared == 5
    assert all(h >= k >= 0 for h, k in zip(samples.host_ms, samples.kernel_ms))
    assert phases[0].end_ns <= phases[1].start_ns


def test_no_iteration_ranges_where_no_tool_could_receive_them() -> None:
    markers, session = RecordingMarkers(), CountingSession()
    markers.iteration_ranges = False
    samples, _ = run_loop(session, LoopSettings(warmup=2, iters=3), markers)
    assert markers.events == ["push warmup", "pop", "resume", "push execute", "pop", "pause"]
    assert samples.phase.count("timed") == 3 and session.executed == 5


@pytest.mark.parametrize("variable", ["NVTX_INJECTION64_PATH", "CUDA_INJECTION64_PATH", "NSYS_PROFILING_SESSION_ID"])
def test_nvtx_iteration_ranges_follow_an_attached_tool(monkeypatch, variable: str) -> None:
    from hipdnn_trace import markers as markers_module

    for name in markers_module.NVTX_TOOL_ENV:
        monkeypatch.delenv(name, raising=False)
    assert not markers_module.nvtx_tool_attached()
    assert markers_module.select("none").iteration_ranges is False
    monkeypatch.setenv(variable, "/opt/nsight/libToolsInjection64.so")
    assert markers_module.nvtx_tool_attached()


def test_min_time_extends_the_loop() -> None:
    session = CountingSession(delays=[0.0] + [0.004] * 100)
    samples, _ = run_loop(session, LoopSettings(warmup=1, iters=2, min_time_ms=20), Markers())
    timed = samples.timed_kernel_ms()
    assert len(timed) > 2                         # 2 iterations of >= 4 ms cannot reach 20 ms...
    host = [h for p, h in zip(samples.phase, samples.host_ms) if p == "timed"]
    assert sum(host) >= 20                        # ...so it went on until they did
    assert sum(host[:-1]) < 20                    # and stopped as soon as the rule held


def test_relative_ci_rule_stops_when_narrow_and_respects_the_cap() -> None:
    rng = np.random.default_rng(0)
    noisy = CountingSession(timer=ScriptedTimer(list(np.abs(rng.normal(1.0, 0.8, 400)))))
    settings = LoopSettings(warmup=0, iters=10, max_rel_ci=0.0001, max_iters=40, ci_check_every=10)
    samples, _ = run_loop(noisy, settings, Markers())
    assert len(samples.timed_kernel_ms()) == 40
    assert "cap" in stop_reason(samples, settings)
    steady = CountingSession(timer=ScriptedTimer([2.0] * 1000))
    loose = LoopSettings(warmup=0, iters=10, max_rel_ci=0.99, max_iters=1000)
    samples, _ = run_loop(steady, loose, Markers())
    assert len(samples.timed_kernel_ms()) == 10


def test_marker_names_have_no_ncu_separators() -> None:
    name = graph_range_name("abcdef0123456789", "cudnn:3@/opt/plugins a")
    assert "/" not in name and "@" not in name and " " in name
    assert iteration_name(7) == "iter 7"


def test_samplers_run_on_their_own_thread_and_every_row_gets_the_reading_in_force() -> None:
    import threading

    threads: list[str] = []
    values = iter(range(10_000))

    def sampler() -> dict[str, float | None]:
        threads.append(threading.current_thread().name)
        return {"sm_clock_mhz": float(next(values))}

    session = CountingSession(delays=[0.0] * 5 + [0.03] * 10)
    samples, _ = run_loop(session, LoopSettings(warmup=5, iters=10), Markers(), samplers=[sampler])
    column = samples.extra["sm_clock_mhz"]
    assert len(column) == len(samples) and column[0] == 0.0   # the reading taken before the first row
    assert column == sorted(column) and column[-1] >= 1.0     # ~0.3 s of iterations, readings every 0.1 s
    assert threads[0] == threading.main_thread().name and set(threads[1:]) == {"hipdnn-trace-sampler"}
    for t in threading.enumerate():   # told to stop with the loop; it ends by itself after a reading in flight
        if t.name == "hipdnn-trace-sampler":
            t.join(10)
            assert not t.is_alive()


def test_stopping_does_not_wait_for_a_reading_in_flight() -> None:
    """A slow NVML reading must not hold up the measurement that stops sampling; its late value is dropped."""
    import threading

    from hipdnn_trace.bench.sampling import BackgroundSampler

    entered, release = threading.Event(), threading.Event()
    calls = [0]

    def slow() -> dict[str, float | None]:
        calls[0] += 1
        if calls[0] > 1:
            entered.set()
            release.wait(60)
        return {"sm_clock_mhz": float(calls[0])}

    sampler = BackgroundSampler([slow], interval_s=0.001)
    sampler.start()
    assert entered.wait(10)
    stopper = threading.Thread(target=sampler.stop)
    stopper.start()
    stopper.join(10)
    assert not stopper.is_alive() and not release.is_set()   # stop() returned while the reading was in flight
    kept = sampler.columns([0])
    release.set()
    for t in threading.enumerate():
        if t.name == "hipdnn-trace-sampler":
            t.join(10)
    assert sampler.columns([0]) == kept == {"sm_clock_mhz": [1.0]}   # the late reading was dropped


def test_a_failing_sampler_ends_sampling_not_the_measurement() -> None:
    def broken() -> dict[str, float | None]:
        raise RuntimeError("NVML gone")

    samples, _ = run_loop(CountingSession(), LoopSettings(warmup=1, iters=3), Markers(), samplers=[broken])
    assert samples.phase.count("timed") == 3 and "sm_clock_mhz" not in samples.extra
    assert samples.timing["sampler_error"] == "RuntimeError: NVML gone"


@pytest.mark.parametrize("iters", [1, 7])
def test_raw_samples_are_all_kept(iters: int) -> None:
    samples, _ = run_loop(CountingSession(), LoopSettings(warmup=0, iters=iters), Markers())
    assert len(samples) == iters == len(samples.start_ns) == len(samples.end_ns)


def test_nvtx_markers_open_iteration_ranges_only_under_a_tool(monkeypatch) -> None:
    """A stand-in for the python ``nvtx`` package (not installed on CPU machines) that logs calls."""
    import types

    from hipdnn_trace import markers as markers_module

    log: list[str] = []

    class Domain:
        def get_event_attributes(self, message: str) -> str:
            return message

        def push_range(self, attributes: str) -> None:
            log.append(f"push {attributes}")

        def pop_range(self) -> None:
            log.append("pop")

    monkeypatch.setitem(__import__("sys").modules, "nvtx", types.SimpleNamespace(get_domain=lambda name: Domain()))
    for name in markers_module.NVTX_TOOL_ENV:
        monkeypatch.delenv(name, raising=False)
    run_loop(CountingSession(), LoopSettings(warmup=0, iters=2), markers_module.NvtxMarkers())
    assert log == ["push warmup", "pop", "push execute", "pop"]
    log.clear()
    monkeypatch.setenv("NVTX_INJECTION64_PATH", "/opt/nsight/libToolsInjection64.so")
    run_loop(CountingSession(), LoopSettings(warmup=0, iters=2), markers_module.NvtxMarkers())
    assert log == ["push warmup", "pop", "push execute", "push iter 0", "pop", "push iter 1", "pop", "pop"]

"""CUPTI record placement and NVML clock sampling, without a GPU.

The CUPTI activity API and NVML cannot exist here: the record-to-frame logic is tested on
synthetic records, and the sampler on a stand-in ``pynvml`` module (test names say so).
"""

from __future__ import annotations

import pickle
import sys
import types

import numpy as np
import polars as pl
import pytest

from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.loop import Samples
from hipdnn_trace.bench.records import ConfigRun
from hipdnn_trace.profilers.cupti import CuptiProfiler, assign_iterations, clock_offset, kernel_sums_ms
from hipdnn_trace.results import schemas


def test_kernels_are_placed_in_the_iteration_window_that_contains_their_start() -> None:
    starts = np.array([5, 15, 16, 29, 31, 45, 100])
    got = assign_iterations(starts, iter_start=[10, 20, 40], iter_end=[18, 30, 50], iterations=[0, 1, 2])
    assert got.tolist() == [-1, 0, 0, 1, -1, 2, -1]


def test_clock_offset_uses_the_narrowest_bracket() -> None:
    host = iter([100, 180, 1000, 1004, 2000, 2100])
    device = iter([50, 960, 1900])
    offset, width = clock_offset(lambda: next(host), lambda: next(device), samples=3)
    assert (offset, width) == (1002 - 960, 4)


def _records():
    # name, start, end, grid xyz, block xyz, stream, device, correlation (CUPTI clock)
    return [("warm", 0, 5, 1, 1, 1, 32, 1, 1, 7, 0, 1),
            ("a", 110, 120, 8, 1, 1, 128, 1, 1, 7, 0, 2), ("b", 121, 125, 4, 1, 1, 64, 1, 1, 7, 0, 3),
            ("a", 210, 222, 8, 1, 1, 128, 1, 1, 7, 0, 4), ("b", 223, 226, 4, 1, 1, 64, 1, 1, 7, 0, 5)]


def test_kernels_frame_keeps_the_timed_region_on_the_trace_clock() -> None:
    hold = [("hipdnn_trace_hold", 105, 109, 1, 1, 1, 1, 1, 1, 7, 0, 9)]   # staged timing's own kernel
    frame = CuptiProfiler.kernels_frame(_records() + hold, 1000, [1100, 1200], [1150, 1250], [0, 1],
                                        run_id="r", graph="g", graph_id="id", config="cudnn")
    assert frame.columns[:len(schemas.KERNELS)] == list(schemas.KERNELS)
    assert frame["name"].to_list() == ["a", "b", "a", "b"]
    assert frame["start_ns"].to_list() == [1110, 1121, 1210, 1223]
    assert frame["iteration"].to_list() == [0, 0, 1, 1]
    assert frame["duration_ns"].to_list() == [10, 4, 12, 3]
    assert set(frame["source"].to_list()) == {"cupti"}
    assert kernel_sums_ms(frame, [0, 1]) == [pytest.approx(14e-6), pytest.approx(15e-6)]


def test_kernel_sums_land_beside_event_times_with_stand_in_cupti_records() -> None:
    profiler = CuptiProfiler()
    profiler.run_id = "r"
    run = ConfigRun(config=Config("cudnn", "cudnn"))
    samples = Samples(phase=["warmup", "timed", "timed"], iteration=[0, 0, 1], kernel_ms=[1.0, 1.0, 1.0],
                      host_ms=[1.0] * 3, start_ns=[1000, 1100, 1200], end_ns=[1050, 1150, 1250])
    info = {"graph": "g", "graph_id": "id"}
    profiler._pending.append((run, _records(), 1000, info))
    profiler._complete_ready()
    assert profiler._pending          # samples not there yet: wait (graph_run sets them after the hooks)
    run.samples = samples

    class _G:
        name, graph_id, configs = "file_stem", "id", [run]

    profiler.finish_graph(_G())
    assert not profiler._pending
    assert samples.extra["kernel_sum_ms"] == [None, pytest.approx(14e-6), pytest.approx(15e-6)]
    assert run.kernels["graph"].unique().to_list() == ["file_stem"]
    assert run.info["cupti"]["kernels_per_iteration"] == [2]
    assert run.info["cupti"]["kernels_outside_iterations"] == 0


def _stand_in_pynvml(clocks):
    mod = types.ModuleType("pynvml")
    mod.NVML_CLOCK_SM, mod.NVML_CLOCK_MEM = 0, 1
    mod.reads = 0

    def clock(handle, kind):
        mod.reads += 1
        return clocks[kind]

    mod.nvmlInit = lambda: None
    mod.nvmlShutdown = lambda: None
    mod.nvmlDeviceGetHandleByIndex = lambda i: object()
    mod.nvmlDeviceGetClockInfo = clock
    return mod


def test_clock_sampler_reads_both_clocks_every_call_with_stand_in_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    from hipdnn_trace.device import nvml

    mod = _stand_in_pynvml({0: 1980, 1: 3201})
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    sampler = nvml.ClockSampler(0)
    assert sampler() == sampler() == {"sm_clock_mhz": 1980.0, "mem_clock_mhz": 3201.0}
    assert sampler.reads == 2 and mod.reads == 4   # the cadence is the sampling thread's (bench/sampling.py)


def test_clock_sampler_pickles_without_its_nvml_handle_with_stand_in_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    from hipdnn_trace.device import nvml

    monkeypatch.setitem(sys.modules, "pynvml", _stand_in_pynvml({0: 1500, 1: 3201}))
    sampler = nvml.ClockSampler(0)
    sampler()
    clone = pickle.loads(pickle.dumps(sampler))
    assert clone._handle is None and clone()["sm_clock_mhz"] == 1500.0


def test_clock_flags_mark_slow_iterations_without_dropping_them() -> None:
    from hipdnn_trace.bench.records import GraphRun
    from hipdnn_trace.results.rows import iterations_frame

    run = ConfigRun(config=Config("cudnn", "cudnn"))
    run.samples = Samples(phase=["timed"] * 3, iteration=[0, 1, 2], kernel_ms=[1.0] * 3, host_ms=[1.0] * 3,
                          start_ns=[0, 1, 2], end_ns=[1, 2, 3],
                          extra={"sm_clock_mhz": [1980.0, 1700.0, 1980.0]})
    g = GraphRun(source="s", name="g", configs=[run])
    frame = iterations_frame("r", g)
    assert frame["clock_flag"].to_list() == [False, True, False] and frame.height == 3
    assert isinstance(frame, pl.DataFrame)

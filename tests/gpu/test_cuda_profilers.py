"""GPU proof for the NVIDIA profilers (issue 6): CUPTI sees exactly the launches the backend
makes, its kernel sums agree with event time, ``--profile cupti`` and ``--profile ncu``
produce kernels/counters frames, verdicts and one trace whose kernel slices sit inside the
timed window, and ncu's counter FLOPs match the analytical FLOPs of a tensor-core conv.
Skipped without an NVIDIA GPU (and the ncu tests without ncu)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from hipdnn_trace import backends
from hipdnn_trace.backends.base import RunOptions
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings, run_graph
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.cli import main as cli
from hipdnn_trace.device import cuda
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.sources import expand
from hipdnn_trace.markers import Markers
from hipdnn_trace.trace import read_trace

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"
PERF_CONV = "perf/conv/resnet50_res4_3x3_256_fwd_fp16.json"


def _path(relative: str) -> Path:
    path = GRAPHS / relative
    if not path.exists():
        pytest.skip(f"{relative} not present")
    return path


@pytest.fixture
def profiler():
    """A CUPTI profiler switched off afterwards: CUPTI tracing left on would stall staged timing."""
    from hipdnn_trace.profilers.cupti import CuptiProfiler

    p = CuptiProfiler()
    yield p
    p.close()


def _launches(relative: str) -> int:
    """Kernel launches one cuDNN execute makes, counted in a CUDA graph capture of it."""
    graph = load_bytes(_path(relative).read_bytes(), relative)
    session = backends.get("cudnn").prepare(graph, None, RunOptions())
    try:
        session.bind(make_inputs(graph, 0))
        captured = cuda.CudaGraph(session.stream.handle, session._enqueue)
        try:
            return captured.kernel_nodes()
        finally:
            captured.close()
    finally:
        session.close()


@pytest.mark.parametrize("relative", ["conv/conv_fwd_nhwc_stride2_fp16.json",
                                      "norm/batchnorm_training_nhwc_fp16.json",
                                      "fused/matmul_bias_gelu_fp16.json"])
def test_cupti_kernels_per_iteration_equal_the_backend_launches(relative: str, profiler) -> None:
    expected = _launches(relative)
    settings = RunSettings(loop=LoopSettings(warmup=2, iters=10), hooks=[profiler])
    run = run_graph(expand([str(_path(relative))])[0], [Config("cudnn", "cudnn")], settings, Markers())
    profiler.finish_graph(run)
    kernels = run.configs[0].kernels
    per_iteration = kernels.group_by("iteration").len().sort("iteration")
    assert per_iteration.height == 10
    assert set(per_iteration["len"].to_list()) == {expected}, (expected, per_iteration)
    assert kernels["iteration"].null_count() == 0


def test_cupti_kernel_sum_agrees_with_staged_event_time(profiler) -> None:
    """Staged timing (no CUPTI: CUPTI's tracing waits on a held stream) vs CUPTI's kernel sums,
    both medians over 100 iterations of the same graph and plan."""
    source = expand([str(_path(PERF_CONV))])[0]
    loop = LoopSettings(warmup=10, iters=100)
    staged = run_graph(source, [Config("cudnn", "cudnn")],
                       RunSettings(loop=loop, options=RunOptions(timing="staged"), validate="none"), Markers())
    traced = run_graph(source, [Config("cudnn", "cudnn")],
                       RunSettings(loop=loop, hooks=[profiler], validate="none"), Markers())
    profiler.finish_graph(traced)
    assert staged.configs[0].info["timer"] == "cuda-event-staged"
    assert staged.configs[0].engine == traced.configs[0].engine
    events = np.median(staged.configs[0].samples.timed_kernel_ms())
    s = traced.configs[0].samples
    sums = np.median([s.extra["kernel_sum_ms"][k] for k, p in enumerate(s.phase) if p == "timed"])
    print(f"\nstaged event median {events * 1e3:.2f} us, CUPTI kernel-sum median {sums * 1e3:.2f} us")
    assert sums >= 0.010, "the fidelity goal for this test is stated for kernels >= 10 us"
    # Measured on an H200 (docs/benchmarks.md): staged event intervals carry a fixed
    # +2.2..2.6 us over CUPTI's kernel durations (event-to-kernel front-end latency), so
    # the 1% goal holds only for kernels above ~250 us; this checks that the gap
    # is that fixed offset and nothing more (no launch gaps, no host time).
    assert abs(events - sums) <= 0.01 * sums + 0.003, (events, sums)


def test_cupti_with_staged_timing_falls_back_to_events_and_says_why(profiler) -> None:
    run = run_graph(expand([str(_path("conv/conv_fwd_nhwc_stride2_fp16.json"))])[0], [Config("cudnn", "cudnn")],
                    RunSettings(loop=LoopSettings(warmup=2, iters=5), hooks=[profiler],
                                options=RunOptions(timing="staged")), Markers())
    profiler.finish_graph(run)
    info = run.configs[0].info
    print(f"\n{info.get('timer')}: {info.get('timing_fallback')}")
    assert run.configs[0].status == "ok"
    assert info["timer"] == "cuda-event-staged" or "staged timing switched off" in info["timing_fallback"]


def _execute_windows(slices: pl.DataFrame) -> list[tuple[int, int]]:
    ex = slices.filter(pl.col("name") == "execute")
    return list(zip(ex["ts_ns"].to_list(), (ex["ts_ns"] + ex["dur_ns"]).to_list()))


def test_profile_cupti_writes_kernels_iterations_and_one_trace(tmp_path: Path) -> None:
    rc = cli(["run", str(_path(PERF_CONV)), "--backend", "cudnn", "--profile", "cupti", "-w", "3", "-i", "20",
              "--validate", "none", "--out", str(tmp_path), "--run-id", "c", "--quiet"])
    folder = tmp_path / "c"
    assert rc == 0
    kernels = pl.read_parquet(folder / "kernels.parquet")
    iterations = pl.read_parquet(folder / "iterations.parquet").filter(pl.col("phase") == "timed")
    assert kernels.height >= 20 and set(kernels["source"].to_list()) == {"cupti"}
    assert iterations["kernel_sum_ms"].null_count() == 0
    trace = read_trace(folder / "trace.pftrace")
    names = set(kernels["name"].to_list())
    gpu = trace.slices.filter(pl.col("name").is_in(list(names)))
    assert gpu.height == kernels.height
    windows = _execute_windows(trace.slices)
    inside = [any(lo <= t and t + d <= hi for lo, hi in windows)
              for t, d in zip(gpu["ts_ns"].to_list(), gpu["dur_ns"].to_list())]
    assert all(inside), f"{inside.count(False)} kernel slices outside the execute window"
    assert trace.flows.height >= 20
    meta = json.loads((folder / "run.json").read_text())
    assert meta["timing"]["profiler"] == "cupti"


@pytest.mark.skipif(shutil.which("ncu") is None, reason="needs Nsight Compute (ncu)")
def test_profile_ncu_counter_flops_match_a_tensor_core_conv(tmp_path: Path) -> None:
    rc = cli(["run", str(_path(PERF_CONV)), "--backend", "cudnn", "--profile", "ncu", "--profile-set", "roofline",
              "-w", "3", "-i", "10", "--validate", "none", "--out", str(tmp_path), "--run-id", "n", "--quiet"])
    folder = tmp_path / "n"
    assert rc == 0
    counters = pl.read_parquet(folder / "counters.parquet")
    assert counters.height and set(counters["source"].to_list()) == {"ncu"}
    metrics = pl.read_csv(folder / "metrics.csv")
    ratio = metrics["flops_ratio"][0]
    print(f"\ncounter FLOPs / analytical FLOPs = {ratio:.4f}; verdict {metrics['verdict'][0]}")
    assert 0.95 <= ratio <= 1.05
    summary = pl.read_csv(folder / "summary.csv")
    assert summary["bottleneck"].drop_nulls().len() == summary.height
    meta = json.loads((folder / "run.json").read_text())
    assert meta["timing"]["clock_control"] == "none"
    trace = read_trace(folder / "trace.pftrace")
    assert trace.counters.height > 0
    windows = _execute_windows(trace.slices)
    kernels = pl.read_parquet(folder / "kernels.parquet")
    gpu = trace.slices.filter(pl.col("name").is_in(kernels["name"].unique().to_list()))
    assert gpu.height and all(any(lo <= t <= hi for lo, hi in windows) for t in gpu["ts_ns"].to_list())

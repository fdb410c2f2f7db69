"""Kernels land in the iterations whose marker ranges launched them.

The capture in tests/data/rocprof/v7_harness is a harness run as rocprofv3 7.x writes
it: graph 3f9a2c / config "conv fwd fp16" with init, warmup (iter 0) and execute
(iters 0..2). Dispatch 8 is launched inside iter 2 (correlation id 16, between iter 2's
push, id 14, and the next marker, id 17) but starts on the GPU at 50.5 us, after iter 2
closed (50 us): the case that separates the three join methods.
"""

from __future__ import annotations

import polars as pl
import pytest

from hipdnn_trace.profilers.rocprof import rocprofv3_csv as v3
from hipdnn_trace.profilers.rocprof.markers_join import HarnessMarker, join_iterations, parse_marker


@pytest.fixture
def capture(data):
    d = data / "v7_harness"
    return (v3.read_kernel_trace(d / "hipdnn_trace_kernel_trace.csv"),
            v3.read_marker_trace(d / "hipdnn_trace_marker_api_trace.csv"),
            v3.read_api_trace(d / "hipdnn_trace_hip_api_trace.csv"))


def labels(frame: pl.DataFrame) -> dict[int, tuple]:
    return {r["dispatch_id"]: (r["graph_id"], r["config"], r["phase"], r["iteration"], r["join"])
            for r in frame.iter_rows(named=True)}


G = ("3f9a2c", "conv fwd fp16")


def test_correlation_join_without_api_trace(capture):
    kernels, markers, _ = capture
    got = labels(join_iterations(kernels, markers))
    assert got[1] == (*G, "init", None, "correlation")
    assert got[2] == (*G, "warmup", 0, "correlation")
    assert got[3] == got[4] == (*G, "timed", 0, "correlation")
    assert got[5] == got[6] == (*G, "timed", 1, "correlation")
    assert got[7] == (*G, "timed", 2, "correlation")
    # started after iter 2 closed: provably inside execute, not provably inside iter 2
    assert got[8] == (*G, "timed", None, "correlation")
    # launched after execute, inside the graph range
    assert got[9] == (*G, None, None, "correlation")
    # another thread without markers: only its GPU start time can place it
    assert got[10] == (*G, "timed", 1, "time")


def test_api_trace_gives_the_exact_launch(capture):
    kernels, markers, api = capture
    got = labels(join_iterations(kernels, markers, api))
    assert got[7] == (*G, "timed", 2, "api")
    assert got[8] == (*G, "timed", 2, "api")  # hipLaunchKernel at 48 us, inside iter 2
    assert got[3] == (*G, "timed", 0, "correlation")  # no API row for it


def test_time_join_when_kernels_have_no_thread_or_correlation(capture):
    kernels, markers, _ = capture
    bare = kernels.with_columns(pl.lit(None, dtype=pl.Int64).alias("thread_id"),
                                pl.lit(None, dtype=pl.Int64).alias("correlation_id"))
    got = labels(join_iterations(bare, markers))
    assert got[3] == (*G, "timed", 0, "time")
    assert got[8] == (*G, "timed", None, "time")  # GPU start outside every iter range


def test_rocm_6_2_0_capture_joins_by_time(data):
    kernels = v3.read_kernel_trace(data / "v62" / "kernel_trace.csv")
    markers = v3.read_marker_trace(data / "v62" / "marker_api_trace.csv")
    got = join_iterations(kernels, markers)
    assert got.select("phase", "iteration", "join").rows() == [("timed", 0, "time"), ("timed", None, "time")]


def test_kernels_outside_every_range_stay_null(capture):
    kernels, markers, _ = capture
    early = kernels.with_columns(pl.lit(1, dtype=pl.Int64).alias("correlation_id"), pl.lit(10).alias("start_ns"))
    got = join_iterations(early.head(1), markers)
    assert got.select("graph_id", "phase", "iteration", "join").rows() == [(None, None, None, None)]


def test_no_harness_markers_leaves_frame_unlabelled(capture):
    kernels, markers, _ = capture
    other = markers.with_columns(pl.lit("user range").alias("name"))
    got = join_iterations(kernels, other)
    assert got["iteration"].is_null().all() and got["join"].is_null().all()


def test_counters_join_like_their_dispatches(data, capture):
    _, markers, _ = capture
    counters = v3.read_counter_collection(data / "v7_harness" / "hipdnn_trace_counter_collection.csv")
    got = join_iterations(counters, markers)
    assert sorted(set(got.select("dispatch_id", "iteration").rows())) == [(3, 0), (4, 0), (5, 1)]


@pytest.mark.parametrize("name, parsed", [
    ("hipdnn_trace:graph abc123 cudnn_engine_0", HarnessMarker("graph", graph_id="abc123", config="cudnn_engine_0")),
    ("hipdnn_trace:graph abc123 conv fwd fp16", HarnessMarker("graph", graph_id="abc123", config="conv fwd fp16")),
    ("hipdnn_trace:graph abc123", HarnessMarker("graph", graph_id="abc123", config=None)),
    ("hipdnn_trace:execute", HarnessMarker("phase", phase="timed")),
    ("hipdnn_trace:warmup", HarnessMarker("phase", phase="warmup")),
    ("hipdnn_trace:init", HarnessMarker("phase", phase="init")),
    ("hipdnn_trace:iter 17", HarnessMarker("iter", iteration=17)),
    ("hipdnn_trace:iter x", None),
    ("hipdnn_trace:graph", None),
    ("iter 3", None),
    ("hipdnn_trace:execute now", None),
    (None, None),
])
def test_marker_name_contract(name, parsed):
    assert parse_marker(name) == parsed


def test_ranges_that_do_not_nest_are_ignored_not_misattributed():
    markers = pl.DataFrame({
        "name": ["hipdnn_trace:graph g c", "hipdnn_trace:execute", "hipdnn_trace:iter 0"],
        "process_id": [1, 1, 1], "thread_id": [1, 1, 1], "correlation_id": [1, 2, 3],
        "start_ns": [0, 100, 150], "end_ns": [1000, 200, 300],  # iter 0 overlaps past execute's end
    })
    kernels = pl.DataFrame({"start_ns": [160], "correlation_id": [None], "thread_id": [None]},
                           schema={"start_ns": pl.Int64, "correlation_id": pl.Int64, "thread_id": pl.Int64})
    got = join_iterations(kernels, markers)
    assert got.select("phase", "iteration").rows() == [("timed", None)]


def test_many_iterations_join_quickly():
    n = 5000
    names = ["hipdnn_trace:graph g c", "hipdnn_trace:execute"] + [f"hipdnn_trace:iter {i}" for i in range(n)]
    starts = [0, 10] + [100 + 1000 * i for i in range(n)]
    ends = [10**9, 10**9 - 10] + [100 + 1000 * i + 900 for i in range(n)]
    markers = pl.DataFrame({"name": names, "process_id": [1] * (n + 2), "thread_id": [1] * (n + 2),
                            "correlation_id": list(range(1, n + 3)), "start_ns": starts, "end_ns": ends})
    kernels = pl.DataFrame({"start_ns": [150 + 1000 * i for i in range(n)], "correlation_id": list(range(3, n + 3)),
                            "thread_id": [1] * n}).with_columns(pl.col("correlation_id") + 0)
    kernels = kernels.with_columns((pl.col("correlation_id") * 10).alias("correlation_id"))
    markers = markers.with_columns((pl.col("correlation_id") * 10 - 5).alias("correlation_id"))
    got = join_iterations(kernels, markers)
    assert got["iteration"].to_list() == list(range(n))

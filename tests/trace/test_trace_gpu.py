"""Profiler frames (KERNELS, COUNTERS) -> GPU tracks, flows to host iterations, counter tracks."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from hipdnn_trace.errors import UserError
from hipdnn_trace.results.schemas import COUNTERS, KERNELS, frame
from hipdnn_trace.results.timeline import add_counters, add_kernels
from hipdnn_trace.trace import TraceWriter, read_trace

T0 = 10_000


def _kernels() -> pl.DataFrame:
    rows = []
    for i in range(3):  # iteration i: gemm then relu on device 1, stream 5
        s = T0 + 1000 * i
        rows.append(dict(run_id="r", graph="g", config="c", iteration=i, name="gemm", start_ns=s + 100,
                         end_ns=s + 400, duration_ns=300, grid_x=64, grid_y=2, block_x=256, stream=5, device=1,
                         correlation_id=10 * i, source="rocprofv3"))
        rows.append(dict(run_id="r", graph="g", config="c", iteration=i, name="relu", start_ns=s + 400,
                         end_ns=s + 450, duration_ns=50, grid_x=8, block_x=64, stream=5, device=1,
                         correlation_id=10 * i + 1, source="rocprofv3"))
    # a copy kernel on another stream, outside any iteration; one ncu row without times
    rows.append(dict(name="memcpy", start_ns=T0 + 50, end_ns=T0 + 90, stream=9, device=1, correlation_id=99,
                     source="rocprofv3", run_id="r", graph="g", config="c"))
    rows.append(dict(name="replayed", stream=5, device=1, correlation_id=7, source="ncu"))
    return frame(rows, KERNELS)


def _write(path: Path, kernels: pl.DataFrame, counters: pl.DataFrame | None = None) -> tuple[int, int]:
    with TraceWriter(path) as w:
        host = w.thread_track("harness", w.process_track("hipdnn-trace", pid=1), tid=1)
        flows = {}
        for i in range(3):
            flows[i] = w.new_flow_id()
            w.slice(host, f"iter {i}", T0 + 1000 * i, T0 + 1000 * i + 500, flow_ids=[flows[i]])
        n_k = add_kernels(w, kernels, flows_from=flows)
        n_c = add_counters(w, counters, kernels) if counters is not None else 0
    return n_k, n_c


def test_kernels_go_on_stream_tracks_with_args_and_flows(check_trace, tmp_path: Path) -> None:
    path = tmp_path / "t.pftrace"
    written, _ = _write(path, _kernels())
    assert written == 7  # the ncu row without start/end is skipped
    check_trace(path)
    t = read_trace(path)
    gpu = t.slices.filter(pl.col("parent_name") == "GPU 1")
    assert sorted(gpu["track_name"].unique().to_list()) == ["stream 5", "stream 9"]
    s5 = gpu.filter(pl.col("track_name") == "stream 5")
    assert s5["name"].to_list() == ["gemm", "relu"] * 3
    assert s5["dur_ns"].to_list() == [300, 50] * 3 and s5["depth"].unique().to_list() == [0]
    args = json.loads(s5["args"][0])
    assert args == {"grid": "64x2x1", "block": "256x1x1", "correlation_id": 0, "iteration": 0,
                    "source": "rocprofv3"}
    assert "iteration" not in json.loads(gpu.filter(pl.col("name") == "memcpy")["args"][0])
    # iter i -> gemm -> relu; the memcpy (no iteration) carries no flow
    names = dict(zip(t.slices["slice_id"].to_list(), t.slices["name"].to_list()))
    arrows = sorted((names[a], names[b]) for a, b in zip(t.flows["slice_out"], t.flows["slice_in"]))
    assert arrows == [("gemm", "relu")] * 3 + [("iter 0", "gemm"), ("iter 1", "gemm"), ("iter 2", "gemm")]
    tracks = t.tracks.filter(pl.col("name") == "GPU 1")
    assert tracks.height == 1  # one group for both streams


def test_overlapping_kernels_of_a_stream_go_to_a_sibling_track(check_trace, tmp_path: Path) -> None:
    k = frame([dict(name="a", start_ns=100, end_ns=200, stream=0, device=0),
               dict(name="b", start_ns=150, end_ns=250, stream=0, device=0),  # starts before a ends
               dict(name="c", start_ns=250, end_ns=300, stream=0, device=0)], KERNELS)
    path = tmp_path / "t.pftrace"
    with TraceWriter(path) as w:
        assert add_kernels(w, k) == 3
    check_trace(path)
    s = read_trace(path).slices
    lanes = dict(zip(s["name"], s["track_name"]))
    assert lanes == {"a": "stream 0", "b": "stream 0 (overlap 1)", "c": "stream 0"}
    # no kernel was moved or cut
    assert s.sort("name")["dur_ns"].to_list() == [100, 100, 50]


def test_counters_join_kernels_and_step_to_zero_between_them(check_trace, tmp_path: Path) -> None:
    kernels = _kernels()
    counters = frame(
        [dict(run_id="r", graph="g", config="c", correlation_id=10 * i, kernel="gemm", counter="VALUBusy",
              value=50.0 + i, unit="percent", source="rocprofv3") for i in range(3)]
        + [dict(run_id="r", graph="g", config="c", correlation_id=10 * i + 1, kernel="relu",
                counter="VALUBusy", value=5.0, unit="percent", source="rocprofv3") for i in range(3)]
        + [dict(correlation_id=7, counter="VALUBusy", value=1.0, source="ncu"),  # kernel has no times
           dict(run_id="r", graph="g", config="c", correlation_id=0, counter="VALUBusy", value=9.0,
                source="cupti")],  # other tool: same id, different kernel
        COUNTERS,
    )
    path = tmp_path / "t.pftrace"
    _, placed = _write(path, kernels, counters)
    assert placed == 6
    check_trace(path)
    t = read_trace(path)
    track = t.tracks.filter(pl.col("kind") == "counter").row(0, named=True)
    assert track["name"] == "VALUBusy" and track["unit"] == "percent" and track["parent_name"] == "GPU 1"
    points = t.counters.select("ts_ns", "value").rows()
    # gemm value from its start; relu starts when gemm ends (no reset); 0 after relu
    assert points[:3] == [(T0 + 100, 50.0), (T0 + 400, 5.0), (T0 + 450, 0.0)]
    assert len(points) == 9


def test_null_run_keys_still_join(tmp_path: Path) -> None:
    """Frames parsed by ``ingest`` have null run keys on both sides."""
    k = frame([dict(name="k", start_ns=10, end_ns=20, correlation_id=1, source="cupti")], KERNELS)
    c = frame([dict(correlation_id=1, counter="x", value=3.0, source="cupti")], COUNTERS)
    with TraceWriter(tmp_path / "t.pftrace") as w:
        add_kernels(w, k)
        assert add_counters(w, c, k) == 1
    assert read_trace(tmp_path / "t.pftrace").counters["value"].to_list() == [3.0, 0.0]


def test_frames_without_required_columns_are_user_errors(tmp_path: Path) -> None:
    with TraceWriter(tmp_path / "t.pftrace") as w:
        with pytest.raises(UserError, match="kernels frame: missing column"):
            add_kernels(w, pl.DataFrame({"name": ["k"]}))
        with pytest.raises(UserError, match="counters frame: missing column"):
            add_counters(w, pl.DataFrame({"value": [1.0]}), _kernels())


def test_many_raw_counters_are_grouped_per_hardware_block_with_units(check_trace, tmp_path: Path) -> None:
    """A rocprof-compute capture has hundreds of counters: one folder per block, a unit on every track."""
    names = [f"SQ_INSTS_{i}" for i in range(10)] + [f"TCC_HIT[{i}]" for i in range(8)] + ["GRBM_GUI_ACTIVE",
                                                                                          "SQ_BUSY_CYCLES"]
    counters = frame([dict(run_id="r", graph="g", config="c", correlation_id=0, kernel="gemm", counter=n,
                           value=float(i), source="rocprofv3") for i, n in enumerate(names)], COUNTERS)
    path = tmp_path / "t.pftrace"
    _write(path, _kernels(), counters)
    check_trace(path)
    tracks = read_trace(path).tracks.filter(pl.col("kind") == "counter")
    parents = dict(zip(tracks["name"], tracks["parent_name"]))
    assert parents["SQ_INSTS_3"] == "counters SQ" and parents["TCC_HIT[2]"] == "counters TCC"
    assert parents["GRBM_GUI_ACTIVE"] == "counters GRBM"
    units = dict(zip(tracks["name"], tracks["unit"]))
    assert units["SQ_BUSY_CYCLES"] == "cycles" and units["SQ_INSTS_3"] == "count"

"""Write a run-shaped trace, read it back, check tracks, nesting, args, counters and flows."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from hipdnn_trace.trace import TraceWriter, read_trace

T0 = 5_000_000_000  # ns on the trace clock
N_ITER = 50


def _write_run(path: Path, *, iterations_first: bool) -> dict[int, int]:
    """init, warmup, execute containing iter 0..N-1 (touching), a counter, kernels with flows."""
    flows: dict[int, int] = {}
    with TraceWriter(path) as w:
        proc = w.process_track("hipdnn-trace", pid=4242)
        host = w.thread_track("harness", proc, tid=4243)
        iter_ms = w.counter_track("iteration ms", unit="ms", parent=proc)
        stream = w.device_track(0, 7)
        exec_start = T0 + 3000
        iters = [(exec_start + i * 100, exec_start + (i + 1) * 100) for i in range(N_ITER)]
        exec_end = iters[-1][1]  # execute ends exactly when the last iteration does

        def host_slices() -> None:
            w.slice(host, "init", T0, T0 + 1000, args={"engine": "eng0"})
            w.slice(host, "warmup", T0 + 1000, exec_start)  # touches execute's start
            w.slice(host, "execute", exec_start, exec_end, args={"iterations": N_ITER})

        if not iterations_first:
            host_slices()
        for i, (s, e) in enumerate(iters):
            flows[i] = w.new_flow_id()
            w.slice(host, f"iter {i}", s, e, args={"iteration": i, "ok": True}, flow_ids=[flows[i]])
            w.counter(iter_ms, s, 0.1 + i / 1000)
            # two kernels per iteration, launched inside it
            w.slice(stream, "gemm", s + 10, s + 40, args={"grid": "8x1x1"}, flow_ids=[flows[i]])
            w.slice(stream, "relu", s + 40, s + 60, flow_ids=[flows[i]])
        if iterations_first:
            host_slices()
        w.instant(host, "checkpoint", exec_end)
    return flows


@pytest.mark.parametrize("iterations_first", [False, True])
def test_run_trace_reads_back_with_nesting_and_flows(check_trace, tmp_path: Path, iterations_first: bool) -> None:
    path = tmp_path / "trace.pftrace"
    flows = _write_run(path, iterations_first=iterations_first)
    check_trace(path)
    t = read_trace(path)
    assert not t.truncated and t.valid_bytes == path.stat().st_size

    host = t.slices.filter(pl.col("track_name") == "harness")
    assert host["parent_name"].unique().to_list() == ["hipdnn-trace"]
    # ordering by time
    assert host["ts_ns"].is_sorted()
    top = host.filter(pl.col("depth") == 0)
    assert top["name"].to_list() == ["init", "warmup", "execute", "checkpoint"]
    iters = host.filter(pl.col("name").str.starts_with("iter "))
    assert iters.height == N_ITER
    assert iters["depth"].unique().to_list() == [1]  # inside execute, whatever the write order
    assert iters["dur_ns"].unique().to_list() == [100]
    assert iters["name"].to_list() == [f"iter {i}" for i in range(N_ITER)]
    execute = top.row(2, named=True)
    assert execute["dur_ns"] == N_ITER * 100
    assert json.loads(execute["args"]) == {"iterations": N_ITER}
    assert json.loads(iters.row(3, named=True)["args"]) == {"iteration": 3, "ok": True}
    assert json.loads(top.row(0, named=True)["args"]) == {"engine": "eng0"}
    checkpoint = host.filter(pl.col("name") == "checkpoint").row(0, named=True)
    assert checkpoint["dur_ns"] == 0 and checkpoint["depth"] == 0  # execute ended at that instant

    kernels = t.slices.filter(pl.col("track_name") == "stream 7")
    assert kernels["parent_name"].unique().to_list() == ["GPU 0"]
    assert kernels.height == 2 * N_ITER and kernels["depth"].unique().to_list() == [0]
    assert json.loads(kernels.row(0, named=True)["args"]) == {"grid": "8x1x1"}

    # flows: iter i -> gemm -> relu, all with iteration i's id
    assert t.flows.height == 2 * N_ITER
    by_id = t.slices.select("slice_id", "name", "track_name")
    arrows = t.flows.join(by_id.rename({"slice_id": "slice_out", "name": "from"}), on="slice_out").join(
        by_id.rename({"slice_id": "slice_in", "name": "to", "track_name": "to_track"}), on="slice_in"
    )
    first = arrows.filter(pl.col("flow_id") == flows[5]).sort("slice_out")
    assert first.select("from", "to").rows() == [("iter 5", "gemm"), ("gemm", "relu")]
    assert set(arrows["flow_id"].to_list()) == set(flows.values())

    assert t.counters.height == N_ITER
    assert t.counters["track_name"].unique().to_list() == ["iteration ms"]
    assert t.counters["value"][3] == pytest.approx(0.103)
    tracks = t.tracks.sort("name")
    assert tracks.filter(pl.col("kind") == "thread").row(0, named=True)["tid"] == 4243
    assert tracks.filter(pl.col("name") == "iteration ms")["unit"].to_list() == ["ms"]


def test_events_written_by_hand_encoding_parse_as_protos(check_trace, tmp_path: Path) -> None:
    """The hot-path byte encoder and the protobuf library agree field by field."""
    path = tmp_path / "t.pftrace"
    with TraceWriter(path) as w:
        track = w.process_track("p", pid=1)
        c = w.counter_track("c", parent=track)
        w.slice(track, "same", 10, 20, args={"neg": -5, "big": 2**63 + 7, "f": 1.5, "s": "x", "b": False})
        w.slice(track, "same", 30, 2**62, flow_ids=[2**64 - 1], terminating_flow_ids=[3])
        w.counter(c, 15, -2.25)
    trace = check_trace(path)
    events = [p for p in trace.packet if p.HasField("track_event")]
    assert [p.timestamp for p in events] == [10, 15, 20, 30, 2**62]
    begin = events[0].track_event
    assert begin.type == pb.TrackEvent.TYPE_SLICE_BEGIN and begin.track_uuid == track
    values = {a.WhichOneof("value"): getattr(a, a.WhichOneof("value")) for a in begin.debug_annotations}
    assert values == {"int_value": -5, "uint_value": 2**63 + 7, "double_value": 1.5, "string_value": "x",
                      "bool_value": False}
    assert events[1].track_event.double_counter_value == -2.25
    assert list(events[3].track_event.flow_ids) == [2**64 - 1]
    assert list(events[3].track_event.terminating_flow_ids) == [3]
    assert events[4].track_event.type == pb.TrackEvent.TYPE_SLICE_END
    # first use of a name is inline, later uses are interned
    assert begin.name == "same" and events[3].track_event.HasField("name_iid")
    read = read_trace(path)
    assert read.slices["name"].to_list() == ["same", "same"]
    assert json.loads(read.slices["args"][0])["big"] == 2**63 + 7


def test_bulk_slices_and_counters_match_single_calls(tmp_path: Path) -> None:
    starts = [100 + 10 * i for i in range(20)]
    ends = [s + 10 for s in starts]
    names = [f"iter {i}" for i in range(20)]

    def write(path: Path, bulk: bool) -> None:
        with TraceWriter(path) as w:
            th = w.thread_track("h", w.process_track("p", pid=9), tid=9)
            c = w.counter_track("ms", parent=th)
            w.slice(th, "execute", 100, ends[-1])
            if bulk:
                w.slices(th, names, starts, ends, flow_ids=[i + 1 for i in range(20)],
                         args=[{"iteration": i} for i in range(20)])
                w.counters(c, starts, [float(i) for i in range(20)])
            else:
                for i in range(20):
                    w.slice(th, names[i], starts[i], ends[i], flow_ids=[i + 1], args={"iteration": i})
                    w.counter(c, starts[i], float(i))

    write(tmp_path / "a.pftrace", bulk=True)
    write(tmp_path / "b.pftrace", bulk=False)
    a, b = read_trace(tmp_path / "a.pftrace"), read_trace(tmp_path / "b.pftrace")
    assert a.slices.equals(b.slices) and a.counters.equals(b.counters) and a.flows.equals(b.flows)
    assert a.slices.height == 21 and a.slices["depth"].to_list() == [0] + [1] * 20


def test_bulk_argument_columns_match_per_slice_arguments(check_trace, tmp_path: Path) -> None:
    import numpy as np

    n = 6
    columns = {
        "f": np.array([0.5, -1.0, 2.0, 1e300, float("inf"), 0.0]),
        "i": np.array([0, -1, 127, 128, -(2**63), 2**63 - 1], dtype=np.int64),
        "u": np.array([0, 1, 2**64 - 1, 5, 6, 7], dtype=np.uint64),
        "b": np.array([True, False, True, True, False, False]),
        "s": ["a", None, "", "é" * 70, "x", None],
        "mixed_num": [1, 2.5, None, 3, 4.0, 5],
        "ints": [1, None, -3, 2**40, 0, 7],
        "other": [None, 1, "two", 3.0, True, None],
    }
    names = ["k", "k", "iter 2", "k", "iter 4", "k"]  # repeated and single-use names
    rows = [{k: (v[i].item() if isinstance(v, np.ndarray) else v[i]) for k, v in columns.items()} for i in range(n)]
    for r in rows:  # a column mixing int and float is a float column
        r["mixed_num"] = None if r["mixed_num"] is None else float(r["mixed_num"])

    def write(path: Path, bulk: bool) -> None:
        with TraceWriter(path) as w:
            th = w.thread_track("h", w.process_track("p", pid=3), tid=3)
            starts = [10 * i for i in range(n)]
            if bulk:
                w.slices(th, names, starts, [s + 5 for s in starts], args=columns)
            else:
                for i in range(n):
                    w.slice(th, names[i], starts[i], starts[i] + 5, args=rows[i])

    write(tmp_path / "bulk.pftrace", bulk=True)
    write(tmp_path / "single.pftrace", bulk=False)
    check_trace(tmp_path / "bulk.pftrace")
    bulk, single = read_trace(tmp_path / "bulk.pftrace"), read_trace(tmp_path / "single.pftrace")
    assert bulk.slices.equals(single.slices)
    assert bulk.slices["name"].to_list() == names
    first = json.loads(bulk.slices["args"][0])
    assert first == {"f": 0.5, "i": 0, "u": 0, "b": True, "s": "a", "mixed_num": 1.0, "ints": 1}
    third = json.loads(bulk.slices["args"][2])
    assert third["u"] == 2**64 - 1 and third["s"] == "" and "mixed_num" not in third
    assert json.loads(bulk.slices["args"][4])["i"] == -(2**63)


def test_a_large_run_keeps_every_slice(tmp_path: Path) -> None:
    n = 20_000
    path = tmp_path / "big.pftrace"
    with TraceWriter(path) as w:
        th = w.thread_track("h", w.process_track("p"))
        starts = [1_000 + 50 * i for i in range(n)]
        w.slice(th, "execute", starts[0], starts[-1] + 50)
        w.slices(th, [f"iter {i}" for i in range(n)], starts, [s + 50 for s in starts],
                 flow_ids=[w.new_flow_id() for _ in range(n)])
    t = read_trace(path)
    assert t.slices.height == n + 1
    assert t.slices.filter(pl.col("depth") == 1).height == n


@pytest.mark.parametrize(
    "call",
    [
        lambda w, t: w.slice(t, "x", 20, 10),
        lambda w, t: w.slice(t, "x", -1, 10),
        lambda w, t: w.slice(12345, "x", 1, 2),
        lambda w, t: w.counter(t, 1, 1.0),
        lambda w, t: w.slices(t, ["a", "b"], [1, 2], [3]),
        lambda w, t: w.thread_track("x", parent=t + 1),
    ],
)
def test_bad_calls_raise_value_error(tmp_path: Path, call) -> None:
    with TraceWriter(tmp_path / "t.pftrace") as w:
        track = w.process_track("p")
        with pytest.raises(ValueError):
            call(w, track)


def test_empty_writer_leaves_a_valid_empty_trace(check_trace, tmp_path: Path) -> None:
    path = tmp_path / "t.pftrace"
    TraceWriter(path).close()
    check_trace(path)
    t = read_trace(path)
    assert t.slices.height == 0 and t.packets == 2 and not t.truncated  # clock + flush marker

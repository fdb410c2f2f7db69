"""A killed run leaves a readable trace; a resumed run appends to it."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from hipdnn_trace.errors import UserError
from hipdnn_trace.trace import TraceWriter, read_trace, repair
from hipdnn_trace.trace.reader import valid_prefix


def _graph(w: TraceWriter, host: int, graph: str, t0: int, n: int = 5) -> None:
    w.slice(host, f"graph {graph}", t0, t0 + 10 * n)
    for i in range(n):
        w.slice(host, f"iter {i}", t0 + 10 * i, t0 + 10 * (i + 1), args={"graph": graph})
    w.flush()


def _suite(path: Path, graphs: list[str], *, append: bool = False, t0: int = 1000) -> None:
    with TraceWriter(path, append=append) as w:
        host = w.thread_track("harness", w.process_track("hipdnn-trace", pid=77), tid=77)
        for k, g in enumerate(graphs):
            _graph(w, host, g, t0 + 1000 * k)


def test_every_cut_point_reads_as_whole_packets_and_repairs(check_trace, tmp_path: Path) -> None:
    path = tmp_path / "t.pftrace"
    _suite(path, ["a", "b"])
    data = path.read_bytes()
    full = read_trace(path)
    # A cut on a packet boundary leaves whole packets; one on a flush boundary
    # (after a flush marker) leaves a complete, untruncated trace.
    packet_ends = {cut for cut in range(1, len(data) + 1) if valid_prefix(data[:cut]).complete == cut}
    flush_ends = {cut for cut in range(1, len(data) + 1) if valid_prefix(data[:cut]).committed == cut}
    assert len(packet_ends) == full.packets
    assert len(flush_ends) == 3  # writer start, graph a, graph b (close had nothing left)
    first_flush = min(flush_ends)
    for cut in range(first_flush, len(data), 5):
        part = tmp_path / "part.pftrace"
        part.write_bytes(data[:cut])
        t = read_trace(part)
        assert t.truncated == (cut not in flush_ends), cut
        assert t.valid_bytes == max(e for e in packet_ends if e <= cut)
        assert t.slices.height <= full.slices.height
        kept = repair(part)
        assert kept == max(e for e in flush_ends if e <= cut) == part.stat().st_size
        again = read_trace(part)
        assert not again.truncated
        check_trace(part)  # BEGIN/END balanced again: no slice left open


def test_killed_mid_write_keeps_finished_graphs(check_trace, tmp_path: Path) -> None:
    path = tmp_path / "t.pftrace"
    _suite(path, ["a"])
    size_after_a = path.stat().st_size
    _suite(path, ["b"], append=True, t0=5000)
    data = path.read_bytes()
    # the second graph's flush was cut 3 bytes short of its end
    path.write_bytes(data[:-20])  # graph b's flush lost its last packets
    t = read_trace(path)
    assert t.truncated
    # graph a's slices all survive with their durations; b's are partial
    a = t.slices.filter(pl.col("ts_ns") < 5000)
    assert a.height == 6 and a["dur_ns"].null_count() == 0
    assert t.slices.filter(pl.col("ts_ns") >= 5000)["dur_ns"].null_count() > 0
    assert repair(path) > size_after_a  # keeps a, and the resumed writer's start
    check_trace(path)
    t = read_trace(path)
    assert not t.truncated and t.slices.height == 6


def test_append_continues_the_file_with_a_new_sequence(check_trace, tmp_path: Path) -> None:
    path = tmp_path / "t.pftrace"
    _suite(path, ["a", "b"])
    path.write_bytes(path.read_bytes()[:-2])  # killed during the last flush
    _suite(path, ["c"], append=True, t0=9000)  # resume repairs, then appends
    trace = check_trace(path)  # each sequence starts CLEARED with its clock
    sequences = {p.trusted_packet_sequence_id for p in trace.packet}
    assert len(sequences) == 2
    t = read_trace(path)
    assert not t.truncated
    graphs = t.slices.filter(pl.col("depth") == 0)["name"].to_list()
    assert graphs == ["graph a", "graph c"]  # b was cut mid-packet and dropped by repair
    # Interned names resolve per sequence (each writer numbers its iids from 1).
    iters = t.slices.filter(pl.col("depth") == 1)
    assert iters["name"].to_list() == [f"iter {i}" for i in range(5)] * 2
    # Tracks are re-declared with the same uuids, not duplicated.
    assert t.tracks.height == 2 and t.tracks["uuid"].n_unique() == 2
    assert t.slices["track_uuid"].n_unique() == 1


def test_append_to_a_missing_file_creates_it(tmp_path: Path) -> None:
    path = tmp_path / "new.pftrace"
    _suite(path, ["a"], append=True)
    assert read_trace(path).slices.height == 6


def test_flow_ids_of_appended_writers_differ(tmp_path: Path) -> None:
    path = tmp_path / "t.pftrace"
    ids = []
    for append in (False, True):
        with TraceWriter(path, append=append) as w:
            ids += [w.new_flow_id() for _ in range(100)]
    assert len(set(ids)) == 200 and 0 not in ids


def test_not_a_trace_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": []}')
    with pytest.raises(UserError, match="not a Perfetto protobuf trace"):
        read_trace(path)
    with pytest.raises(UserError, match="cannot read"):
        read_trace(tmp_path / "missing.pftrace")

"""Fixture ``check_trace``: structural checks of a .pftrace against the Perfetto TrackEvent rules, using
the protos only.

trace_processor (the reference importer) downloads a binary and cannot run
offline, so these checks encode the rules from perfetto.dev "Writing TrackEvent
protos synthetically" and the comments of trace_packet.proto / track_event.proto.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
NEEDS = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE


def check_trace(path: Path) -> pb.Trace:
    """Assert the rules; returns the parsed trace for further checks."""
    trace = pb.Trace.FromString(Path(path).read_bytes())
    cleared: set[int] = set()
    event_iids: dict[int, set[int]] = defaultdict(set)
    arg_iids: dict[int, set[int]] = defaultdict(set)
    declared: set[int] = set()
    counter_tracks: set[int] = set()
    events = []
    for index, packet in enumerate(trace.packet):
        seq = packet.trusted_packet_sequence_id
        assert seq != 0, f"packet {index}: no trusted_packet_sequence_id"
        if seq not in cleared:
            # The first packet of a sequence resets incremental state and sets
            # the clock defaults; the writer also names the trace clock.
            assert packet.sequence_flags & CLEARED, f"packet {index}: first of sequence {seq} not CLEARED"
            assert packet.trace_packet_defaults.timestamp_clock_id == pb.BUILTIN_CLOCK_BOOTTIME
            assert packet.clock_snapshot.primary_trace_clock == pb.BUILTIN_CLOCK_BOOTTIME
            clocks = {c.clock_id for c in packet.clock_snapshot.clocks}
            assert pb.BUILTIN_CLOCK_BOOTTIME in clocks
            cleared.add(seq)
            continue
        # TracePacketDefaults oblige every later packet to declare it needs state.
        assert packet.sequence_flags & NEEDS, f"packet {index}: missing SEQ_NEEDS_INCREMENTAL_STATE"
        if packet.HasField("interned_data"):
            for e in packet.interned_data.event_names:
                assert e.iid != 0, "iid 0 is not valid"
                event_iids[seq].add(e.iid)
            for e in packet.interned_data.debug_annotation_names:
                assert e.iid != 0
                arg_iids[seq].add(e.iid)
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            assert d.uuid != 0
            if d.HasField("parent_uuid"):
                assert d.parent_uuid in declared, f"track {d.uuid}: parent declared later"
            declared.add(d.uuid)
            if d.HasField("counter"):
                counter_tracks.add(d.uuid)
        if packet.HasField("track_event"):
            e = packet.track_event
            assert packet.HasField("timestamp")
            assert e.track_uuid in declared, f"packet {index}: event on undeclared track"
            if e.HasField("name_iid"):
                assert e.name_iid in event_iids[seq], f"packet {index}: name_iid not interned on its sequence"
            for a in e.debug_annotations:
                assert a.name_iid in arg_iids[seq] or a.HasField("name")
            if e.type == pb.TrackEvent.TYPE_COUNTER:
                assert e.track_uuid in counter_tracks
            else:
                assert e.track_uuid not in counter_tracks
            events.append((packet.timestamp, index, e.track_uuid, e.type))
    # After Perfetto's sort (timestamp, then file order) BEGIN/END balance per track.
    depth: dict[int, int] = defaultdict(int)
    for _, index, track, kind in sorted(events):
        if kind == pb.TrackEvent.TYPE_SLICE_BEGIN:
            depth[track] += 1
        elif kind == pb.TrackEvent.TYPE_SLICE_END:
            depth[track] -= 1
            assert depth[track] >= 0, f"packet {index}: END without an open slice"
    assert all(d == 0 for d in depth.values()), "slices left open"
    return trace


@pytest.fixture(name="check_trace", scope="session")
def check_trace_fixture():
    """``check_trace(path)``: assert the Perfetto rules, return the parsed trace."""
    return check_trace

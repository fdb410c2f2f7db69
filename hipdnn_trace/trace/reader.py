"""Read a .pftrace back into polars frames, without trace_processor.

Perfetto's trace_processor downloads a native binary, which offline machines
and CI cannot do, so this reader decodes the protos directly and rebuilds what
the trace processor would show for the subset of TrackEvent the writer uses:
tracks, slices (nested per track by BEGIN/END order after a stable sort by
timestamp, as Perfetto does), instants (zero-length slices), counters and
flows (``flow_ids`` chain consecutive slices in time, ``terminating_flow_ids``
end a chain). Interned names are resolved per packet sequence.

A run killed mid-write leaves a partial last packet, or a flush cut short: the
reader keeps every complete packet and reports ``truncated``; :func:`repair`
cuts the file back to its last complete flush (the writer ends each with an
empty marker packet) so a resumed run can append to it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import polars as pl
from google.protobuf.message import DecodeError
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from hipdnn_trace import read_gate
from hipdnn_trace.errors import UserError
from hipdnn_trace.trace import wire

_CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
_BEGIN = pb.TrackEvent.TYPE_SLICE_BEGIN
_END = pb.TrackEvent.TYPE_SLICE_END
_INSTANT = pb.TrackEvent.TYPE_INSTANT
_COUNTER = pb.TrackEvent.TYPE_COUNTER
_MARKER_FIELDS = {"trusted_packet_sequence_id", "sequence_flags"}

TRACKS_SCHEMA = {
    "uuid": pl.UInt64(),
    "name": pl.String(),
    "kind": pl.String(),  # process | thread | counter | track
    "parent_uuid": pl.UInt64(),
    "parent_name": pl.String(),
    "pid": pl.Int64(),
    "tid": pl.Int64(),
    "unit": pl.String(),
}
SLICES_SCHEMA = {
    "slice_id": pl.Int64(),
    "track_uuid": pl.UInt64(),
    "track_name": pl.String(),
    "parent_name": pl.String(),  # name of the track's parent track
    "name": pl.String(),
    "ts_ns": pl.Int64(),
    "dur_ns": pl.Int64(),  # 0 for instants, null for a slice never ended
    "depth": pl.Int64(),
    "args": pl.String(),  # JSON object
    "flow_ids": pl.List(pl.UInt64()),
    "terminating_flow_ids": pl.List(pl.UInt64()),
}
COUNTERS_SCHEMA = {
    "track_uuid": pl.UInt64(),
    "track_name": pl.String(),
    "ts_ns": pl.Int64(),
    "value": pl.Float64(),
}
FLOWS_SCHEMA = {"flow_id": pl.UInt64(), "slice_out": pl.Int64(), "slice_in": pl.Int64()}


@dataclass(frozen=True)
class TraceContents:
    """What a trace holds, as frames (schemas: the ``*_SCHEMA`` dicts above)."""

    tracks: pl.DataFrame
    slices: pl.DataFrame  # ordered by ts_ns, then write order
    counters: pl.DataFrame
    flows: pl.DataFrame  # one row per arrow, slice ids from ``slices``
    truncated: bool  # the run was cut mid-flush: a partial packet or an unfinished flush at the end
    packets: int  # complete packets read
    valid_bytes: int  # length of the complete-packet prefix


class Framing(NamedTuple):
    """Where the whole packets and whole flushes of a trace file end."""

    complete: int  # bytes of the longest prefix of whole packets
    packets: int  # packets in that prefix
    committed: int | None  # bytes up to the last flush marker (None: no marker)


def valid_prefix(data: bytes | memoryview) -> Framing:
    """Scan the ``Trace.packet`` framing of ``data`` (no decoding of packets)."""
    pos, count, committed, n = 0, 0, None, len(data)
    while pos < n:
        if data[pos] != 0x0A:  # field 1, length-delimited: the only Trace field
            break
        p, length, shift = pos + 1, 0, 0
        while p < n and shift < 64:
            byte = data[p]
            p += 1
            length |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
        else:
            break  # length varint cut short
        if p + length > n:
            break
        pos = p + length
        count += 1
        if length <= 10 and wire.is_flush_marker(data[p:pos]):
            committed = pos
    return Framing(pos, count, committed)


def repair(path: Path | str) -> int:
    """Cut ``path`` back to its last complete flush; returns the bytes kept.

    A file without flush markers (not written by TraceWriter) is cut back to
    its last complete packet instead.
    """
    path = Path(path)
    data = read_gate.read_bytes(path, read_gate.TRACE)
    framing = valid_prefix(data)
    keep = framing.complete if framing.committed is None else framing.committed
    if keep < len(data):
        with open(path, "r+b") as f:
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
    return keep


def _parse(path: Path) -> tuple[pb.Trace, bool, int]:
    data = read_gate.read_bytes(path, read_gate.TRACE)
    try:
        return pb.Trace.FromString(data), False, len(data)
    except DecodeError:
        pass
    keep = valid_prefix(data).complete
    if keep == 0:
        raise UserError(f"{path}: not a Perfetto protobuf trace (no complete packet at the start)")
    try:
        return pb.Trace.FromString(data[:keep]), True, keep
    except DecodeError:
        raise UserError(f"{path}: corrupt packet inside the first {keep} bytes of the trace") from None


def _annotation_value(a: pb.DebugAnnotation) -> object:
    kind = a.WhichOneof("value")
    if kind in ("bool_value", "uint_value", "int_value", "double_value", "string_value"):
        return getattr(a, kind)
    if kind == "pointer_value":
        return hex(a.pointer_value)
    return None if kind is None else str(getattr(a, kind))


def read_trace(path: Path | str) -> TraceContents:
    """Decode a .pftrace written by :class:`~hipdnn_trace.trace.writer.TraceWriter`.

    Tolerates a run killed mid-write: a partial last packet is ignored and an
    unfinished last flush is read as far as it goes; both set ``truncated``.
    Raises :class:`~hipdnn_trace.errors.UserError` for a missing or
    non-Perfetto file.
    """
    path = Path(path)
    trace, truncated, valid_bytes = _parse(path)

    tracks, events, counter_points, last_marker = _decode(trace)
    if last_marker is not None and last_marker < len(trace.packet) - 1:
        truncated = True  # the last flush was cut short (packets after the last marker)
    slices, flows = _slices(events, tracks)
    counter_points.sort(key=lambda c: c[0])
    counters = pl.DataFrame(
        {
            "track_uuid": [c[1] for c in counter_points],
            "track_name": [tracks.get(c[1], {}).get("name") for c in counter_points],
            "ts_ns": [c[0] for c in counter_points],
            "value": [c[2] for c in counter_points],
        },
        schema=COUNTERS_SCHEMA,
    )
    return TraceContents(
        tracks=pl.DataFrame(list(tracks.values()) or None, schema=TRACKS_SCHEMA),
        slices=slices,
        counters=counters,
        flows=flows,
        truncated=truncated,
        packets=len(trace.packet),
        valid_bytes=valid_bytes,
    )


def _decode(trace: pb.Trace) -> tuple[dict[int, dict], list[tuple], list[tuple[int, int, float]], int | None]:
    """Tracks by uuid, slice events (ts, file index, track, type, name, args,
    flow ids, terminating flow ids), counter points (ts, track, value) and the
    index of the last flush marker, with interned names resolved per sequence."""
    last_marker = None
    tracks: dict[int, dict] = {}
    names: dict[int, dict[int, str]] = {}  # per sequence: event name iid -> name
    arg_names: dict[int, dict[int, str]] = {}
    events: list[tuple] = []
    counter_points: list[tuple[int, int, float]] = []
    for index, packet in enumerate(trace.packet):
        seq = packet.trusted_packet_sequence_id
        if packet.sequence_flags & _CLEARED or seq not in names:
            names[seq], arg_names[seq] = {}, {}
        if packet.HasField("interned_data"):
            interned = packet.interned_data
            names[seq].update((e.iid, e.name) for e in interned.event_names)
            arg_names[seq].update((e.iid, e.name) for e in interned.debug_annotation_names)
        data = packet.WhichOneof("data")
        if data == "track_event":
            e = packet.track_event
            if e.type == _COUNTER:
                value = e.double_counter_value if e.HasField("double_counter_value") else float(e.counter_value)
                counter_points.append((packet.timestamp, e.track_uuid, value))
                continue
            name = e.name if e.HasField("name") else names[seq].get(e.name_iid, "") if e.name_iid else ""
            args = None
            if e.debug_annotations:
                args = {}
                for a in e.debug_annotations:
                    key = a.name if a.HasField("name") else arg_names[seq].get(a.name_iid, f"arg{a.name_iid}")
                    args[key] = _annotation_value(a)
            events.append((packet.timestamp, index, e.track_uuid, e.type, name, args, e.flow_ids,
                           e.terminating_flow_ids))
        elif data == "track_descriptor":
            tracks[packet.track_descriptor.uuid] = _track(packet.track_descriptor)
        elif data is None and len(packet.ListFields()) <= 2 and not packet.HasField("interned_data"):
            if {f.name for f, _ in packet.ListFields()} <= _MARKER_FIELDS:
                last_marker = index
    for t in tracks.values():
        parent = tracks.get(t["parent_uuid"]) if t["parent_uuid"] is not None else None
        t["parent_name"] = parent["name"] if parent else None
    return tracks, events, counter_points, last_marker


def _track(d: pb.TrackDescriptor) -> dict:
    kind = (
        "process" if d.HasField("process")
        else "thread" if d.HasField("thread")
        else "counter" if d.HasField("counter")
        else "track"
    )  # fmt: skip
    fallback = d.process.process_name if kind == "process" else d.thread.thread_name if kind == "thread" else ""
    return {
        "uuid": d.uuid,
        "name": d.name or d.static_name or fallback,
        "kind": kind,
        "parent_uuid": d.parent_uuid if d.HasField("parent_uuid") else None,
        "pid": d.process.pid if kind == "process" else d.thread.pid if kind == "thread" else None,
        "tid": d.thread.tid if kind == "thread" else None,
        "unit": (d.counter.unit_name or None) if kind == "counter" else None,
    }


def _slices(events: list[tuple], tracks: dict[int, dict]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Slices and flows as the trace processor builds them.

    Perfetto sorts events by timestamp, keeping file order on ties; an END
    closes the innermost open slice of its track; a flow id links each slice
    carrying it to the next one in time.
    """
    events.sort(key=lambda ev: (ev[0], ev[1]))
    col: dict[str, list] = {k: [] for k in ("track_uuid", "name", "ts_ns", "dur_ns", "depth", "args")}
    flow_long: list[tuple[int, int]] = []  # (slice id, flow id)
    term_long: list[tuple[int, int]] = []
    flows: list[tuple[int, int, int]] = []
    open_flows: dict[int, int] = {}
    stacks: dict[int, list[int]] = {}
    durs = col["dur_ns"]
    for ts, _, track, kind, name, args, flow_ids, terminating in events:
        stack = stacks.setdefault(track, [])
        if kind == _END:
            if stack:
                sid = stack.pop()
                durs[sid] = ts - col["ts_ns"][sid]
            continue
        if kind not in (_BEGIN, _INSTANT):
            continue
        sid = len(durs)
        col["track_uuid"].append(track)
        col["name"].append(name)
        col["ts_ns"].append(ts)
        durs.append(0 if kind == _INSTANT else None)
        col["depth"].append(len(stack))
        col["args"].append(json.dumps(args, sort_keys=True) if args else "{}")
        for fid in flow_ids:
            flow_long.append((sid, fid))
            if fid in open_flows:
                flows.append((fid, open_flows[fid], sid))
            open_flows[fid] = sid
        for fid in terminating:
            term_long.append((sid, fid))
            if fid in open_flows:
                flows.append((fid, open_flows.pop(fid), sid))
        if kind == _BEGIN:
            stack.append(sid)

    n = len(durs)
    frame = pl.DataFrame(
        {
            "slice_id": range(n),
            "track_uuid": col["track_uuid"],
            "track_name": [tracks.get(t, {}).get("name") for t in col["track_uuid"]],
            "parent_name": [tracks.get(t, {}).get("parent_name") for t in col["track_uuid"]],
            **{k: col[k] for k in ("name", "ts_ns", "dur_ns", "depth", "args")},
        },
        schema={k: v for k, v in SLICES_SCHEMA.items() if "flow_ids" not in k},
    )
    for column, long in (("flow_ids", flow_long), ("terminating_flow_ids", term_long)):
        lists = (
            pl.DataFrame(long, schema={"slice_id": pl.Int64(), column: pl.UInt64()}, orient="row")
            .group_by("slice_id", maintain_order=True)
            .agg(pl.col(column))
        )
        frame = frame.join(lists, on="slice_id", how="left").with_columns(
            pl.col(column).fill_null(pl.lit([], dtype=SLICES_SCHEMA[column]))
        )
    flow_frame = pl.DataFrame(flows, schema=FLOWS_SCHEMA, orient="row")
    return frame.sort("slice_id"), flow_frame

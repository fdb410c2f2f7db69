"""Append-only Perfetto trace writer (native protobuf, ``.pftrace``).

A run's trace is a sequence of ``TracePacket``s (see perfetto.dev, "Writing
TrackEvent protos synthetically"). This writer keeps events in memory and
writes them at :meth:`TraceWriter.flush` in a single ``write`` of whole packets,
so a run killed between flushes leaves a valid trace and a run killed during a
write leaves a valid prefix plus a partial packet that the reader ignores and
:func:`hipdnn_trace.trace.reader.repair` cuts off.

Choices, each from the Perfetto docs/protos:

* Slices are ``TYPE_SLICE_BEGIN``/``TYPE_SLICE_END`` pairs; TrackEvent has no
  complete (duration) event. Perfetto sorts events by timestamp and keeps file
  order for equal timestamps, and an END closes the innermost open slice of its
  track; so each flush orders events by time and, at equal time, ends (innermost
  first) before begins (outermost first). Slices that touch at one timestamp
  nest correctly when written in the same flush, whatever order the caller
  used.
* Timestamps are ns on :mod:`hipdnn_trace.device.clock` (CLOCK_BOOTTIME). Each
  writer declares it: a ``ClockSnapshot`` naming it the primary trace clock
  (plus MONOTONIC and REALTIME readings, so the UI can show wall time) and
  ``TracePacketDefaults.timestamp_clock_id``.
* Each writer is one packet sequence (random ``trusted_packet_sequence_id``);
  its first packet sets ``SEQ_INCREMENTAL_STATE_CLEARED``, later ones
  ``SEQ_NEEDS_INCREMENTAL_STATE``. Event and argument names are interned.
* Track uuids are a hash of what the track is (process pid, GPU device and
  stream, counter name and parent), so a resumed run that appends to the file
  re-declares the same tracks instead of duplicating them.
* Every flush ends with an empty packet (sequence id and flags only), which
  Perfetto ignores and :mod:`hipdnn_trace.trace.reader` uses to tell a complete
  flush from one cut short.
* Flow ids are global in a trace; :meth:`TraceWriter.new_flow_id` draws them
  from a random per-writer base so appended writers never collide.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import secrets
import struct
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from operator import itemgetter
from pathlib import Path
from types import TracebackType

import numpy as np
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from hipdnn_trace.device import clock
from hipdnn_trace.trace import wire
from hipdnn_trace.trace.reader import repair

ArgValue = str | int | float | bool
Args = Mapping[str, ArgValue]

TRACE_CLOCK_ID = (
    pb.BUILTIN_CLOCK_BOOTTIME if clock.CLOCK_NAME == "CLOCK_BOOTTIME" else pb.BUILTIN_CLOCK_MONOTONIC
)
_SEQ_CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
_SEQ_NEEDS = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
_TS_MAX = (1 << 63) - 1
_BEGIN = wire.varint_field(wire.TE_TYPE, pb.TrackEvent.TYPE_SLICE_BEGIN)
_END = wire.varint_field(wire.TE_TYPE, pb.TrackEvent.TYPE_SLICE_END)
_INSTANT = wire.varint_field(wire.TE_TYPE, pb.TrackEvent.TYPE_INSTANT)
_COUNTER = wire.varint_field(wire.TE_TYPE, pb.TrackEvent.TYPE_COUNTER)
_NAME_IID = wire.tag(wire.TE_NAME_IID, wire.VARINT)
_NAME = wire.tag(pb.TrackEvent.DESCRIPTOR.fields_by_name["name"].number, wire.LEN)
_DOUBLE_COUNTER = wire.tag(wire.TE_DOUBLE_COUNTER_VALUE, wire.I64)
_PACK_F64 = struct.Struct("<d").pack
_FLOW = wire.tag(wire.TE_FLOW_IDS, wire.I64)
_DA = wire.tag(wire.TE_DEBUG_ANNOTATIONS, wire.LEN)
_DA_DOUBLE = wire.tag(wire.DA_DOUBLE, wire.I64)
_DA_INT = wire.tag(wire.DA_INT, wire.VARINT)
_DA_STRING = wire.tag(wire.DA_STRING, wire.LEN)
_DA_BOOL = wire.tag(wire.DA_BOOL, wire.VARINT)
# Field numbers: TracePacket.interned_data; InternedData.event_names and
# .debug_annotation_names (both messages {iid = 1; name = 2}).
_PACKET_INTERNED_DATA = pb.TracePacket.DESCRIPTOR.fields_by_name["interned_data"].number
_INTERNED_EVENT_NAMES = pb.InternedData.DESCRIPTOR.fields_by_name["event_names"].number
_INTERNED_ARG_NAMES = pb.InternedData.DESCRIPTOR.fields_by_name["debug_annotation_names"].number

# Flush by itself beyond this many pending events, to bound memory. Slices that
# touch at one timestamp must land in one flush to nest right (see module doc),
# so keep this far above what one graph writes.
AUTO_FLUSH_EVENTS = 2_000_000


def track_uuid(*key: object) -> int:
    """Stable non-zero 63-bit uuid for a track identified by ``key``."""
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "little") & _TS_MAX) or 1


def _frame(packets: Sequence[pb.TracePacket]) -> bytes:
    trace = pb.Trace()
    trace.packet.extend(packets)
    return trace.SerializeToString()


class TraceWriter:
    """Appends packets to a .pftrace file; each :meth:`flush` writes whole packets
    in one write so a killed run leaves a valid prefix.

    ``append=True`` continues an existing file (resume): it is first cut back to
    its last complete flush (:func:`~hipdnn_trace.trace.reader.repair`), then this
    writer starts a new packet sequence. Declare tracks again in the new writer;
    equal declarations get equal uuids, so they are not duplicated.
    ``fsync=True`` makes every flush durable (slower; for crash-prone suites).
    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, path: Path | str, *, append: bool = False, fsync: bool = False) -> None:
        self.path = Path(path)
        self._fsync = fsync
        if append and self.path.exists():
            repair(self.path)
        self._file = open(self.path, "ab" if append else "wb", buffering=0)
        self._sequence_id = secrets.randbits(31) or 1
        self._flow_base = secrets.randbits(32) << 32
        self._flow_counter = itertools.count(1)
        self._tail = wire.varint_field(wire.PACKET_SEQUENCE_ID, self._sequence_id) + wire.varint_field(
            wire.PACKET_SEQUENCE_FLAGS, _SEQ_NEEDS
        )
        self._started = False
        self._closed = False
        #: the error of a failed flush; the writer writes nothing more after one
        self.broken: OSError | None = None

        self._tracks: dict[int, str] = {}  # uuid -> kind
        self._track_field: dict[int, bytes] = {}  # uuid -> encoded TrackEvent.track_uuid
        self._process_pid: dict[int, int] = {}
        self._pending_descriptors: list[pb.TracePacket] = []
        self._event_names: dict[str, int] = {}
        self._arg_names: dict[str, int] = {}
        self._new_event_names: list[tuple[int, str]] = []
        self._new_arg_names: list[tuple[int, str]] = []
        self._begin_bodies: dict[tuple[int, str], bytes] = {}
        self._instant_bodies: dict[tuple[int, str], bytes] = {}
        self._end_bodies: dict[int, bytes] = {}
        self._counter_bodies: dict[int, bytes] = {}

        self._names_seen_once: set[str] = set()
        self._arg_heads: dict[str, bytes] = {}

        # Pending items in write order: slices, instants and counter values.
        # Instants and counter values have end == start and an empty end body.
        self._start: list[int] = []
        self._end: list[int] = []
        self._body: list[bytes] = []
        self._end_body: list[bytes] = []
        # Declare the sequence and its clock now, ending with a flush marker, so
        # that even a run killed before its first flush leaves a valid trace.
        self.flush()

    # --- tracks -------------------------------------------------------------

    def _declare(self, uuid: int, kind: str, descriptor: pb.TrackDescriptor) -> int:
        if uuid not in self._tracks:
            self._tracks[uuid] = kind
            self._track_field[uuid] = wire.varint_field(wire.TE_TRACK_UUID, uuid)
            packet = pb.TracePacket(track_descriptor=descriptor)
            self._pending_descriptors.append(packet)
        return uuid

    def process_track(self, name: str, pid: int | None = None) -> int:
        """A process (default: this one); host phases go on its threads."""
        pid = os.getpid() if pid is None else int(pid)
        uuid = track_uuid("process", pid)
        self._process_pid[uuid] = pid
        desc = pb.TrackDescriptor(uuid=uuid, process=pb.ProcessDescriptor(pid=pid, process_name=name))
        return self._declare(uuid, "process", desc)

    def thread_track(self, name: str, parent: int, tid: int | None = None) -> int:
        """A thread of ``parent`` (a process track); default tid: the calling thread."""
        if parent not in self._process_pid:
            raise ValueError(f"thread_track: parent {parent} is not a process track of this writer")
        pid = self._process_pid[parent]
        tid = threading.get_native_id() if tid is None else int(tid)
        uuid = track_uuid("thread", pid, tid)
        desc = pb.TrackDescriptor(
            uuid=uuid, parent_uuid=parent, thread=pb.ThreadDescriptor(pid=pid, tid=tid, thread_name=name)
        )
        return self._declare(uuid, "thread", desc)

    def gpu_track(self, device: int) -> int:
        """The "GPU <device>" group track: parent of its streams and counters."""
        gpu = track_uuid("gpu", int(device))
        return self._declare(gpu, "gpu", pb.TrackDescriptor(uuid=gpu, name=f"GPU {int(device)}"))

    def device_track(self, device: int, stream: int, name: str | None = None) -> int:
        """A GPU stream track (default name "stream <stream>"), under :meth:`gpu_track`."""
        gpu = self.gpu_track(device)
        name = name or f"stream {int(stream)}"
        uuid = track_uuid("gpu-stream", int(device), int(stream), name)
        return self._declare(uuid, "track", pb.TrackDescriptor(uuid=uuid, parent_uuid=gpu, name=name))

    def group_track(self, name: str, parent: int) -> int:
        """A named track that only groups others (counters of one hardware block under a GPU)."""
        if parent not in self._tracks:
            raise ValueError(f"group_track {name!r}: parent {parent} is not a track of this writer")
        uuid = track_uuid("group", parent, name)
        return self._declare(uuid, "track", pb.TrackDescriptor(uuid=uuid, parent_uuid=parent, name=name))

    def counter_track(self, name: str, unit: str | None = None, parent: int | None = None) -> int:
        """A counter track (e.g. iteration time, TFLOPS, a kernel metric)."""
        if parent is not None and parent not in self._tracks:
            raise ValueError(f"counter_track {name!r}: parent {parent} is not a track of this writer")
        uuid = track_uuid("counter", parent, name)
        counter = pb.CounterDescriptor(unit_name=unit) if unit else pb.CounterDescriptor()
        desc = pb.TrackDescriptor(uuid=uuid, name=name, counter=counter)
        if parent is not None:
            desc.parent_uuid = parent
        return self._declare(uuid, "counter", desc)

    # --- events -------------------------------------------------------------

    def new_flow_id(self) -> int:
        """A flow id unique in this file (also across appended writers)."""
        return self._flow_base | next(self._flow_counter)

    def _check_track(self, track: int, kind: str | None = None) -> None:
        have = self._tracks.get(track)
        if have is None:
            raise ValueError(f"track {track} was not declared by this writer")
        if kind == "counter" and have != "counter":
            raise ValueError(f"track {track} is not a counter track")
        if kind != "counter" and have == "counter":
            raise ValueError(f"track {track} is a counter track; slices go on slice tracks")

    def _iid(self, table: dict[str, int], new: list[tuple[int, str]], name: str) -> int:
        iid = table.get(name)
        if iid is None:
            iid = table[name] = len(table) + 1
            new.append((iid, name))
        return iid

    def _event_prefix(self, event_type: bytes, track: int, name: str) -> tuple[bytes | None, bytes | None]:
        """TrackEvent fields for type, track and name: (cacheable, single-use).

        A name seen once is written inline: runs name each iteration slice
        ("iter <i>"), and interning 100k single-use names costs more than it
        saves. From its second use on a name is interned and the prefix cached.
        """
        self._check_track(track)
        name = str(name)
        iid = self._event_names.get(name)
        if iid is None:
            if name not in self._names_seen_once:
                self._names_seen_once.add(name)
                encoded = name.encode()
                return None, event_type + self._track_field[track] + _NAME + wire.varint(len(encoded)) + encoded
            self._names_seen_once.discard(name)
            iid = self._iid(self._event_names, self._new_event_names, name)
        return event_type + self._track_field[track] + _NAME_IID + wire.varint(iid), None

    def _arg_head(self, key: str) -> bytes:
        """Encoded ``DebugAnnotation.name_iid`` of an argument name (interned)."""
        head = self._arg_heads.get(key)
        if head is None:
            iid = self._iid(self._arg_names, self._new_arg_names, str(key))
            head = self._arg_heads[key] = wire.varint_field(wire.DA_NAME_IID, iid)
        return head

    def _arg(self, head: bytes, value: object) -> bytes:
        """One ``debug_annotations`` entry; fast paths for the common types."""
        cls = type(value)
        if cls is float:
            body = head + _DA_DOUBLE + _PACK_F64(value)
        elif cls is int and 0 <= value <= _TS_MAX:
            body = head + _DA_INT + wire.varint(value)
        elif cls is str:
            encoded = value.encode()
            body = head + _DA_STRING + wire.varint(len(encoded)) + encoded
        else:
            body = head + wire.annotation_value(value)
        return _DA + wire.varint(len(body)) + body

    def _args(self, args: Args) -> bytes:
        return b"".join(self._arg(self._arg_head(k), v) for k, v in args.items() if v is not None)

    def _name_iids(self, names: Sequence[str]) -> np.ndarray:
        """Interned id per name, 0 where the name is written inline.

        A name used once so far is written inline; a name used more than once
        (in this call or before) is interned.
        """
        seen_once, interned = self._names_seen_once, self._event_names
        lookup: dict[str, int] = {}
        for name, count in Counter(names).items():
            iid = interned.get(name)
            if iid is None:
                if count == 1 and name not in seen_once:
                    seen_once.add(name)
                    lookup[name] = 0
                    continue
                seen_once.discard(name)
                iid = self._iid(interned, self._new_event_names, name)
            lookup[name] = iid
        return np.fromiter(map(lookup.__getitem__, names), dtype=np.int64, count=len(names))

    def _arg_pieces(self, rows: wire.Rows, key: str, values: Sequence[object] | np.ndarray) -> None:
        """Add one argument column to bulk slice bodies (None: argument absent)."""
        head = self._arg_head(key)
        arr = np.asarray(values) if isinstance(values, np.ndarray) else None
        if arr is None or arr.dtype.kind not in "fiub":
            items = arr.tolist() if arr is not None else list(values)
            present = np.array([v is not None for v in items], dtype=bool)
            kinds = set(map(type, items)) - {type(None)}
            arr = None
            if kinds == {float} or kinds == {float, int}:
                arr = np.array([0.0 if v is None else v for v in items], dtype=np.float64)
            elif kinds == {int}:
                try:
                    arr = np.array([0 if v is None else v for v in items], dtype=np.int64)
                except OverflowError:
                    arr = None
            elif kinds == {str}:
                unique = {v: v.encode() for v in set(items) if v is not None}
                encoded = [unique.get(v, b"") for v in items]
                length = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
                body = len(head) + 1 + wire.varint_len(length) + length
                rows.const(_DA, present).varint(body, present).const(head + _DA_STRING, present)
                rows.varint(length, present).blobs(encoded)
                return
            if arr is None:
                rows.blobs([b"" if v is None else self._arg(head, v) for v in items])
                return
        else:
            present = None
        if arr.dtype.kind == "f":
            prefix = _DA + wire.varint(len(head) + 9) + head + _DA_DOUBLE
            rows.const(prefix, present).fixed64(arr.astype(np.float64), present)
        elif arr.dtype.kind == "b":
            prefix = _DA + wire.varint(len(head) + 2) + head + _DA_BOOL
            rows.const(prefix, present).varint(arr.astype(np.uint64), present)
        elif arr.dtype.kind == "u" and arr.size and int(arr.max()) > _TS_MAX:
            rows.blobs([self._arg(head, v) for v in arr.tolist()])
        else:  # int64, two's complement as protobuf int64
            as_u64 = arr.astype(np.int64).view(np.uint64)
            body = len(head) + 1 + wire.varint_len(as_u64)
            rows.const(_DA, present).varint(body, present).const(head + _DA_INT, present)
            rows.varint(as_u64, present)

    def _bad_times(self, what: str, start: object, end: object) -> ValueError:
        return ValueError(
            f"{what}: need 0 <= start_ns <= end_ns < 2**63 (ns on the trace clock), got {start}, {end}"
        )

    def slice(
        self,
        track: int,
        name: str,
        start_ns: int,
        end_ns: int,
        *,
        args: Args | None = None,
        flow_ids: Sequence[int] = (),
        terminating_flow_ids: Sequence[int] = (),
    ) -> None:
        """A slice [start_ns, end_ns] on ``track``; slices on a track nest by time.

        ``flow_ids``: flows that start, or pass through, this slice; Perfetto
        draws an arrow between consecutive slices (in time) sharing a flow id.
        ``terminating_flow_ids``: flows that end here.
        """
        start, end = int(start_ns), int(end_ns)
        if not 0 <= start <= end <= _TS_MAX:
            raise self._bad_times(f"slice {name!r}", start_ns, end_ns)
        begin = self._begin_bodies.get((track, name)) or self._begin_body(track, name)
        if flow_ids or terminating_flow_ids:
            begin += wire.flows(flow_ids, terminating_flow_ids)
        if args:
            begin += self._args(args)
        end_body = self._end_bodies.get(track) or self._end_body_of(track)
        self._start.append(start)
        self._end.append(end)
        self._body.append(begin)
        self._end_body.append(end_body)
        if len(self._start) >= AUTO_FLUSH_EVENTS:
            self.flush()

    def _begin_body(self, track: int, name: str) -> bytes:
        return self._cached_prefix(self._begin_bodies, _BEGIN, track, name)

    def _cached_prefix(self, cache: dict[tuple[int, str], bytes], event_type: bytes, track: int, name: str) -> bytes:
        """:meth:`_event_prefix`, kept in ``cache`` once the name is interned."""
        body = cache.get((track, name))
        if body is None:
            body, once = self._event_prefix(event_type, track, name)
            if body is None:
                return once
            cache[(track, name)] = body
        return body

    def _end_body_of(self, track: int) -> bytes:
        body = self._end_bodies.get(track)
        if body is None:
            self._check_track(track)
            body = self._end_bodies[track] = _END + self._track_field[track]
        return body

    def slices(
        self,
        track: int,
        names: str | Sequence[str],
        starts_ns: Sequence[int] | np.ndarray,
        ends_ns: Sequence[int] | np.ndarray,
        *,
        flow_ids: Sequence[int] | np.ndarray | None = None,
        args: Sequence[Args | None] | Mapping[str, Sequence[ArgValue | None] | np.ndarray] | None = None,
    ) -> None:
        """Many slices on one track at once (e.g. every iteration of a run).

        Same result as calling :meth:`slice` per element, several times faster.
        ``names`` is one name for all or one per slice; ``flow_ids[i]`` (0 = none)
        starts or continues a flow at slice i. ``args`` is either one mapping per
        slice or, faster, columns: ``{"iteration": [...], "kernel_ms": array}``
        (None in a column: no such argument on that slice; a column mixing int
        and float is written as float).
        """
        starts = np.asarray(starts_ns, dtype=np.int64).reshape(-1)
        ends = np.asarray(ends_ns, dtype=np.int64).reshape(-1)
        n = starts.size
        if ends.size != n:
            raise ValueError(f"slices: {n} starts but {ends.size} ends")
        bad = np.flatnonzero((starts < 0) | (ends < starts))
        if bad.size:
            i = int(bad[0])
            raise self._bad_times(f"slices[{i}]", int(starts[i]), int(ends[i]))
        self._check_track(track)
        rows = wire.Rows(n)
        if isinstance(names, str):
            rows.const(self._begin_body(track, names))
        else:
            if len(names) != n:
                raise ValueError(f"slices: {n} starts but {len(names)} names")
            iids = self._name_iids(names)
            inline = iids == 0
            rows.const(_BEGIN + self._track_field[track])
            rows.const(_NAME_IID, ~inline).varint(iids, ~inline)
            encoded = [name.encode() if i == 0 else b"" for name, i in zip(names, iids.tolist())]
            lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=n)
            rows.const(_NAME, inline).varint(lengths, inline).blobs(encoded)
        if flow_ids is not None:
            flows = np.asarray(flow_ids, dtype=np.uint64).reshape(-1)
            if flows.size != n:
                raise ValueError(f"slices: {n} starts but {flows.size} flow ids")
            rows.const(_FLOW, flows != 0).fixed64(flows, flows != 0)
        if isinstance(args, Mapping):
            for key, values in args.items():
                if len(values) != n:
                    raise ValueError(f"slices: {n} starts but {len(values)} values of arg {key!r}")
                self._arg_pieces(rows, key, values)
        elif args is not None:
            if len(args) != n:
                raise ValueError(f"slices: {n} starts but {len(args)} args")
            rows.blobs([self._args(a) if a else b"" for a in args])
        bodies = rows.build()
        self._start.extend(starts.tolist())
        self._end.extend(ends.tolist())
        self._body.extend(bodies)
        self._end_body.extend([self._end_body_of(track)] * n)
        if len(self._start) >= AUTO_FLUSH_EVENTS:
            self.flush()

    def counters(self, track: int, ts_ns: Sequence[int] | np.ndarray, values: Sequence[float] | np.ndarray) -> None:
        """Many values of one counter track at once; see :meth:`counter`."""
        ts = np.asarray(ts_ns, dtype=np.int64).reshape(-1)
        vals = np.asarray(values, dtype=np.float64).reshape(-1)
        if ts.size != vals.size:
            raise ValueError(f"counters: {ts.size} timestamps but {vals.size} values")
        if ts.size and int(ts.min()) < 0:
            raise self._bad_times("counters", int(ts.min()), int(ts.min()))
        prefix = self._counter_prefix(track) + _DOUBLE_COUNTER
        self._start.extend(ts.tolist())
        self._end.extend(ts.tolist())
        self._body.extend([prefix + _PACK_F64(v) for v in vals.tolist()])
        self._end_body.extend([b""] * ts.size)
        if len(self._start) >= AUTO_FLUSH_EVENTS:
            self.flush()

    def _counter_prefix(self, track: int) -> bytes:
        prefix = self._counter_bodies.get(track)
        if prefix is None:
            self._check_track(track, "counter")
            prefix = self._counter_bodies[track] = _COUNTER + self._track_field[track]
        return prefix

    def instant(self, track: int, name: str, ts_ns: int, args: Args | None = None) -> None:
        """A zero-duration marker on ``track``."""
        ts = int(ts_ns)
        if not 0 <= ts <= _TS_MAX:
            raise self._bad_times(f"instant {name!r}", ts_ns, ts_ns)
        body = self._cached_prefix(self._instant_bodies, _INSTANT, track, name)
        if args:
            body += self._args(args)
        self._start.append(ts)
        self._end.append(ts)
        self._body.append(body)
        self._end_body.append(b"")
        if len(self._start) >= AUTO_FLUSH_EVENTS:
            self.flush()

    def counter(self, track: int, ts_ns: int, value: float) -> None:
        """Set a counter track's value from ``ts_ns`` on (a step plot)."""
        ts = int(ts_ns)
        if not 0 <= ts <= _TS_MAX:
            raise self._bad_times("counter", ts_ns, ts_ns)
        prefix = self._counter_bodies.get(track) or self._counter_prefix(track)
        self._start.append(ts)
        self._end.append(ts)
        self._body.append(prefix + _DOUBLE_COUNTER + _PACK_F64(value))
        self._end_body.append(b"")
        if len(self._start) >= AUTO_FLUSH_EVENTS:
            self.flush()

    # --- output -------------------------------------------------------------

    def _header(self) -> bytes:
        """Packets that must precede this flush's events on the sequence."""
        packets = []
        if not self._started:
            snapshot = pb.ClockSnapshot(primary_trace_clock=TRACE_CLOCK_ID)
            for clock_id, posix in (
                (pb.BUILTIN_CLOCK_BOOTTIME, getattr(time, "CLOCK_BOOTTIME", None)),
                (pb.BUILTIN_CLOCK_MONOTONIC, time.CLOCK_MONOTONIC),
                (pb.BUILTIN_CLOCK_REALTIME, time.CLOCK_REALTIME),
            ):
                if posix is not None:
                    snapshot.clocks.add(clock_id=clock_id, timestamp=time.clock_gettime_ns(posix))
            packets.append(
                pb.TracePacket(
                    trusted_packet_sequence_id=self._sequence_id,
                    sequence_flags=_SEQ_CLEARED,
                    first_packet_on_sequence=True,
                    trace_packet_defaults=pb.TracePacketDefaults(timestamp_clock_id=TRACE_CLOCK_ID),
                    clock_snapshot=snapshot,
                )
            )
        for packet in self._pending_descriptors:
            packet.trusted_packet_sequence_id = self._sequence_id
            packet.sequence_flags = _SEQ_NEEDS
            packets.append(packet)
        data = _frame(packets)
        if self._new_event_names or self._new_arg_names:
            # InternedData by hand: a run may intern 100k names ("iter <i>").
            entries = [
                wire.len_field(field, wire.varint_field(1, iid) + wire.len_field(2, name.encode()))
                for field, new in ((_INTERNED_EVENT_NAMES, self._new_event_names),
                                   (_INTERNED_ARG_NAMES, self._new_arg_names))
                for iid, name in new
            ]
            packet = wire.len_field(_PACKET_INTERNED_DATA, b"".join(entries)) + self._tail
            data += wire.len_field(wire.TRACE_PACKET, packet)
        return data

    def _events(self) -> bytes:
        """Pending items as packets, ordered so Perfetto nests slices by time."""
        n = len(self._start)
        start = np.array(self._start, dtype=np.int64)
        end = np.array(self._end, dtype=np.int64)
        is_slice = np.fromiter(map(len, self._end_body), dtype=np.int64, count=n) > 0
        seq = 2 * np.arange(n, dtype=np.int64)
        point = ~is_slice | (start == end)
        slices = np.flatnonzero(is_slice)
        s_start, s_end, s_seq, s_point = start[slices], end[slices], seq[slices], point[slices]
        # Key per event: (ts, group, k1, k2). At one timestamp: group 0 = ends,
        # innermost (latest begin, then latest written) first; group 1 = begins,
        # outermost (latest end, then first written) first; group 2 = instants,
        # counter values and zero-length slices, in write order.
        ts = np.concatenate([start, s_end])
        group = np.concatenate([np.where(point, 2, 1), np.where(s_point, 2, 0)])
        k1 = np.concatenate([np.where(point, 0, -end), np.where(s_point, 0, -s_start)])
        k2 = np.concatenate([seq, np.where(s_point, s_seq + 1, -s_seq)])
        order = np.lexsort((k2, k1, group, ts))
        # Event i < n is item i's first event; n + j is slice j's end event.
        body_index = np.concatenate([np.arange(n), n + slices])[order].tolist()
        bodies = self._body + self._end_body
        ordered = [bodies[body_index[0]]] if len(body_index) == 1 else itemgetter(*body_index)(bodies)
        return wire.assemble(ts[order], ordered, self._tail)

    def flush(self) -> None:
        """Write everything pending as whole packets in one write.

        The write ends with a flush marker (an empty packet) so that
        :func:`~hipdnn_trace.trace.reader.repair` can cut a killed run back to its
        last complete flush: a partial flush would leave slices open that a
        resumed run's slices would then nest under.
        """
        if self._closed:
            raise ValueError(f"{self.path}: trace writer is closed")
        has_events = bool(self._start)
        if not (has_events or self._pending_descriptors or not self._started):
            return
        data = self._header()
        if has_events:
            data += self._events()
        data += wire.len_field(wire.TRACE_PACKET, self._tail)  # flush marker, see wire.is_flush_marker
        self._write_whole(data)
        self._started = True
        self._pending_descriptors = []
        self._new_event_names = []
        self._new_arg_names = []
        for pending in (self._start, self._end, self._body, self._end_body):
            pending.clear()

    def _write_whole(self, data: bytes) -> None:
        """Write one flush, or nothing: a failed write (disk full) is cut off again.

        The file is truncated back to where the flush began, so the trace stays a
        valid prefix without waiting for :func:`repair`; the writer then refuses
        further flushes (:attr:`broken`), since its sequence state is unknown.
        """
        if self.broken is not None:
            raise OSError(self.broken.errno, self.broken.strerror, str(self.path))
        start = self._file.tell()
        try:
            view = memoryview(data)
            while view:
                view = view[self._file.write(view) :]
            if self._fsync:
                os.fsync(self._file.fileno())
        except OSError as exc:
            self.broken = OSError(exc.errno, exc.strerror, str(self.path))
            try:
                os.ftruncate(self._file.fileno(), start)   # frees blocks: works on a full disk
            except OSError:
                pass   # repair() cuts the partial flush off on resume
            raise self.broken from exc

    def discard(self) -> None:
        """Close without writing what is pending (after a failed write); safe to call twice."""
        if not self._closed:
            self._closed = True
            self._file.close()

    def close(self) -> None:
        """Flush and close; safe to call twice."""
        if self._closed:
            return
        if self.broken is not None:
            self.discard()
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._file.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

"""Protobuf wire encoding for the hot path of the trace writer.

Building one ``TracePacket`` message per event with the protobuf library costs
~7 us, too slow for 100k-iteration runs (two events per slice). Track events
differ only in a timestamp and a small ``TrackEvent`` body, so the writer encodes
bodies with the helpers here (mostly cached per track and name) and assembles
whole packets for a flush with numpy. Rare packets (descriptors, interned data,
clock snapshot) still go through ``perfetto_trace_pb2``; tests check that
both encodings parse to the same messages.

Field numbers come from perfetto/protos/perfetto/trace/trace_packet.proto and
track_event/track_event.proto (read from the installed ``perfetto_trace_pb2``).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

_PACK_U64 = struct.Struct("<Q").pack
_PACK_F64 = struct.Struct("<d").pack

# Wire types.
VARINT, I64, LEN = 0, 1, 2

# Field numbers (TracePacket).
PACKET_TIMESTAMP = 8
PACKET_TRACK_EVENT = 11
PACKET_SEQUENCE_ID = 10
PACKET_SEQUENCE_FLAGS = 13
# Trace { repeated TracePacket packet = 1; }
TRACE_PACKET = 1

# TrackEvent.
TE_DEBUG_ANNOTATIONS = 4
TE_TYPE = 9
TE_NAME_IID = 10
TE_TRACK_UUID = 11
TE_DOUBLE_COUNTER_VALUE = 44
TE_FLOW_IDS = 47
TE_TERMINATING_FLOW_IDS = 48

# DebugAnnotation.
DA_NAME_IID = 1
DA_BOOL = 2
DA_UINT = 3
DA_INT = 4
DA_DOUBLE = 5
DA_STRING = 6

_U64_MAX = (1 << 64) - 1


_SMALL = [bytes((v,)) for v in range(0x80)]


def varint(value: int) -> bytes:
    """Base-128 varint of a non-negative int below 2**64."""
    if value < 0x80:
        return _SMALL[value]
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(field: int, wire_type: int) -> bytes:
    return varint((field << 3) | wire_type)


def varint_field(field: int, value: int) -> bytes:
    """A varint field; negative values are two's complement (int64 semantics)."""
    return tag(field, VARINT) + varint(value & _U64_MAX)


def len_field(field: int, payload: bytes) -> bytes:
    return tag(field, LEN) + varint(len(payload)) + payload


def double_field(field: int, value: float) -> bytes:
    return tag(field, I64) + _PACK_F64(value)


_FLOW_TAG = tag(TE_FLOW_IDS, I64)
_TERMINATING_FLOW_TAG = tag(TE_TERMINATING_FLOW_IDS, I64)


def flows(ids: Sequence[int], terminating: Sequence[int]) -> bytes:
    """``flow_ids`` and ``terminating_flow_ids`` (repeated fixed64, unpacked)."""
    if len(ids) == 1 and not terminating:
        return _FLOW_TAG + _PACK_U64(ids[0])
    out = b"".join(_FLOW_TAG + _PACK_U64(i) for i in ids)
    if terminating:
        out += b"".join(_TERMINATING_FLOW_TAG + _PACK_U64(i) for i in terminating)
    return out


def annotation_value(value: object) -> bytes:
    """The typed value field of a ``DebugAnnotation``.

    bool, int, float and str map to their typed fields; anything else (numpy
    scalars included) is converted first, so a slice never fails on its args.
    """
    if isinstance(value, (bool, np.bool_)):
        return varint_field(DA_BOOL, int(bool(value)))
    if isinstance(value, (int, np.integer)):
        v = int(value)
        if -(1 << 63) <= v < (1 << 63):
            return varint_field(DA_INT, v)
        if 0 <= v <= _U64_MAX:
            return varint_field(DA_UINT, v)
        return len_field(DA_STRING, str(v).encode())
    if isinstance(value, (float, np.floating)):
        return double_field(DA_DOUBLE, float(value))
    return len_field(DA_STRING, str(value).encode())


# --- vectorised packet assembly ------------------------------------------------


def varint_len(values: np.ndarray) -> np.ndarray:
    """Bytes each value needs as a varint (1..10); negatives as two's complement."""
    values = np.asarray(values)
    if values.dtype.kind == "i":
        values = values.astype(np.int64).view(np.uint64)
    n = np.ones(values.shape, dtype=np.int64)
    for k in range(1, 10):
        n += values >= np.uint64(1 << (7 * k))
    return n


def _put_varints(buf: np.ndarray, pos: np.ndarray, values: np.ndarray, lens: np.ndarray) -> None:
    for k in range(int(lens.max(initial=1))):
        m = lens > k
        chunk = ((values[m] >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        chunk |= np.where(lens[m] - 1 > k, np.uint8(0x80), np.uint8(0))
        buf[pos[m] + k] = chunk


def _put_const(buf: np.ndarray, pos: np.ndarray, const: bytes) -> None:
    for k, byte in enumerate(const):
        buf[pos + k] = byte


class Rows:
    """Many variable-length byte records built column-wise with numpy.

    Each piece adds, to every row where its mask holds, a constant, a varint,
    a fixed 8-byte value or a row's own bytes. Used for the TrackEvent bodies
    of bulk slices, where per-row Python encoding dominated the write time.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self._pieces: list[tuple[str, object, np.ndarray | None]] = []

    def const(self, data: bytes, mask: np.ndarray | None = None) -> Rows:
        self._pieces.append(("const", data, mask))
        return self

    def varint(self, values: np.ndarray, mask: np.ndarray | None = None) -> Rows:
        self._pieces.append(("varint", np.asarray(values).astype(np.uint64), mask))
        return self

    def fixed64(self, values: np.ndarray, mask: np.ndarray | None = None) -> Rows:
        """Little-endian 8-byte values (uint64, int64 or float64 arrays)."""
        values = np.ascontiguousarray(values)
        assert values.dtype.itemsize == 8
        self._pieces.append(("fixed64", values.astype(values.dtype.newbyteorder("<")), mask))
        return self

    def blobs(self, items: Sequence[bytes]) -> Rows:
        """Each row's own bytes (b"" to add nothing)."""
        self._pieces.append(("blobs", items, None))
        return self

    def build(self) -> list[bytes]:
        n = self.n
        lens = []
        for kind, data, mask in self._pieces:
            if kind == "const":
                length = np.full(n, len(data), dtype=np.int64)
            elif kind == "varint":
                length = varint_len(data)
            elif kind == "fixed64":
                length = np.full(n, 8, dtype=np.int64)
            else:
                length = np.fromiter(map(len, data), dtype=np.int64, count=n)
            lens.append(length if mask is None else np.where(mask, length, 0))
        row_len = np.sum(lens, axis=0) if lens else np.zeros(n, dtype=np.int64)
        row_end = np.cumsum(row_len)
        row_start = row_end - row_len
        buf = np.empty(int(row_end[-1]) if n else 0, dtype=np.uint8)
        pos = row_start.copy()
        for (kind, data, mask), length in zip(self._pieces, lens):
            rows = np.flatnonzero(mask) if mask is not None else slice(None)
            p = pos[rows]
            if kind == "const":
                _put_const(buf, p, data)
            elif kind == "varint":
                _put_varints(buf, p, data[rows], length[rows])
            elif kind == "fixed64":
                buf[p[:, None] + np.arange(8)] = data[rows].view(np.uint8).reshape(-1, 8)
            else:
                joined = np.frombuffer(b"".join(data), dtype=np.uint8)
                src_start = np.cumsum(length) - length
                buf[np.repeat(pos - src_start, length) + np.arange(joined.size)] = joined
            pos += length
        data = buf.tobytes()
        return [data[a:b] for a, b in zip(row_start.tolist(), row_end.tolist())]


def assemble(timestamps: np.ndarray, bodies: Sequence[bytes], tail: bytes) -> bytes:
    """Frame track events as ``Trace.packet`` entries, in the given order.

    Packet i is ``{timestamp: timestamps[i], track_event: bodies[i]}`` followed by
    ``tail`` (already-encoded packet fields shared by every event: sequence id
    and flags). Equivalent to serialising a ``Trace`` of those packets.
    """
    n = len(bodies)
    if n == 0:
        return b""
    ts = np.asarray(timestamps, dtype=np.uint64)
    te_len = np.fromiter(map(len, bodies), dtype=np.int64, count=n)
    ts_vl = varint_len(ts)
    te_vl = varint_len(te_len.astype(np.uint64))
    body_len = 1 + ts_vl + 1 + te_vl + te_len + len(tail)
    body_vl = varint_len(body_len.astype(np.uint64))
    packet_len = 1 + body_vl + body_len
    start = np.cumsum(packet_len) - packet_len
    buf = np.empty(int(packet_len.sum()), dtype=np.uint8)

    buf[start] = 0x0A  # Trace.packet, length-delimited
    _put_varints(buf, start + 1, body_len.astype(np.uint64), body_vl)
    pos = start + 1 + body_vl
    buf[pos] = (PACKET_TIMESTAMP << 3) | VARINT
    _put_varints(buf, pos + 1, ts, ts_vl)
    pos = pos + 1 + ts_vl
    buf[pos] = (PACKET_TRACK_EVENT << 3) | LEN
    _put_varints(buf, pos + 1, te_len.astype(np.uint64), te_vl)
    pos = pos + 1 + te_vl
    joined = np.frombuffer(b"".join(bodies), dtype=np.uint8)
    src_start = np.cumsum(te_len) - te_len
    buf[np.repeat(pos - src_start, te_len) + np.arange(joined.size)] = joined
    _put_const(buf, pos + te_len, tail)
    return buf.tobytes()


def is_flush_marker(packet: bytes | memoryview) -> bool:
    """True for the writer's end-of-flush packet: only sequence id and flags.

    An empty packet carries no data for Perfetto (it is sorted and ignored),
    so the writer uses one to mark that everything before it is complete.
    """
    if not 2 <= len(packet) <= 10 or packet[0] != (PACKET_SEQUENCE_ID << 3) | VARINT:
        return False
    p = 1
    while p < len(packet) and packet[p] & 0x80:
        p += 1
    p += 1
    return len(packet) == p + 2 and packet[p] == (PACKET_SEQUENCE_FLAGS << 3) | VARINT and packet[p + 1] < 0x80

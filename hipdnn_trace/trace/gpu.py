"""Profiler frames -> GPU tracks of a run's trace.

Kernels (``results.schemas.KERNELS``, from CUPTI, rocprofv3 or ncu) become
slices on one track per device and stream, grouped under "GPU <device>".
Per-kernel counters (``COUNTERS``) become one counter track per device and
counter name, holding the value while its kernel runs and 0 in between.
Timestamps must already be on the trace clock (CLOCK_BOOTTIME ns): the
profiler parsers convert them.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from hipdnn_trace.errors import UserError
from hipdnn_trace.results.schemas import COUNTERS, KERNELS, KEY, conform
from hipdnn_trace.trace.writer import TraceWriter

_JOIN = [*KEY, "source", "correlation_id"]


def _timed_kernels(kernels: pl.DataFrame) -> pl.DataFrame:
    """Kernels with usable start/end, device and stream defaulted to 0."""
    missing = {"name", "start_ns", "end_ns"} - set(kernels.columns)
    if missing:
        raise UserError(f"kernels frame: missing column(s) {', '.join(sorted(missing))}")
    return (
        conform(kernels, KERNELS)
        .filter(pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null())
        .filter(pl.col("end_ns") >= pl.col("start_ns"))
        .with_columns(pl.col("device").fill_null(0), pl.col("stream").fill_null(0))
    )


def _lanes(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Lane per kernel (sorted by start) so no two kernels in a lane overlap.

    Kernels of one stream run one after another, but profiler clocks can make
    neighbours overlap by a few ns; Perfetto requires slices on a track to
    nest, so an overlapping kernel goes to a sibling track instead of being
    moved in time.
    """
    if start.size < 2 or bool(np.all(start[1:] >= end[:-1])):
        return np.zeros(start.size, dtype=np.int64)
    lane_end: list[int] = []
    lanes = np.empty(start.size, dtype=np.int64)
    for i, (s, e) in enumerate(zip(start.tolist(), end.tolist())):
        for lane, busy_until in enumerate(lane_end):
            if s >= busy_until:
                break
        else:
            lane = len(lane_end)
            lane_end.append(0)
        lane_end[lane] = e
        lanes[i] = lane
    return lanes


def _dims(x: object, y: object, z: object) -> str | None:
    if x is None:
        return None
    return f"{x}x{1 if y is None else y}x{1 if z is None else z}"


def add_kernels(
    writer: TraceWriter, kernels: pl.DataFrame, *, flows_from: Mapping[int, int] | None = None
) -> int:
    """Write kernels as slices on their device/stream tracks; returns how many.

    Slice args: grid, block, correlation_id, iteration, source. Kernels without
    start/end (e.g. ncu replay) are skipped. ``flows_from`` maps an iteration
    to the flow id its host slice carries (``flow_ids=[id]``); that iteration's
    kernels carry it too, so Perfetto draws host slice -> first kernel -> next
    kernel ... in time order. Pass one graph's kernels with that graph's map:
    iteration numbers restart with every graph.
    """
    frame = _timed_kernels(kernels).sort("device", "stream", "start_ns", "end_ns")
    written = 0
    for (device, stream), group in frame.group_by(["device", "stream"], maintain_order=True):
        start = group["start_ns"].to_numpy()
        end = group["end_ns"].to_numpy()
        lanes = _lanes(start, end)
        rows = group.select(
            "name", "iteration", "correlation_id", "source",
            "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
        ).rows()  # fmt: skip
        args = [
            {
                "grid": _dims(gx, gy, gz),
                "block": _dims(bx, by, bz),
                "correlation_id": corr,
                "iteration": it,
                "source": src,
            }
            for _, it, corr, src, gx, gy, gz, bx, by, bz in rows
        ]
        names = [r[0] or "<unnamed kernel>" for r in rows]
        flows = [flows_from.get(r[1], 0) if r[1] is not None else 0 for r in rows] if flows_from else None
        for lane in np.unique(lanes).tolist():
            idx = np.flatnonzero(lanes == lane).tolist()
            name = f"stream {stream}" if lane == 0 else f"stream {stream} (overlap {lane})"
            track = writer.device_track(int(device), int(stream), name)
            writer.slices(
                track,
                [names[i] for i in idx],
                start[idx],
                end[idx],
                flow_ids=[flows[i] for i in idx] if flows else None,
                args=[args[i] for i in idx],
            )
            written += len(idx)
    return written


def _join_key(df: pl.DataFrame) -> pl.DataFrame:
    """Join columns as non-null strings: ``KEY`` columns are null outside a run."""
    return df.with_columns(pl.col(c).cast(pl.String).fill_null("") for c in _JOIN)


def add_counters(writer: TraceWriter, counters: pl.DataFrame, kernels: pl.DataFrame) -> int:
    """Write per-kernel counters as counter tracks under "GPU <device>".

    Counters carry no time of their own: each row is placed on the kernel with
    the same correlation_id, source and run keys (``KEY``). The track holds the
    value from the kernel's start and drops to 0 at its end, unless the next
    kernel with that counter has already started. Returns the number of
    counter rows placed; rows without a timed kernel are skipped.
    """
    missing = {"counter", "value", "correlation_id"} - set(counters.columns)
    if missing:
        raise UserError(f"counters frame: missing column(s) {', '.join(sorted(missing))}")
    timed = _join_key(_timed_kernels(kernels)).select(*_JOIN, "device", "start_ns", "end_ns")
    timed = timed.unique(subset=_JOIN, keep="first", maintain_order=True)
    placed = (
        _join_key(conform(counters, COUNTERS))
        .filter(pl.col("counter").is_not_null() & pl.col("value").is_not_null())
        .join(timed, on=_JOIN, how="inner")
        .sort("device", "counter", "start_ns", "end_ns")
    )
    for (device, name), group in placed.group_by(["device", "counter"], maintain_order=True):
        units = group["unit"].drop_nulls()
        track = writer.counter_track(
            str(name), unit=units[0] if units.len() else None, parent=writer.gpu_track(int(device))
        )
        start = group["start_ns"].to_numpy()
        end = group["end_ns"].to_numpy()
        value = group["value"].to_numpy().astype(np.float64)
        reset = np.append(end[:-1] < start[1:], True)
        ts = np.concatenate([start, end[reset]])
        vals = np.concatenate([value, np.zeros(int(reset.sum()))])
        # Value at i's start, then its reset; stable sort keeps a reset before
        # a value at the same time.
        seq = np.concatenate([2 * np.arange(start.size), 2 * np.flatnonzero(reset) + 1])
        order = np.lexsort((seq, ts))
        writer.counters(track, ts[order], vals[order])
    return placed.height

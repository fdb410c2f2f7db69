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
        for lane, busy_until in enumerate(lane_end):  # noqa: B007 - the lane found is used after the loop
            if s >= busy_until:
                break
        else:
            lane = len(lane_end)
            lane_end.append(0)
        lane_end[lane] = e
        lanes[i] = lane
    return lanes


def _dims(prefix: str) -> pl.Expr:
    """"64x2x1" from <prefix>_x/_y/_z (missing y, z count as 1); null without x."""
    x, y, z = (pl.col(f"{prefix}_{axis}") for axis in "xyz")
    return (
        pl.when(x.is_not_null())
        .then(pl.concat_str([x, pl.lit("x"), y.fill_null(1), pl.lit("x"), z.fill_null(1)]))
        .otherwise(None)
    )


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
    frame = (
        _timed_kernels(kernels)
        .sort("device", "stream", "start_ns", "end_ns")
        .with_columns(_dims("grid").alias("_grid"), _dims("block").alias("_block"))
    )
    written = 0
    for (device, stream), group in frame.group_by(["device", "stream"], maintain_order=True):
        start = group["start_ns"].to_numpy()
        end = group["end_ns"].to_numpy()
        lanes = _lanes(start, end)
        names = group["name"].fill_null("<unnamed kernel>").to_list()
        columns = {
            key: (series.to_numpy() if series.null_count() == 0 and series.dtype.is_integer() else series.to_list())
            for key, series in (
                ("grid", group["_grid"]),
                ("block", group["_block"]),
                ("correlation_id", group["correlation_id"]),
                ("iteration", group["iteration"]),
                ("source", group["source"]),
            )
        }
        flows = None
        if flows_from:
            known = pl.DataFrame(
                {"iteration": list(flows_from), "_flow": list(flows_from.values())},
                schema={"iteration": pl.Int64(), "_flow": pl.UInt64()},
            )
            flows = group.select("iteration").join(known, on="iteration", how="left", maintain_order="left")
            flows = flows["_flow"].fill_null(0).to_numpy()
        for lane in np.unique(lanes).tolist():
            name = f"stream {stream}" if lane == 0 else f"stream {stream} (overlap {lane})"
            track = writer.device_track(int(device), int(stream), name)
            if lane == 0 and lanes.max() == 0:  # the usual case: no overlap, no picking
                writer.slices(track, names, start, end, flow_ids=flows, args=columns)
                written += len(names)
                continue
            idx = np.flatnonzero(lanes == lane)
            pick = idx.tolist()
            writer.slices(
                track,
                [names[i] for i in pick],
                start[idx],
                end[idx],
                flow_ids=flows[idx] if flows is not None else None,
                args={k: (v[idx] if isinstance(v, np.ndarray) else [v[i] for i in pick]) for k, v in columns.items()},
            )
            written += idx.size
    return written


def _join_key(df: pl.DataFrame) -> pl.DataFrame:
    """Join columns as non-null strings: ``KEY`` columns are null outside a run."""
    return df.with_columns(pl.col(c).cast(pl.String).fill_null("") for c in _JOIN)


#: above this many counters on one GPU, counter tracks are grouped per hardware block
#: (a rocprof-compute capture has thousands: one flat list is unreadable)
GROUP_COUNTERS_ABOVE = 16


def counter_block(name: str) -> str:
    """The hardware block of a raw counter name (SQ_WAVES -> SQ, TCC_HIT[3] -> TCC), else "other"."""
    head = name.split("[", 1)[0]
    return head.split("_", 1)[0] if "_" in head else "other"


def counter_unit(name: str) -> str:
    """A unit for a counter its profiler gave none: cycles or bytes where the name says so, else a count."""
    upper = name.upper()
    if "CYCLE" in upper:
        return "cycles"
    if "BYTE" in upper:
        return "bytes"
    return "count"


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
        _join_key(conform(counters, COUNTERS).select(list(COUNTERS)))   # profiler extras (own times) dropped
        .filter(pl.col("counter").is_not_null() & pl.col("value").is_not_null())
        .join(timed, on=_JOIN, how="inner")
        .sort("device", "counter", "start_ns", "end_ns")
    )
    per_device = dict(placed.group_by("device").agg(pl.col("counter").n_unique()).iter_rows())
    for (device, name), group in placed.group_by(["device", "counter"], maintain_order=True):
        units = group["unit"].drop_nulls()
        parent = writer.gpu_track(int(device))
        if per_device[device] > GROUP_COUNTERS_ABOVE:   # hundreds of raw counters: one folder per block
            parent = writer.group_track(f"counters {counter_block(str(name))}", parent)
        track = writer.counter_track(
            str(name), unit=units[0] if units.len() else counter_unit(str(name)), parent=parent
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

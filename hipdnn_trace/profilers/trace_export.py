"""Profiler frames -> a Perfetto trace, through the project's trace writer.

Kernels and counters go through :mod:`hipdnn_trace.results.timeline` (device/stream tracks,
counter tracks under "GPU <n>"); roctx ranges become slices on one thread track per
profiled (pid, tid), so a user sees the harness phases of an ingested capture above its
kernels, all on the profiler's clock (rocprofv3 stamps CLOCK_BOOTTIME ns, the trace clock).

``add_counters`` places a counter on the kernel with the same correlation id; rocprofv3
correlation ids restart in every pass (a new process) and legacy files have none, so the
placement key given to it is a per-(capture, pass, device, dispatch) number instead.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from hipdnn_trace.results.schemas import COUNTERS, KERNELS
from hipdnn_trace.results.timeline import add_counters, add_kernels
from hipdnn_trace.trace.writer import TraceWriter


def _placement_key(frame: pl.DataFrame, ident: pl.Expr) -> pl.Expr:
    parts = [pl.col(c).cast(pl.String).fill_null("") for c in ("capture", "pass", "device") if c in frame.columns]
    return pl.concat_str([*parts, ident.cast(pl.String).fill_null("")], separator="|")


def _with_dispatch_keys(kernels: pl.DataFrame, counters: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Replace correlation_id by a dense id of (capture, pass, device, dispatch) in both frames."""
    ident = pl.coalesce("dispatch_id", "correlation_id")
    keyed = [frame.with_columns(_placement_key(frame, ident).alias("k")) for frame in (kernels, counters)]
    ids = pl.concat([frame.select("k") for frame in keyed]).unique(maintain_order=True).with_row_index("id")
    k, c = (frame.join(ids, on="k", how="left").with_columns(pl.col("id").cast(pl.Int64).alias("correlation_id"))
            .drop("k", "id") for frame in keyed)
    return k, c


def _nest_lanes(start: list[int], end: list[int]) -> list[int]:
    """Lane per range (sorted by start, longest first) so ranges in a lane nest properly."""
    lanes: list[list[int]] = []  # per lane: stack of open range ends
    out = []
    for s, e in zip(start, end):
        for i, stack in enumerate(lanes):
            while stack and stack[-1] <= s:
                stack.pop()
            if not stack or e <= stack[-1]:
                stack.append(e)
                out.append(i)
                break
        else:
            lanes.append([e])
            out.append(len(lanes) - 1)
    return out


def add_markers(writer: TraceWriter, markers: pl.DataFrame) -> int:
    """roctx ranges/marks as slices on "<capture> pid <pid>" / "tid <tid>" tracks."""
    if markers.is_empty():
        return 0
    m = markers.filter(pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null()
                       & (pl.col("end_ns") >= pl.col("start_ns")))
    if "capture" not in m.columns:
        m = m.with_columns(pl.lit(None, dtype=pl.String).alias("capture"))
    m = m.with_columns(pl.col("process_id").fill_null(0), pl.col("thread_id").fill_null(0))
    written = 0
    for (capture, pid, tid), group in m.sort("start_ns", -pl.col("end_ns")).group_by(
        ["capture", "process_id", "thread_id"], maintain_order=True
    ):
        proc = writer.process_track(f"profiled {capture or ''} pid {pid}".replace("  ", " "), pid=int(pid))
        start, end = group["start_ns"].to_list(), group["end_ns"].to_list()
        names = [n or "<unnamed range>" for n in group["name"].to_list()]
        lanes = _nest_lanes(start, end)
        for lane in sorted(set(lanes)):
            idx = [i for i, at in enumerate(lanes) if at == lane]
            # Ranges that do not nest (process ranges, several threads' ranges under tid 0) go
            # to extra tracks; only those get a synthetic tid.
            track = writer.thread_track(f"roctx tid {tid}" + (f" ({lane})" if lane else ""), proc,
                                        tid=int(tid) if lane == 0 else int(tid) * 1000 + lane)
            writer.slices(track, [names[i] for i in idx], np.array([start[i] for i in idx]),
                          np.array([end[i] for i in idx]))
            written += len(idx)
    return written


def add_memory(writer: TraceWriter, memory: pl.DataFrame) -> int:
    """Memory copies, allocations and scratch events as slices: one process-like group per capture
    ("profiled <capture> memory"), one track per kind, events overlapping in time on extra lanes."""
    if memory.is_empty():
        return 0
    m = memory.filter(pl.col("start_ns").is_not_null() & pl.col("end_ns").is_not_null()
                      & (pl.col("end_ns") >= pl.col("start_ns")) & (pl.col("start_ns") >= 0))
    written = 0
    for c, (capture, by_capture) in enumerate(m.sort("start_ns", -pl.col("end_ns")).group_by(
            "capture", maintain_order=True)):
        label = capture[0] if isinstance(capture, tuple) else capture
        root = writer.process_track(f"profiled {label} memory" if label not in (None, ".") else "profiled memory",
                                    pid=MEMORY_PID_BASE + c)
        for k, (kind, group) in enumerate(by_capture.group_by("kind", maintain_order=True)):
            kind_name = str(kind[0] if isinstance(kind, tuple) else kind)
            start, end = group["start_ns"].to_list(), group["end_ns"].to_list()
            names = [(op or kind_name).removeprefix("MEMORY_COPY_").removeprefix("MEMORY_ALLOCATION_")
                     for op in group["operation"].to_list()]
            sizes = group["size_bytes"].to_list()
            lanes = _nest_lanes(start, end)
            for lane in sorted(set(lanes)):
                track = writer.thread_track(kind_name.lower().replace("_", " ") + (f" ({lane})" if lane else ""),
                                            root, tid=MEMORY_PID_BASE + 100 * k + lane)
                for i in (i for i, at in enumerate(lanes) if at == lane):
                    writer.slice(track, names[i], start[i], end[i],
                                 args={"bytes": sizes[i]} if sizes[i] is not None else None)
                    written += 1
    return written


#: synthetic pids/tids of the memory tracks (far from real process ids)
MEMORY_PID_BASE = 900_000_000


def write_trace(path: Path, kernels: pl.DataFrame, counters: pl.DataFrame, markers: pl.DataFrame,
                memory: pl.DataFrame | None = None) -> None:
    with TraceWriter(path) as writer:
        add_markers(writer, markers)
        if memory is not None:
            add_memory(writer, memory)
        add_kernels(writer, kernels)
        if counters.height and kernels.height:
            k, c = _with_dispatch_keys(kernels, counters)
            # Only the schema's columns: add_counters takes time from the kernel it joins.
            add_counters(writer, c.select(COUNTERS.keys()), k.select(KERNELS.keys()))

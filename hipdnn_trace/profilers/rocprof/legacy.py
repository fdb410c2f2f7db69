"""Older AMD formats: rocprof v1 results, wide per-dispatch counter CSVs, rocprof v1 .db.

* rocprof v1 ``results.csv`` (``Index,KernelName,gpu-id,queue-id,...,sig,obj``) followed
  by one column per ``pmc:`` counter and, with ``--timestamp on`` or a plain trace,
  ``DispatchNs,BeginNs,EndNs,CompleteNs[,DurationNs]``. Omniperf 1.x keeps this header.
* wide per-dispatch CSVs of rocprofv2's file plugin and rocprof-compute (``Dispatch_ID,
  GPU_ID,...,Kernel_Name,Start_Timestamp,End_Timestamp,Correlation_ID,Kernel_ID,<counters>``);
  merged ``pmc_perf.csv`` repeats metadata columns with ``_N`` suffixes and per-channel
  counters as ``TCC_HIT[3]``.
* rocprof v1 ``results.db`` (tables KERN or OPS, HIP, rocTX; written by ``sqlitedb.py``).

Legacy names carry code-object suffixes (``.kd``, `` [clone .kd]``); they are dropped so
names compare with rocprofv3's.
"""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path

import polars as pl

from hipdnn_trace.profilers.rocprof.frames import (
    API,
    COUNTERS_FULL,
    KERNELS_FULL,
    MARKERS,
    columns_frame,
    durations,
)
from hipdnn_trace.profilers.rocprof.rocpd_sqlite import bounded_query, connect, object_names
from hipdnn_trace.profilers.rocprof.table import ProfileFormatError, Table, read_table
from hipdnn_trace.results.schemas import conform

#: rocprof v1 per-dispatch metadata columns (lower-case), rpl_run.sh / tblextr.py output.
V1_META = {
    "index", "kernelname", "gpu-id", "queue-id", "queue-index", "pid", "tid", "grd", "wgr",
    "lds", "scr", "vgpr", "arch_vgpr", "accum_vgpr", "sgpr", "fbar", "wave_size", "sig", "obj",
    "dispatchns", "beginns", "endns", "completens", "durationns",
}
#: rocprofv2 file-plugin / rocprof-compute per-dispatch metadata columns.
WIDE_META = {
    "dispatch_id", "gpu_id", "queue_id", "queue-id", "queue-index", "pid", "tid", "grid_size",
    "workgroup_size", "lds_per_workgroup", "scratch_per_workitem", "arch_vgpr", "accum_vgpr",
    "sgpr", "wave_size", "kernel_name", "start_timestamp", "end_timestamp", "correlation_id",
    "kernel_id", "obj", "sig", "xcc_index", "node", "dispatchns", "beginns", "endns", "completens",
}
_SUFFIXED = re.compile(r"^(.*)_(\d+)$")
_NAME_SUFFIXES = (" [clone .kd]", " (.kd)", ".kd")


def clean_kernel_name(name: str | None) -> str | None:
    """Strip quotes and the code-object suffix legacy tools append to kernel names."""
    if name is None:
        return None
    s = name.strip()
    if len(s) >= 2 and s[0] == s[-1] == '"':
        s = s[1:-1]
    for suffix in _NAME_SUFFIXES:
        if s.endswith(suffix):
            return s[: -len(suffix)]
    return s


def is_v1_results(names: set[str]) -> bool:
    return {"index", "kernelname", "gpu-id"} <= names


def is_wide(names: set[str]) -> bool:
    return {"dispatch_id", "kernel_name", "gpu_id"} <= names and "counter_name" not in names


def _meta(name: str, meta: set[str]) -> bool:
    low = name.strip().lower()
    if low in meta:
        return True
    m = _SUFFIXED.match(low)
    return bool(m and m.group(1) in meta)


def counter_columns(table: Table, meta: set[str]) -> list[int]:
    return [i for i, name in enumerate(table.header) if not _meta(name, meta)]


def read_v1_results(path: Path, table: Table | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """rocprof v1 results CSV -> (kernels, counters). Either may be empty."""
    table = table or read_table(path)
    if not is_v1_results(table.names):
        raise ProfileFormatError(f"{path}: not a rocprof v1 results file (needs Index,KernelName,gpu-id)")
    names = [clean_kernel_name(n) for n in table.strings("KernelName", required=True)]
    index = table.ints("Index", required=True)
    device = table.ints("gpu-id")
    kernels = pl.DataFrame(schema=KERNELS_FULL)
    if table.has("beginns", "endns"):
        start, end = table.ints("BeginNs"), table.ints("EndNs")
        kernels = columns_frame(
            {
                "name": names,
                "start_ns": start,
                "end_ns": end,
                "duration_ns": durations(start, end),
                "grid_x": table.ints("grd"),
                "block_x": table.ints("wgr"),
                "stream": table.ints("queue-id"),
                "device": device,
                "source": ["rocprof"] * len(names),
                "dispatch_id": index,
                "queue": table.ints("queue-id"),
                "thread_id": table.ints("tid"),
                "process_id": table.ints("pid"),
            },
            KERNELS_FULL,
        )
    counters = _wide_counters(
        table,
        counter_columns(table, V1_META),
        kernel=names,
        dispatch=index,
        device=device,
        start=table.ints("BeginNs"),
        end=table.ints("EndNs"),
        thread=table.ints("tid"),
        process=table.ints("pid"),
        correlation=[None] * len(names),
        source="rocprof",
    )
    return kernels, counters


def read_wide(path: Path, table: Table | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """rocprofv2 / rocprof-compute wide per-dispatch CSV -> (kernels, counters)."""
    table = table or read_table(path)
    if not is_wide(table.names):
        raise ProfileFormatError(f"{path}: not a per-dispatch counter file (needs Dispatch_ID,Kernel_Name,GPU_ID)")
    source = "rocprofv2" if table.has("queue_id", "pid", "tid") else "rocprof-compute"
    names = [clean_kernel_name(n) for n in table.strings("Kernel_Name", required=True)]
    dispatch = table.ints("Dispatch_ID", required=True)
    device = table.ints("GPU_ID")
    start, end = table.interval(("Start_Timestamp", "BeginNs"), ("End_Timestamp", "EndNs"))
    correlation = table.ints("Correlation_ID")
    kernels = pl.DataFrame(schema=KERNELS_FULL)
    if any(s is not None for s in start):
        kernels = columns_frame(
            {
                "name": names,
                "start_ns": start,
                "end_ns": end,
                "duration_ns": durations(start, end),
                "grid_x": table.ints("Grid_Size"),
                "block_x": table.ints("Workgroup_Size"),
                "stream": table.ints("Queue_ID", "queue-id"),
                "device": device,
                "correlation_id": correlation,
                "source": [source] * len(names),
                "dispatch_id": dispatch,
                "kernel_id": table.ints("Kernel_ID"),
                "queue": table.ints("Queue_ID", "queue-id"),
                "thread_id": table.ints("TID"),
                "process_id": table.ints("PID"),
            },
            KERNELS_FULL,
        )
    columns, rename = waves_accumulator(table.header, counter_columns(table, WIDE_META))
    counters = _wide_counters(
        table,
        columns,
        rename=rename,
        kernel=names,
        dispatch=dispatch,
        device=device,
        start=start,
        end=end,
        thread=table.ints("TID"),
        process=table.ints("PID"),
        correlation=correlation,
        source=source,
    )
    return kernels, counters


_ACCUM = re.compile(r"^SQ_ACCUM_PREV_HIRES(?:_\d+)?$")
_PASS_START = re.compile(r"^Kernel_ID(?:_\d+)?$")


def waves_accumulator(header: list[str], columns: list[int]) -> tuple[list[int], dict[int, str]]:
    """Keep ``SQ_ACCUM_PREV_HIRES`` only where it accumulated ``SQ_LEVEL_WAVES``.

    The accumulator sums whichever ``*_LEVEL*`` counter shares its pass, so in a
    rocprof-compute merged ``pmc_perf.csv`` (one ``Kernel_ID[_n]`` column opens each pass)
    or a single-pass ``SQ_IFETCH_LEVEL.csv`` it means different things. rocprof-compute's
    Wavefront Occupancy reads it only beside ``SQ_LEVEL_WAVES`` (coll_level SQ_LEVEL_WAVES,
    analysis_configs/gfx942/0200_system_speed_of_light.yaml:243); so do we: that column is
    named ``SQ_ACCUM_PREV_HIRES``, the others are dropped.
    """
    group, groups = 0, {}
    for i, name in enumerate(header):
        group += bool(_PASS_START.match(name)) and i > 0 and any(_PASS_START.match(h) for h in header[:i])
        groups[i] = group
    waves_groups = {groups[i] for i, name in enumerate(header) if name == "SQ_LEVEL_WAVES"}
    kept, rename = [], {}
    for c in columns:
        if _ACCUM.match(header[c]):
            if groups[c] not in waves_groups:
                continue
            rename[c] = "SQ_ACCUM_PREV_HIRES"
        kept.append(c)
    return kept, rename


def _wide_counters(
    table: Table,
    columns: list[int],
    *,
    kernel: list,
    dispatch: list,
    device: list,
    start: list,
    end: list,
    thread: list,
    process: list,
    correlation: list,
    source: str,
    rename: dict[int, str] | None = None,
) -> pl.DataFrame:
    """One long row per (dispatch, counter column); empty cells are skipped."""
    if not columns or not table.rows:
        return pl.DataFrame(schema=COUNTERS_FULL)
    names = [(rename or {}).get(c, table.header[c]) for c in columns]
    cells = pl.DataFrame(
        {f"c{j}": [row[c] for row in table.rows] for j, c in enumerate(columns)},
        schema={f"c{j}": pl.String for j in range(len(columns))},
    ).with_row_index("_row")
    long = cells.unpivot(index="_row", variable_name="_col", value_name="_text").with_columns(
        pl.col("_text").str.strip_chars()
    ).filter(pl.col("_text") != "")
    long = long.with_columns(pl.col("_text").cast(pl.Float64, strict=False).alias("value"))
    bad = long.filter(pl.col("value").is_null())
    if bad.height:
        r, col, text = bad.row(0)[0], int(bad.row(0)[1][1:]), bad.row(0)[2]
        raise ProfileFormatError(f"{table.where(r, columns[col])}: counter value is not a number: {text!r}")
    meta = pl.DataFrame(
        {
            "kernel": pl.Series(kernel, dtype=pl.String),
            "correlation_id": pl.Series(correlation, dtype=pl.Int64),
            "dispatch_id": pl.Series(dispatch, dtype=pl.Int64),
            "device": pl.Series(device, dtype=pl.Int64),
            "thread_id": pl.Series(thread, dtype=pl.Int64),
            "process_id": pl.Series(process, dtype=pl.Int64),
            "start_ns": pl.Series(start, dtype=pl.Int64),
            "end_ns": pl.Series(end, dtype=pl.Int64),
        }
    ).with_row_index("_row")
    counter_names = pl.DataFrame({"_col": [f"c{j}" for j in range(len(columns))], "counter": names})
    out = (
        long.join(meta, on="_row", how="left")
        .join(counter_names, on="_col", how="left")
        .sort("_row", maintain_order=True)
        .with_columns(pl.lit(source).alias("source"))
    )
    return conform(out.select([c for c in COUNTERS_FULL if c in out.columns]), COUNTERS_FULL)


def is_v1_db(names: set[str]) -> bool:
    return bool(names & {"KERN", "OPS"}) and "rocpd_metadata" not in names


def read_v1_db(path: Path) -> dict[str, pl.DataFrame]:
    """rocprof v1 ``results.db``: kernels from KERN (kernel trace) or OPS (``--sys-trace``)."""
    with closing(connect(path)) as con:
        names = object_names(con)
        if not is_v1_db(names):
            raise ProfileFormatError(f"{path}: SQLite file is neither rocpd nor a rocprof v1 results.db")
        kernels = _v1_kern(con, path) if "KERN" in names else pl.DataFrame(schema=KERNELS_FULL)
        if kernels.is_empty() and "OPS" in names:
            kernels = _v1_ops(con, path)
        markers = _v1_roctx(con, path) if "rocTX" in names else pl.DataFrame(schema=MARKERS)
        api = _v1_hip(con, path) if "HIP" in names else pl.DataFrame(schema=API)
    return {"kernels": kernels, "markers": markers, "api": api}


def _rows(con: sqlite3.Connection, path: Path, sql: str) -> dict[str, list]:
    """Through rocpd_sqlite's bounded query: the same time, row, size and memory caps."""
    cols, rows = bounded_query(con, path, sql)
    return {c.lower(): [r[i] for r in rows] for i, c in enumerate(cols)}


def _v1_kern(con: sqlite3.Connection, path: Path) -> pl.DataFrame:
    c = _rows(con, path, 'select * from "KERN"')
    if "beginns" not in c:
        return pl.DataFrame(schema=KERNELS_FULL)
    start, end = c["beginns"], c.get("endns", [])
    return columns_frame(
        {
            "name": [clean_kernel_name(n) for n in c.get("kernelname", [])],
            "start_ns": start,
            "end_ns": end,
            "duration_ns": durations(start, end),
            "grid_x": c.get("grd"),
            "block_x": c.get("wgr"),
            "stream": c.get("queue-id"),
            "device": c.get("gpu-id"),
            "source": ["rocprof"] * len(start),
            "dispatch_id": c.get("index"),
            "queue": c.get("queue-id"),
            "thread_id": c.get("tid"),
            "process_id": c.get("pid"),
        },
        KERNELS_FULL,
    )


def _v1_ops(con: sqlite3.Connection, path: Path) -> pl.DataFrame:
    c = _rows(con, path, 'select * from "OPS"')
    start, end = c.get("beginns", []), c.get("endns", [])
    return columns_frame(
        {
            "name": [clean_kernel_name(n) for n in c.get("name", [])],
            "start_ns": start,
            "end_ns": end,
            "duration_ns": durations(start, end),
            "stream": c.get("stream-id") or c.get("queue-id"),
            "device": c.get("dev-id"),
            "source": ["rocprof"] * len(start),
            "dispatch_id": c.get("index"),
            "queue": c.get("queue-id"),
            "thread_id": c.get("tid"),
            "process_id": c.get("pid"),
        },
        KERNELS_FULL,
    )


def _v1_roctx(con: sqlite3.Connection, path: Path) -> pl.DataFrame:
    c = _rows(con, path, 'select * from "rocTX"')
    return columns_frame(
        {
            "name": [clean_kernel_name(n) for n in c.get("name", [])],
            "process_id": c.get("pid"),
            "thread_id": c.get("tid"),
            "start_ns": c.get("beginns"),
            "end_ns": c.get("endns"),
        },
        MARKERS,
    )


def _v1_hip(con: sqlite3.Connection, path: Path) -> pl.DataFrame:
    c = _rows(con, path, 'select * from "HIP"')
    n = len(c.get("beginns", []))
    return columns_frame(
        {
            "domain": ["HIP_API"] * n,
            "function": c.get("name"),
            "process_id": c.get("pid"),
            "thread_id": c.get("tid"),
            "start_ns": c.get("beginns"),
            "end_ns": c.get("endns"),
        },
        API,
    )


def is_compute_sysinfo(names: set[str]) -> bool:
    return {"workload_name", "gpu_arch"} <= names


def agents_from_sysinfo(table: Table) -> pl.DataFrame:
    """rocprof-compute ``sysinfo.csv`` -> AGENTS: the profiled GPU's arch, model, XCDs, CUs."""
    from hipdnn_trace.profilers.rocprof.frames import AGENTS

    n = len(table.rows)
    return columns_frame(
        {
            "type": ["GPU"] * n,
            "arch": table.strings("gpu_arch"),
            "product": table.strings("gpu_model"),
            "num_xcc": table.ints("num_xcd"),
            "cu_count": table.ints("cu_per_gpu"),
            "max_clock_mhz": table.ints("max_sclk"),
            "wave_size": table.ints("wave_size"),
            "max_waves_per_cu": table.ints("max_waves_per_cu"),
            "max_mem_clock_mhz": table.ints("max_mclk"),
            "hbm_channels": table.ints("num_hbm_channels"),
            "l2_channels": table.ints("total_l2_chan"),
            "lds_banks_per_cu": table.ints("lds_banks_per_cu"),
        },
        AGENTS,
    )

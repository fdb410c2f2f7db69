"""rocprofv3 CSV (ROCm 6.2 .. 7.x) and rocpd-converted CSV -> polars frames.

Column sets follow rocprofiler-sdk ``source/lib/output/generateCSV.cpp`` and, for
``rocpd convert``, ``source/lib/python/rocpd/source/csv.cpp``; headers are matched
by name, case-insensitively (:mod:`.table`), so optional columns (Stream_Id,
Thread_Id, Dispatch_Id, Accum_VGPR_Count, Start/End_Timestamp in counter files) and
the leading Guid/Pid of rocpd's converter are all tolerated. Agent_Id may be a node
number (6.x) or a label ("Agent 4", "GPU 3": ``--agent-index``); ``device`` is its number.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from hipdnn_trace.profilers.rocprof.frames import (
    AGENTS,
    API,
    COUNTERS_FULL,
    KERNELS_FULL,
    MARKERS,
    STATS,
    columns_frame,
    durations,
)
from hipdnn_trace.profilers.rocprof.table import ProfileFormatError, Table, read_table

#: Function names that are roctx bookkeeping, not user ranges (MARKER_CONTROL_API / NAME_API).
_MARKER_BOOKKEEPING = ("MARKER_CONTROL", "MARKER_NAME")


def _source(table: Table) -> str:
    """rocpd's converter prepends Guid (or Pid); rocprofv3's own CSV does not."""
    return "rocpd" if table.has("guid") or table.header[0].lower() == "pid" else "rocprofv3"


def kernels_from_table(table: Table) -> pl.DataFrame:
    """kernel_trace.csv rows -> ``kernels`` (+ KERNEL_EXTRAS)."""
    start, end = table.interval(("Start_Timestamp",), ("End_Timestamp",), required=True)
    queue = table.ints("Queue_Id")
    stream = table.ints("Stream_Id")
    cols = {
        "name": table.strings("Kernel_Name", required=True),
        "start_ns": start,
        "end_ns": end,
        "duration_ns": durations(start, end),
        "grid_x": table.ints("Grid_Size_X"),
        "grid_y": table.ints("Grid_Size_Y"),
        "grid_z": table.ints("Grid_Size_Z"),
        "block_x": table.ints("Workgroup_Size_X"),
        "block_y": table.ints("Workgroup_Size_Y"),
        "block_z": table.ints("Workgroup_Size_Z"),
        "stream": [s if s is not None else q for s, q in zip(stream, queue)],
        "device": table.ints("Agent_Id"),
        "correlation_id": table.ints("Correlation_Id"),
        "source": [_source(table)] * len(table.rows),
        "dispatch_id": table.ints("Dispatch_Id"),
        "kernel_id": table.ints("Kernel_Id"),
        "queue": queue,
        "thread_id": table.ints("Thread_Id"),
        "agent": table.strings("Agent_Id"),
    }
    kinds = table.strings("Kind")
    frame = columns_frame(cols, KERNELS_FULL)
    if any(k is not None for k in kinds):
        keep = [k is None or k.upper() == "KERNEL_DISPATCH" for k in kinds]
        frame = frame.filter(pl.Series(keep))
    return frame


def counters_from_table(table: Table) -> pl.DataFrame:
    """counter_collection.csv (long: one row per dispatch x counter) -> ``counters``."""
    cols = {
        "kernel": table.strings("Kernel_Name", required=True),
        "correlation_id": table.ints("Correlation_Id", "Correlation_ID"),
        "counter": table.strings("Counter_Name", required=True),
        "value": table.floats("Counter_Value", required=True),
        "source": [_source(table)] * len(table.rows),
        "dispatch_id": table.ints("Dispatch_Id"),
        "device": table.ints("Agent_Id", "GPU_ID"),
        "thread_id": table.ints("Thread_Id", "TID"),
        "process_id": table.ints("Process_Id", "PID"),
        **dict(zip(("start_ns", "end_ns"), table.interval(("Start_Timestamp",), ("End_Timestamp",)))),
    }
    return columns_frame(cols, COUNTERS_FULL)


def _api_columns(table: Table) -> dict[str, list]:
    return {
        "domain": table.strings("Domain", required=True),
        "function": table.strings("Function", required=True),
        "process_id": table.ints("Process_Id"),
        "thread_id": table.ints("Thread_Id"),
        "correlation_id": table.ints("Correlation_Id"),
        **dict(zip(("start_ns", "end_ns"),
                   table.interval(("Start_Timestamp",), ("End_Timestamp",), required=True))),
    }


def markers_from_table(table: Table) -> pl.DataFrame:
    """marker_api_trace.csv -> MARKERS. Range rows carry the roctx message as Function."""
    api = columns_frame(_api_columns(table), API)
    is_marker = pl.col("domain").str.to_uppercase().str.starts_with("MARKER")
    bookkeeping = pl.any_horizontal(
        [pl.col("domain").str.to_uppercase().str.starts_with(p) for p in _MARKER_BOOKKEEPING]
    )
    rows = api.filter(is_marker & ~bookkeeping)
    return rows.select(pl.col("function").alias("name"), *[c for c in MARKERS if c != "name"])


def api_from_table(table: Table) -> pl.DataFrame:
    """hip_api_trace.csv / hsa_api_trace.csv / any Domain,Function trace -> API frame."""
    return columns_frame(_api_columns(table), API)


def stats_from_table(table: Table, domain: str) -> pl.DataFrame:
    """``*_stats.csv`` (Name,Calls,TotalDurationNs,AverageNs,Percentage[,MinNs,MaxNs,StdDev])."""
    cols = {
        "domain": [domain] * len(table.rows),
        "name": table.strings("Name", required=True),
        "calls": table.ints("Calls", required=True),
        "total_ns": table.ints("TotalDurationNs", required=True),
        "average_ns": table.floats("AverageNs"),
        "percentage": table.floats("Percentage"),
        "min_ns": table.ints("MinNs"),
        "max_ns": table.ints("MaxNs"),
        "stddev_ns": table.floats("StdDev"),
        "source": [_source(table)] * len(table.rows),
        "file": [table.path.name] * len(table.rows),
    }
    return columns_frame(cols, STATS)


def agents_from_table(table: Table) -> pl.DataFrame:
    """agent_info.csv -> AGENTS (node id, gfx arch, product, XCD and CU counts, clock)."""
    cols = {
        "node_id": table.ints("Node_Id", required=True),
        "logical_node_id": table.ints("Logical_Node_Id"),
        "type": table.strings("Agent_Type"),
        "arch": table.strings("Name"),
        "product": table.strings("Product_Name"),
        "num_xcc": table.ints("Num_Xcc"),
        "cu_count": table.ints("Cu_Count"),
        "max_clock_mhz": table.ints("Max_Engine_Clk_Fcompute"),
        "wave_size": table.ints("Wave_Front_Size"),
        "max_waves_per_cu": table.ints("Max_Waves_Per_Cu"),
    }
    return columns_frame(cols, AGENTS)


def stats_domain(path: Path) -> str:
    """Which table a stats file aggregates, from its rocprofv3 / rocprof v1 file name."""
    name = path.name.lower()
    for suffix, domain in (
        ("kernel_stats.csv", "kernel"),
        ("hip_api_stats.csv", "hip_api"),
        ("hip_stats.csv", "hip_api"),
        ("hsa_api_stats.csv", "hsa_api"),
        ("hsa_stats.csv", "hsa_api"),
        ("memory_copy_stats.csv", "memory_copy"),
        ("copy_stats.csv", "memory_copy"),
        ("marker_api_stats.csv", "marker"),
        ("domain_stats.csv", "domain"),
        ("results.stats.csv", "kernel"),
        (".stats.csv", "kernel"),
    ):
        if name.endswith(suffix):
            return domain
    return name.removesuffix(".csv")


def read_kernel_trace(path: Path) -> pl.DataFrame:
    return kernels_from_table(_expect(read_table(path), "kernel trace", "kernel_name", "start_timestamp"))


def read_counter_collection(path: Path) -> pl.DataFrame:
    return counters_from_table(_expect(read_table(path), "counter collection", "counter_name", "counter_value"))


def read_marker_trace(path: Path) -> pl.DataFrame:
    return markers_from_table(_expect(read_table(path), "marker trace", "domain", "function"))


def read_api_trace(path: Path) -> pl.DataFrame:
    return api_from_table(_expect(read_table(path), "API trace", "domain", "function"))


def read_stats(path: Path) -> pl.DataFrame:
    table = _expect(read_table(path, overflow_into_first=True), "stats", "name", "calls")
    return stats_from_table(table, stats_domain(path))


def read_agent_info(path: Path) -> pl.DataFrame:
    return agents_from_table(_expect(read_table(path), "agent info", "node_id"))


def _expect(table: Table, what: str, *names: str) -> Table:
    if not table.has(*names):
        raise ProfileFormatError(
            f"{table.path}: not a rocprofv3 {what} file (needs columns {', '.join(names)}; "
            f"header: {', '.join(table.header[:8])}{', ...' if len(table.header) > 8 else ''})"
        )
    return table


def memory_from_table(table: Table) -> pl.DataFrame:
    """rocprofv3 memory copy / allocation / scratch traces -> the MEMORY frame (one row per event)."""
    start = table.ints("start_timestamp", required=True)
    end = table.ints("end_timestamp", required=True)
    df = pl.DataFrame({
        "kind": table.strings("kind", required=True),
        "operation": table.strings("direction", "operation"),
        "src_agent": table.ints("source_agent_id", "agent_id"),
        "dst_agent": table.ints("destination_agent_id"),
        "size_bytes": table.ints("allocation_size", "size", "bytes"),
        "correlation_id": table.ints("correlation_id"),
        "start_ns": start, "end_ns": end,
    }, schema_overrides={"src_agent": pl.Int64, "dst_agent": pl.Int64, "size_bytes": pl.Int64,
                         "correlation_id": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64,
                         "operation": pl.String, "kind": pl.String})
    return df.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"))

"""rocpd SQLite (rocprofv3's default output from ROCm 7.0) -> polars frames.

Reads the views rocprofiler-sdk defines in ``share/rocprofiler-sdk-rocpd/data_views.sql``
(``kernels``, ``regions``, ``counters_collection``) and ``rocpd_info_agent``. rocpd keeps
the internal correlation id (the one rocprofv3's CSV prints as Correlation_Id) in the
event's ``stack_id`` (``generateRocpd.cpp`` inserts ``stack_id = corr_id.internal``);
``correlation_id`` there is the *external* id, so the join uses ``stack_id``.
The file is opened read-only; nothing is written next to it.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import polars as pl

from hipdnn_trace import read_gate
from hipdnn_trace.profilers.rocprof.frames import (
    AGENTS,
    API,
    COUNTERS_FULL,
    KERNELS_FULL,
    MARKERS,
    columns_frame,
    durations,
)
from hipdnn_trace.profilers.rocprof.table import ProfileFormatError

SQLITE_MAGIC = b"SQLite format 3\x00"

_REQUIRED_VIEWS = ("kernels", "regions", "rocpd_info_agent")


def is_sqlite(path: Path) -> bool:
    try:
        with read_gate.open_file(path, read_gate.PROFILER_DATABASE) as handle:
            return handle.read(16) == SQLITE_MAGIC
    except (read_gate.ReadRefused, OSError):
        return False


def connect(path: Path) -> sqlite3.Connection:
    """Open read-only (``mode=ro``) so a user's database is never modified."""
    read_gate.check(path, read_gate.PROFILER_DATABASE)
    try:
        con = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
        con.execute("select count(*) from sqlite_master").fetchone()
        return con
    except sqlite3.DatabaseError as exc:
        raise ProfileFormatError(f"{path}: not a readable SQLite database: {exc}") from None


def object_names(con: sqlite3.Connection) -> set[str]:
    return {row[0] for row in con.execute("select name from sqlite_master where type in ('table','view')")}


def is_rocpd(names: set[str]) -> bool:
    return "rocpd_metadata" in names or "rocpd_kernel_dispatch" in names


def _query(con: sqlite3.Connection, path: Path, sql: str) -> tuple[list[str], list[tuple]]:
    try:
        cur = con.execute(sql)
    except sqlite3.DatabaseError as exc:
        raise ProfileFormatError(f"{path}: rocpd query failed ({exc}); unsupported rocpd schema?") from None
    cols = [d[0] for d in cur.description]
    return cols, cur.fetchall()


def _columns(cols: list[str], rows: list[tuple]) -> dict[str, list]:
    return {c: [r[i] for r in rows] for i, c in enumerate(cols)}


def schema_version(con: sqlite3.Connection) -> str | None:
    try:
        row = con.execute("select value from rocpd_metadata where tag = 'schema_version'").fetchone()
    except sqlite3.DatabaseError:
        return None
    return None if row is None else str(row[0])


def read_rocpd(path: Path) -> dict[str, pl.DataFrame]:
    """All frames of one rocpd database: kernels, counters, markers, api, agents."""
    with closing(connect(path)) as con:
        names = object_names(con)
        if not is_rocpd(names):
            raise ProfileFormatError(f"{path}: SQLite file is not a rocpd database (no rocpd_* tables)")
        missing = [v for v in _REQUIRED_VIEWS if v not in names]
        if missing:
            raise ProfileFormatError(
                f"{path}: rocpd schema {schema_version(con) or '?'} lacks view(s) {', '.join(missing)}"
            )
        return {
            "kernels": _kernels(con, path),
            "counters": _counters(con, path) if "counters_collection" in names else columns_frame({}, COUNTERS_FULL),
            "markers": _markers(con, path),
            "api": _api(con, path),
            "agents": _agents(con, path),
        }


def _kernels(con: sqlite3.Connection, path: Path) -> pl.DataFrame:
    cols, rows = _query(
        con,
        path,
        "select name, start, end, grid_x, grid_y, grid_z, workgroup_x, workgroup_y, workgroup_z, "
        "stream_id, queue_id, agent_abs_index, stack_id, dispatch_id, kernel_id, tid, pid "
        "from kernels order by start",
    )
    c = _columns(cols, rows)
    n = len(rows)
    start, end = c.get("start", []), c.get("end", [])
    return columns_frame(
        {
            "name": c.get("name", []),
            "start_ns": start,
            "end_ns": end,
            "duration_ns": durations(start, end),
            "grid_x": c.get("grid_x", []),
            "grid_y": c.get("grid_y", []),
            "grid_z": c.get("grid_z", []),
            "block_x": c.get("workgroup_x", []),
            "block_y": c.get("workgroup_y", []),
            "block_z": c.get("workgroup_z", []),
            "stream": c.get("stream_id", []),
            "device": c.get("agent_abs_index", []),
            "correlation_id": c.get("stack_id", []),
            "source": ["rocpd"] * n,
            "dispatch_id": c.get("dispatch_id", []),
            "kernel_id": c.get("kernel_id", []),
            "queue": c.get("queue_id", []),
            "thread_id": c.get("tid", []),
            "process_id": c.get("pid", []),
            "agent": [None if a is None else f"Agent {a}" for a in c.get("agent_abs_index", [])],
        },
        KERNELS_FULL,
    )


def _counters(con: sqlite3.Connection, path: Path) -> pl.DataFrame:
    cols, rows = _query(
        con,
        path,
        "select kernel_name, stack_id, counter_name, value, dispatch_id, agent_abs_index, tid, pid, "
        "start, end from counters_collection order by dispatch_id, counter_name",
    )
    c = _columns(cols, rows)
    return columns_frame(
        {
            "kernel": c.get("kernel_name", []),
            "correlation_id": c.get("stack_id", []),
            "counter": c.get("counter_name", []),
            "value": c.get("value", []),
            "source": ["rocpd"] * len(rows),
            "dispatch_id": c.get("dispatch_id", []),
            "device": c.get("agent_abs_index", []),
            "thread_id": c.get("tid", []),
            "process_id": c.get("pid", []),
            "start_ns": c.get("start", []),
            "end_ns": c.get("end", []),
        },
        COUNTERS_FULL,
    )


def _regions(con: sqlite3.Connection, path: Path, where: str) -> dict[str, list]:
    cols, rows = _query(
        con,
        path,
        f"select category, name, pid, tid, stack_id, start, end from regions where {where} order by start",
    )
    return _columns(cols, rows)


def _markers(con: sqlite3.Connection, path: Path) -> pl.DataFrame:
    c = _regions(
        con, path,
        "category like 'MARKER%' and category not like 'MARKER_CONTROL%' and category not like 'MARKER_NAME%'"
    )
    return columns_frame(
        {
            "name": c.get("name", []),
            "process_id": c.get("pid", []),
            "thread_id": c.get("tid", []),
            "correlation_id": c.get("stack_id", []),
            "start_ns": c.get("start", []),
            "end_ns": c.get("end", []),
        },
        MARKERS,
    )


def _api(con: sqlite3.Connection, path: Path) -> pl.DataFrame:
    c = _regions(con, path, "category like 'HIP_%'")
    return columns_frame(
        {
            "domain": c.get("category", []),
            "function": c.get("name", []),
            "process_id": c.get("pid", []),
            "thread_id": c.get("tid", []),
            "correlation_id": c.get("stack_id", []),
            "start_ns": c.get("start", []),
            "end_ns": c.get("end", []),
        },
        API,
    )


def _agents(con: sqlite3.Connection, path: Path) -> pl.DataFrame:
    cols, rows = _query(
        con, path, "select absolute_index, logical_index, type, name, product_name, extdata from rocpd_info_agent"
    )
    out: dict[str, list] = {k: [] for k in AGENTS}
    for absolute, logical, kind, name, product, extdata in rows:
        try:
            ext = json.loads(extdata) if extdata else {}
        except (TypeError, ValueError):
            ext = {}
        out["node_id"].append(absolute)
        out["logical_node_id"].append(logical)
        out["type"].append(kind)
        out["arch"].append(name)
        out["product"].append(product)
        out["num_xcc"].append(ext.get("num_xcc"))
        out["cu_count"].append(ext.get("cu_count"))
        out["max_clock_mhz"].append(ext.get("max_engine_clk_fcompute"))
        out["wave_size"].append(ext.get("wave_front_size"))
        out["max_waves_per_cu"].append(ext.get("max_waves_per_cu"))
        for key in ("max_mem_clock_mhz", "hbm_channels", "l2_channels", "lds_banks_per_cu"):
            out[key].append(None)
    return columns_frame(out, AGENTS)

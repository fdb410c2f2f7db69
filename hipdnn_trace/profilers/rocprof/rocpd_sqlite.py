"""rocpd SQLite (rocprofv3's default output from ROCm 7.0) -> polars frames.

Reads the views rocprofiler-sdk defines in ``share/rocprofiler-sdk-rocpd/data_views.sql``
(``kernels``, ``regions``, ``counters_collection``) and ``rocpd_info_agent``. rocpd keeps
the internal correlation id (the one rocprofv3's CSV prints as Correlation_Id) in the
event's ``stack_id`` (``generateRocpd.cpp`` inserts ``stack_id = corr_id.internal``);
``correlation_id`` there is the *external* id, so the join uses ``stack_id``.
The file is opened read-only; nothing is written next to it.

Every read is bounded (docs/amd-profiling.md "Reading a rocpd file safely"): a file is
hostile input, and a view is a query the file's author wrote. A progress handler stops any
statement past ``QUERY_SECONDS``; at most ``MAX_ROWS`` rows are read per view; no text or
blob may exceed ``MAX_VALUE_BYTES`` (``SQLITE_LIMIT_LENGTH``); temporary tables stay in
memory under a heap cap (``temp_store = MEMORY``, ``hard_heap_limit``), so nothing is
written to /var/tmp. Values are type-checked per column: a timestamp or id stored as text,
or ``extdata`` that is not a JSON object, is one line naming the file, view and column.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
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

#: wall-clock budget of one statement; rocprofv3's views over a million dispatches read in seconds
QUERY_SECONDS = 120.0
#: rows read from one view at most (a million-dispatch capture is 1e6 rows; ten times that is not a capture)
MAX_ROWS = 10_000_000
#: the longest text or blob value (kernel names are a few KB; extdata a few hundred bytes)
MAX_VALUE_BYTES = 1 << 20
#: the most memory SQLite may take for one file (sorts and temporary tables included)
HEAP_LIMIT_BYTES = 2 << 30
_CHECK_EVERY_OPS = 10_000


class _Budget:
    """A statement's deadline, checked by SQLite's progress handler."""

    def __init__(self) -> None:
        self.deadline = math.inf
        self.expired = False

    def start(self) -> None:
        self.deadline = time.monotonic() + QUERY_SECONDS
        self.expired = False

    def __call__(self) -> int:
        if time.monotonic() > self.deadline:
            self.expired = True
            return 1
        return 0



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
        _bound(con)
        con.execute("select count(*) from sqlite_master").fetchone()
        return con
    except sqlite3.DatabaseError as exc:
        raise ProfileFormatError(f"{path}: not a readable SQLite database: {exc}") from None


def _bound(con: sqlite3.Connection) -> None:
    """Cap value size, memory and temp files, and time every statement (see the module docstring)."""
    con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    con.execute("pragma temp_store = memory")
    con.execute(f"pragma hard_heap_limit = {HEAP_LIMIT_BYTES}")
    budget = _Budget()
    budget.start()
    con.set_progress_handler(budget, _CHECK_EVERY_OPS)


def object_names(con: sqlite3.Connection) -> set[str]:
    return {row[0] for row in con.execute("select name from sqlite_master where type in ('table','view')")}


def is_rocpd(names: set[str]) -> bool:
    return "rocpd_metadata" in names or "rocpd_kernel_dispatch" in names


def _query(con: sqlite3.Connection, path: Path, sql: str) -> tuple[list[str], list[tuple]]:
    budget = _Budget()   # each statement gets its own deadline
    budget.start()
    con.set_progress_handler(budget, _CHECK_EVERY_OPS)
    try:
        cur = con.execute(sql)
        rows = cur.fetchmany(MAX_ROWS + 1)
    except sqlite3.DatabaseError as exc:
        raise ProfileFormatError(_failure(path, sql, exc, budget.expired)) from None
    except MemoryError:
        raise ProfileFormatError(f"{path}: rocpd query needs more than the memory allowed; {_view(sql)}") from None
    if len(rows) > MAX_ROWS:
        raise ProfileFormatError(f"{path}: view {_view(sql)} has more than {MAX_ROWS} rows; not a rocprofv3 capture")
    return [d[0] for d in cur.description], rows


bounded_query = _query   # legacy.py (rocprof v1 databases) reads through the same caps


def _view(sql: str) -> str:
    return sql.split(" from ", 1)[1].split()[0] if " from " in sql else "?"


def _failure(path: Path, sql: str, exc: sqlite3.DatabaseError, expired: bool) -> str:
    view = _view(sql)
    if expired:
        return f"{path}: reading view {view} took over {QUERY_SECONDS:g} s; not the view rocprofv3 writes"
    text = str(exc)
    if "too big" in text:
        return f"{path}: view {view} holds a value over {MAX_VALUE_BYTES} bytes; not a rocprofv3 capture"
    if "out of memory" in text:
        return f"{path}: reading view {view} needs over {HEAP_LIMIT_BYTES >> 20} MiB; not the view rocprofv3 writes"
    return f"{path}: rocpd query failed ({text}); unsupported rocpd schema?"


def _typed(path: Path, view: str, c: dict[str, list], ints: tuple[str, ...], texts: tuple[str, ...]) -> None:
    """One line naming file, view, column and row for a value of the wrong SQLite type."""
    for names, ok, what in ((ints, (int,), "an integer"), (texts, (str,), "text")):
        for name in names:
            for i, v in enumerate(c.get(name, [])):
                if v is not None and (not isinstance(v, ok) or isinstance(v, bool)):
                    shown = f"{type(v).__name__} of {len(v)} bytes" if isinstance(v, (bytes, str)) else repr(v)
                    raise ProfileFormatError(f"{path}: {view}.{name} row {i + 1} is {shown[:60]}, not {what}")


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
        _refuse_foreign_views(con, path)
        return {
            "kernels": _kernels(con, path),
            "counters": _counters(con, path) if "counters_collection" in names else columns_frame({}, COUNTERS_FULL),
            "markers": _markers(con, path),
            "api": _api(con, path),
            "agents": _agents(con, path),
        }


_KERNEL_INTS = (
    "start", "end", "grid_x", "grid_y", "grid_z", "workgroup_x", "workgroup_y", "workgroup_z",
    "stream_id", "queue_id", "agent_abs_index", "stack_id", "dispatch_id", "kernel_id", "tid", "pid",
)


def _refuse_foreign_views(con: sqlite3.Connection, path: Path) -> None:
    """rocprofiler-sdk's views (data_views.sql) are joins over rocpd_* tables; none is recursive.
    A recursive one is refused before it runs (the time budget still bounds any other query)."""
    rows = con.execute("select name, sql from sqlite_master where type = 'view' and name in "
                       "('kernels', 'regions', 'counters_collection', 'rocpd_info_agent')").fetchall()
    for name, sql in rows:
        if isinstance(sql, str) and "recursive" in sql.lower():
            raise ProfileFormatError(f"{path}: view {name} is a recursive query; not the view rocprofv3 writes")


def _kernels(con: sqlite3.Connection, path: Path) -> pl.DataFrame:
    cols, rows = _query(
        con,
        path,
        "select name, start, end, grid_x, grid_y, grid_z, workgroup_x, workgroup_y, workgroup_z, "
        "stream_id, queue_id, agent_abs_index, stack_id, dispatch_id, kernel_id, tid, pid "
        "from kernels order by start",
    )
    c = _columns(cols, rows)
    _typed(path, "kernels", c, _KERNEL_INTS, ("name",))
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
    ints = ("stack_id", "dispatch_id", "agent_abs_index", "tid", "pid", "start", "end")
    _typed(path, "counters_collection", c, ints, ("kernel_name", "counter_name"))
    c["value"] = [_counter_value(path, i, v) for i, v in enumerate(c.get("value", []))]
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


def _counter_value(path: Path, row: int, value: object) -> float | None:
    """A counter is a count or a rate: finite and not negative (rocprofiler-sdk stores a double)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProfileFormatError(f"{path}: counters_collection.value row {row + 1} is {value!r:.60}, not a number")
    if not math.isfinite(value) or value < 0:
        raise ProfileFormatError(
            f"{path}: counters_collection.value row {row + 1} is {value!r}; a counter is finite and not negative"
        )
    return float(value)


def _regions(con: sqlite3.Connection, path: Path, where: str) -> dict[str, list]:
    cols, rows = _query(
        con,
        path,
        f"select category, name, pid, tid, stack_id, start, end from regions where {where} order by start",
    )
    c = _columns(cols, rows)
    _typed(path, "regions", c, ("pid", "tid", "stack_id", "start", "end"), ("category", "name"))
    return c


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
    _typed(path, "rocpd_info_agent", _columns(cols, rows), ("absolute_index", "logical_index"), ())
    for i, (absolute, logical, kind, name, product, extdata) in enumerate(rows):
        ext = _extdata(path, i, extdata)
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


_EXT_INTS = ("num_xcc", "cu_count", "max_engine_clk_fcompute", "wave_front_size", "max_waves_per_cu")


def _extdata(path: Path, row: int, extdata: object) -> dict:
    """rocpd_info_agent.extdata: a JSON object (rocprofiler-sdk writes the agent's fields); else one line."""
    where = f"{path}: rocpd_info_agent.extdata row {row + 1}"
    if extdata is None or extdata == "":
        return {}
    if not isinstance(extdata, str):
        raise ProfileFormatError(f"{where} is {type(extdata).__name__}, not JSON text")
    try:
        ext = json.loads(extdata)
    except ValueError:
        return {}  # older captures leave it unparsable; the agent's other columns still hold
    if not isinstance(ext, dict):
        raise ProfileFormatError(f"{where} is a JSON {type(ext).__name__}, not an object")
    for key in _EXT_INTS:
        v = ext.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise ProfileFormatError(f"{where}: {key} is {v!r:.60}, not a non-negative integer")
    return ext

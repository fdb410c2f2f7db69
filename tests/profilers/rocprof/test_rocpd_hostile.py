"""Hostile rocpd SQLite files (issue 33 item 7): each is one line and exit 1, never a hang, a
traceback, a file in /var/tmp or gigabytes of memory. The files are rocpd_batched_gemm's shape
(make_rocpd) with one table swapped for what an attacker or a damaged capture holds."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from amd_fixtures import make_rocpd
from one_line import one_line_error

from hipdnn_trace.cli import main
from hipdnn_trace.profilers.rocprof import rocpd_sqlite

_KERNEL_COLS = (
    "start, end, grid_x, grid_y, grid_z, workgroup_x, workgroup_y, workgroup_z, stream_id, queue_id, "
    "agent_abs_index, stack_id, dispatch_id, kernel_id, tid, pid"
)


def _with(tmp_path: Path, *sql: str) -> Path:
    db = make_rocpd(tmp_path / "run_results.db")
    con = sqlite3.connect(db)
    for statement in sql:
        con.executescript(statement)
    con.commit()
    con.close()
    return db


def _view(**values: str) -> str:
    """A kernels view over the table with some columns replaced (a table's affinity would convert them)."""
    cols = ", ".join(f"{values[c]} as {c}" if c in values else c for c in ("name", *_KERNEL_COLS.split(", ")))
    return f"alter table kernels rename to k0; create view kernels as select {cols} from k0"


def _ingest(db: Path, tmp_path: Path) -> int:
    return main(["ingest", str(db), "--out", str(tmp_path / "o"), "-q"])


def test_a_recursive_kernels_view_is_refused_and_stops_at_the_time_budget(tmp_path: Path, capsys, monkeypatch) -> None:
    """It never ended and filled /var/tmp: the progress handler ends it, temp_store keeps sorts in memory."""
    monkeypatch.setattr(rocpd_sqlite, "QUERY_SECONDS", 1.0)
    db = _with(
        tmp_path,
        "drop table kernels",
        "create view kernels as with recursive r(x) as (select 1 union all select x + 1 from r) "
        f"select 'k' as name, x as {_KERNEL_COLS.replace(', ', ', x as ')} from r",
    )
    assert _ingest(db, tmp_path) == 1
    one_line_error(capsys, str(db), "view kernels is a recursive query")
    # and were it not recognised, the progress handler ends it at the budget
    con = rocpd_sqlite.connect(db)
    began = time.monotonic()
    with pytest.raises(rocpd_sqlite.ProfileFormatError, match="view kernels took over 1 s"):
        rocpd_sqlite.bounded_query(con, db, "select * from kernels order by start")
    assert time.monotonic() - began < 30
    con.close()


def test_a_view_selecting_a_huge_blob_is_refused_at_the_length_cap(tmp_path: Path, capsys) -> None:
    """A 400 MB blob took 5.6 GB and a Rust panic; SQLITE_LIMIT_LENGTH refuses it as it is made."""
    db = _with(
        tmp_path,
        "drop table kernels",
        f"create view kernels as select zeroblob({rocpd_sqlite.MAX_VALUE_BYTES + 1}) as name, "
        + ", ".join(f"1 as {c}" for c in _KERNEL_COLS.split(", ")),
    )
    assert _ingest(db, tmp_path) == 1
    one_line_error(capsys, str(db), "view kernels", "over 1048576 bytes")


@pytest.mark.parametrize(
    ("extdata", "words"),
    [
        ("'[1, 2]'", ("rocpd_info_agent.extdata row 1", "a JSON list, not an object")),
        ("'\"MI300X\"'", ("rocpd_info_agent.extdata row 1", "a JSON str, not an object")),
        ("x'00ff'", ("rocpd_info_agent.extdata row 1", "bytes, not JSON text")),
        ("'{\"cu_count\": \"many\"}'", ("cu_count is 'many'", "not a non-negative integer")),
        ("'{\"num_xcc\": -8}'", ("num_xcc is -8",)),
    ],
)
def test_extdata_that_is_not_an_agent_object_is_one_line(tmp_path: Path, capsys, extdata, words) -> None:
    db = _with(tmp_path, f"update rocpd_info_agent set extdata = {extdata}")
    assert _ingest(db, tmp_path) == 1
    one_line_error(capsys, str(db), *words)


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        (_view(start="'21000'"), ("kernels.start row 1", "str of 5 bytes", "not an integer")),
        (_view(end="2.5e4"), ("kernels.end row 1", "25000.0", "not an integer")),
        (_view(name="42"), ("kernels.name row 1", "42", "not text")),
        ("update regions set start = 'soon'", ("regions.start row", "not an integer")),
        ("update counters_collection set value = 'lots'", ("counters_collection.value row 1", "not a number")),
        ("update counters_collection set value = -5", ("counters_collection.value row 1", "-5", "not negative")),
        ("update counters_collection set value = 1e400", ("counters_collection.value row 1", "inf")),
        ("update counters_collection set dispatch_id = x'01'", ("counters_collection.dispatch_id row 1",)),
        ("update rocpd_info_agent set absolute_index = 'one'", ("rocpd_info_agent.absolute_index row 1",)),
    ],
)
def test_values_of_the_wrong_type_name_file_view_column_and_row(tmp_path: Path, capsys, sql, words) -> None:
    """Times stored as text and counter values 1e400 or -5 were tracebacks (or polars errors)."""
    db = _with(tmp_path, sql)
    assert _ingest(db, tmp_path) == 1
    one_line_error(capsys, str(db), *words)


def test_a_kernels_view_missing_a_column_is_one_line(tmp_path: Path, capsys) -> None:
    db = _with(tmp_path, "drop table kernels", "create view kernels as select 'k' as name")
    assert _ingest(db, tmp_path) == 1
    one_line_error(capsys, str(db), "rocpd query failed", "no such column")


def test_too_many_rows_is_refused_not_read(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(rocpd_sqlite, "MAX_ROWS", 1)
    db = _with(tmp_path, "insert into kernels select * from kernels")
    assert _ingest(db, tmp_path) == 1
    one_line_error(capsys, str(db), "view kernels has more than 1 rows")


def test_the_bounds_still_read_the_fixture_database(tmp_path: Path) -> None:
    """The caps are far above a real capture: the clean file reads as before."""
    frames = rocpd_sqlite.read_rocpd(make_rocpd(tmp_path / "run_results.db"))
    assert frames["kernels"]["start_ns"].to_list() == [21000]
    assert frames["counters"]["value"].to_list() == [1024.0]
    assert frames["agents"]["cu_count"].to_list() == [None, 304]

"""The results store on DuckDB: import is idempotent by run id, all-or-nothing, refuses a different run
under a known id, reads through the loader's checks, and the schema migrates in order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synthetic_history import write_history

from hipdnn_trace.errors import UserError
from hipdnn_trace.history import schema
from hipdnn_trace.history.importer import import_runs
from hipdnn_trace.history.store import Store


@pytest.fixture
def history(tmp_path: Path) -> list[Path]:
    return write_history(tmp_path / "runs", nights=4, graphs=5, steps=())


def test_import_twice_changes_nothing(tmp_path: Path, history: list[Path]) -> None:
    store = Store(str(tmp_path / "s.duckdb"))
    first = import_runs(store, history)
    assert (len(first.imported), first.rows) == (4, 20)
    again = import_runs(store, history)
    assert (again.imported, sorted(again.skipped), again.rows) == ([], sorted(first.imported), 0)
    assert store.sql("SELECT count(*) FROM results")[0][0] == 20
    assert store.sql("SELECT count(*) FROM runs")[0][0] == 4


def test_a_different_run_under_a_known_id_is_refused_and_nothing_is_written(tmp_path: Path,
                                                                          history: list[Path]) -> None:
    store = Store(str(tmp_path / "s.duckdb"))
    import_runs(store, history[:2])
    meta = json.loads((history[1] / "run.json").read_text())
    meta["created"] = "2027-01-01T00:00:00"
    (history[1] / "run.json").write_text(json.dumps(meta))
    with pytest.raises(UserError, match="nightly-001 is already in the store for another run"):
        import_runs(store, [history[2], history[1]])   # history[2] first: the refusal must undo it
    assert store.sql("SELECT count(*) FROM runs")[0][0] == 2


def test_a_damaged_run_is_refused_by_name_before_any_write(tmp_path: Path, history: list[Path]) -> None:
    store = Store(str(tmp_path / "s.duckdb"))
    (history[3] / "run.json").write_text('{"run_id": "x", "created": 5}')
    with pytest.raises(UserError, match="'created' missing or not text"):
        import_runs(store, history)
    (history[3] / "summary.csv").write_text("")
    with pytest.raises(UserError, match="summary.csv"):
        import_runs(store, history)
    assert store.sql("SELECT count(*) FROM runs")[0][0] == 0


def test_a_version_1_store_migrates_to_the_latest_keeping_its_rows(tmp_path: Path) -> None:
    import duckdb

    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    for statement in schema.MIGRATIONS[0][1]:
        con.execute(statement)
    con.execute("INSERT INTO schema_version VALUES (1)")
    con.execute("INSERT INTO results (run_id, graph, graph_id, config, median_ms) VALUES ('r', 'g', 'id', 'c', 1.5)")
    con.close()
    store = Store(str(path))
    assert store.version == schema.SCHEMA_VERSION == 2
    assert store.sql("SELECT median_ms, kernel_source FROM results") == [(1.5, None)]
    assert store.sql("SELECT version FROM schema_version") == [(2,)]


def test_a_store_newer_than_the_tool_is_refused(tmp_path: Path) -> None:
    import duckdb

    path = tmp_path / "new.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE schema_version (version INTEGER)")
    con.execute("INSERT INTO schema_version VALUES (99)")
    con.close()
    with pytest.raises(UserError, match="schema version 99 is newer than this hipdnn-trace reads"):
        Store(str(path))


def test_a_file_that_is_not_a_store_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database\n" * 100)
    with pytest.raises(UserError, match="not a DuckDB database"):
        Store(str(path))

"""``run --db`` imports the finished run (the nightly recipe's one flag); a store that cannot be opened is
refused before any work; ``db import`` of a folder of runs, twice, is one line each and changes nothing."""

from __future__ import annotations

from pathlib import Path

from repo_paths import GRAPHS
from support_db import rows_in

from hipdnn_trace.cli import main


def test_run_with_db_imports_the_run_and_a_recipe_key_does_the_same(tmp_path: Path) -> None:
    db = tmp_path / "perf.duckdb"
    assert main(["run", str(GRAPHS / "pool"), "-i", "2", "-q", "--out", str(tmp_path / "runs"), "--run-id", "a",
                 "--db", str(db)]) == 0
    assert rows_in(db, "SELECT run_id, count(*) FROM results GROUP BY run_id") == [("a", 27)]
    recipe = tmp_path / "nightly.toml"
    recipe.write_text(f'graphs = ["{GRAPHS / "pool"}"]\niters = 2\nquiet = true\ndb = "perf.duckdb"\n'
                      f'out = "runs"\nrun_id = "b"\n')
    assert main(["run", "--config", str(recipe)]) == 0
    assert sorted(rows_in(db, "SELECT run_id FROM runs")) == [("a",), ("b",)]


def test_a_store_that_cannot_be_opened_is_refused_before_any_run_folder(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("not a database\n" * 50)
    assert main(["run", str(GRAPHS / "pool"), "-i", "2", "--out", str(tmp_path / "runs"), "--db", str(bad)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a DuckDB database" in err[0]
    assert not (tmp_path / "runs").exists()


def test_db_import_of_a_folder_twice(tmp_path: Path, capsys) -> None:
    runs = tmp_path / "runs"
    for run_id in ("x", "y"):
        assert main(["run", str(GRAPHS / "pool"), "-i", "2", "-q", "--out", str(runs), "--run-id", run_id]) == 0
    db = str(tmp_path / "s.duckdb")
    capsys.readouterr()
    assert main(["db", "import", str(runs), "--db", db]) == 0
    assert main(["db", "import", str(runs), "--db", db]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"imported 2 run(s), 54 row(s) -> {db}",
                   f"imported 0 run(s), 0 row(s); 2 already in the store -> {db}"]

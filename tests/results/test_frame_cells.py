"""Every run-folder frame is read in its schema's types (results/frame_cells.py): text stays text whatever
it looks like, and a cell its column's type cannot hold is one line naming the file, line and column in
report, compare, merge and repro, never a traceback (issue 33's fourth attack: text in ``validation.csv``
``passed`` or ``oracle.csv`` ``tuning_available`` was a polars traceback). Empty tables read as empty."""

from __future__ import annotations

import csv
import io
import shutil
from collections.abc import Callable
from pathlib import Path

import graph_dicts as hg
import polars as pl
import pytest
from one_line import one_line_error

from hipdnn_trace.cli import main
from hipdnn_trace.errors import UserError
from hipdnn_trace.results import frame_cells, schemas
from hipdnn_trace.results.rundir import load_run

ROOT = Path(__file__).resolve().parents[2]
GELU = ROOT / "graphs" / "pointwise" / "gelu_fp16.json"
SUPPORT = ROOT / "tests" / "support"
Edit = Callable[[list[list[str]]], list[list[str]]]


def _edit(path: Path, edit: Edit) -> None:
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerows(edit(rows))


def _cell(column: str, value: str) -> Edit:
    def edit(rows: list[list[str]]) -> list[list[str]]:
        rows[1][rows[0].index(column)] = value
        return rows
    return edit


@pytest.fixture(scope="module")
def failed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose one graph failed validation (zero tolerances): validation, mismatches and a repro-able row."""
    runs = tmp_path_factory.mktemp("failed")
    assert main(["run", str(GELU), "--rtol", "0", "--atol", "0", "-w", "0", "-i", "5", "--no-trace", "-q",
                 "--out", str(runs), "--run-id", "F"]) == 2
    return runs / "F"


def _commands(folder: Path, tmp_path: Path) -> dict[str, list[str]]:
    return {"report": ["report", str(folder), "-o", str(tmp_path / "r.html")],
            "compare": ["compare", str(folder), str(folder)],
            "merge": ["merge", str(folder), "--out", str(tmp_path / "m")],
            "repro": ["repro", str(folder), "--out", str(tmp_path / "b")]}


@pytest.mark.parametrize("command", ["report", "compare", "merge", "repro"])
@pytest.mark.parametrize(("file", "column", "value", "wanted"), [
    ("validation.csv", "passed", "maybe", "not true or false"),
    ("validation.csv", "total", "3.5", "not an integer"),
    ("validation.csv", "max_abs", "big", "not a number"),
    ("mismatches.csv", "rank", "first", "not an integer"),
    ("breakdown.csv", "wall_ms", "slow", "not a number"),
    ("summary.csv", "n", "5 samples", "not an integer"),
], ids=["passed", "total", "max_abs", "rank", "wall_ms", "n"])
def test_text_in_a_typed_column_is_one_line_naming_file_line_and_column(
        failed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, file: str, column: str,
        value: str, wanted: str) -> None:
    damaged = tmp_path / "D"
    shutil.copytree(failed, damaged)
    _edit(damaged / file, _cell(column, value))
    capsys.readouterr()
    assert main(_commands(damaged, tmp_path)[command]) == 1
    one_line_error(capsys, str(damaged / file), "line 2", repr(column), repr(value), wanted)


@pytest.mark.parametrize("command", ["report", "compare", "merge"])
def test_text_in_oracle_tuning_available_is_one_line(oracle_run: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str], command: str) -> None:
    _edit(oracle_run / "oracle.csv", _cell("tuning_available", "yes please"))
    capsys.readouterr()
    assert main(_commands(oracle_run, tmp_path)[command]) == 1
    one_line_error(capsys, "oracle.csv", "line 2", "'tuning_available'", "'yes please'", "not true or false")


@pytest.mark.parametrize("name", ["007", "1e5", "true", "NaN", "-0"])
def test_a_graph_named_like_a_number_or_a_boolean_keeps_its_name(tmp_path: Path, name: str) -> None:
    """The only row of every frame: its graph column read as text, as written (not 7, 100000.0, True, NaN)."""
    paths = hg.write(tmp_path / "g", [hg.matmul(name=name)])
    assert main(["run", *map(str, paths), "-w", "0", "-i", "2", "-q", "--out", str(tmp_path / "runs"),
                 "--run-id", "n"]) == 0
    run = load_run(tmp_path / "runs" / "n", strict=True)
    for frame in ("summary", "iterations", "validation", "breakdown"):
        assert getattr(run, frame)["graph"].to_list()[:1] == [name], frame


@pytest.mark.parametrize("file", ["validation.csv", "mismatches.csv", "breakdown.csv"])
def test_a_table_with_its_header_alone_reads_as_empty(failed: Path, tmp_path: Path, file: str) -> None:
    emptied = tmp_path / "E"
    shutil.copytree(failed, emptied)
    _edit(emptied / file, lambda rows: rows[:1])
    run = load_run(emptied, strict=True)
    frame = getattr(run, file.removesuffix(".csv"))
    assert frame.height == 0 and frame.schema == schemas.FRAMES[file.removesuffix(".csv")]
    assert main(["report", str(emptied), "-o", str(tmp_path / "r.html")]) == 0


def test_a_zero_byte_table_is_one_line(failed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    emptied = tmp_path / "Z"
    shutil.copytree(failed, emptied)
    (emptied / "validation.csv").write_bytes(b"")
    capsys.readouterr()
    assert main(["compare", str(failed), str(emptied)]) == 1
    one_line_error(capsys, str(emptied / "validation.csv"), "empty file (0 bytes)")


def test_a_validation_row_twice_is_refused(failed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doubled = tmp_path / "T"
    shutil.copytree(failed, doubled)
    _edit(doubled / "validation.csv", lambda rows: rows + rows[1:2])
    capsys.readouterr()
    assert main(["report", str(doubled), "-o", str(tmp_path / "r.html")]) == 1
    one_line_error(capsys, str(doubled / "validation.csv"), "recorded twice (lines 2 and 3)")


@pytest.mark.parametrize("text", ["22249969e7143242", "0346223320663351", "1073187289958726", "9662051951127e35",
                                  "inf", "true", ""])
def test_text_columns_are_never_inferred(tmp_path: Path, text: str) -> None:
    """The reader itself, on a one-row file: each of these was read as a number, a boolean or null."""
    path = tmp_path / "summary.csv"
    buffer = io.StringIO()
    csv.writer(buffer).writerows([["graph", "graph_id", "config", "status"], [text or "g", text, "c", "ok"]])
    path.write_text(buffer.getvalue())
    typed = frame_cells.typed(path, frame_cells.read_csv(path, schemas.SUMMARY), schemas.SUMMARY)
    assert typed.schema == schemas.SUMMARY
    assert typed["graph_id"].to_list() == [text or None]


def test_a_list_where_a_number_belongs_in_parquet_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "iterations.parquet"
    raw = pl.DataFrame({"graph": ["g"], "config": ["c"], "iteration": [[1, 2]], "kernel_ms": ["fast"]})
    with pytest.raises(UserError, match=r"iterations.parquet: row 1: column 'iteration' holds .*not an integer"):
        frame_cells.typed(path, raw, schemas.ITERATIONS, frame_cells.table_row)


def test_a_bare_iterations_parquet_with_text_in_a_boolean_column_is_one_line(
        failed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """compare's lone iterations file (no run.json) is read the same way (a polars traceback before)."""
    bare = tmp_path / "bare.parquet"
    pl.read_parquet(failed / "iterations.parquet").with_columns(pl.lit("maybe").alias("throttled")).write_parquet(bare)
    capsys.readouterr()
    assert main(["compare", str(bare), str(bare)]) == 1
    one_line_error(capsys, str(bare), "row 1", "'throttled'", "not true or false")

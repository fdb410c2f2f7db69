"""A graph whose graph_id reads as a number (about one graph in 600: ``22249969e7143242``), as the only row
of every frame, read back by resume, compare, merge, report and repro (issue 33's fourth attack).

The graph is real: its name is chosen so that the project's own hash gives such an id. Inferred, the
column became a float (``inf``) and the graph no longer matched its own iterations: a killed run could
never be resumed, compare found "no timed samples", merge dropped the iterations and repro refused the row.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path

import graph_dicts as hg
import polars as pl
import pytest

from hipdnn_trace.api import compare
from hipdnn_trace.cli import main
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.results.rundir import load_run

ROOT = Path(__file__).resolve().parents[2]
GELU = ROOT / "graphs" / "pointwise" / "gelu_fp16.json"
ITERS = 5
#: 16 hex digits that CSV type inference reads as a float: digits, one "e", digits
AS_FLOAT = re.compile(r"[0-9]+e[0-9]+")


def _named_to_read_as_a_number(graph: dict, pattern: re.Pattern[str] = AS_FLOAT) -> tuple[dict, str]:
    """``graph`` renamed ``<name>_<i>`` for the first i whose graph_id matches ``pattern``."""
    for i in range(100_000):
        renamed = {**graph, "name": f"{graph['name']}_{i}"}
        graph_id = load_bytes(json.dumps(renamed).encode(), "g.json").graph_id
        if pattern.fullmatch(graph_id):
            return renamed, graph_id
    raise AssertionError("no name gives such a graph_id")


def _inferred_dtype(graph_id: str) -> pl.DataType:
    return pl.read_csv(io.StringIO(f"graph_id\n{graph_id}\n"), infer_schema_length=None)["graph_id"].dtype


def _run(out: Path, run_id: str, *graphs: Path, extra: tuple[str, ...] = ()) -> int:
    return main(["run", *map(str, graphs), "-w", "0", "-i", str(ITERS), "--out", str(out), "--run-id", run_id,
                 "-q", *extra])


@pytest.fixture(scope="module")
def numeric(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """(a graph file whose graph_id reads as a float, that id, a folder of two runs A and B of it alone)."""
    folder = tmp_path_factory.mktemp("numeric")
    graph, graph_id = _named_to_read_as_a_number(hg.matmul(name="mm"))
    assert _inferred_dtype(graph_id) != pl.String()   # the hostile condition holds: inference would lose it
    path = hg.write(folder / "g", [graph])[0]
    runs = folder / "runs"
    assert _run(runs, "A", path) == 0 and _run(runs, "B", path) == 0
    return path, graph_id, runs


def test_every_frame_reads_the_graph_id_as_written(numeric: tuple[Path, str, Path]) -> None:
    _, graph_id, runs = numeric
    run = load_run(runs / "A", strict=True)
    for name in ("summary", "iterations", "validation", "breakdown"):
        assert getattr(run, name)["graph_id"].unique().to_list() == [graph_id], name


def test_compare_finds_the_timed_samples(numeric: tuple[Path, str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, graph_id, runs = numeric
    table = compare(runs / "A", runs / "B").table
    assert table.height == 1
    assert table.select("n_a", "n_b").row(0) == (ITERS, ITERS)
    assert main(["compare", str(runs / "A"), str(runs / "B")]) == 0
    assert "no timed samples" not in capsys.readouterr().out


def test_merge_keeps_the_iterations(numeric: tuple[Path, str, Path], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    _, graph_id, runs = numeric
    assert main(["merge", str(runs / "A"), "--out", str(tmp_path / "m")]) == 0
    assert "dropped" not in capsys.readouterr().err
    merged = load_run(tmp_path / "m")
    assert merged.iterations.filter(pl.col("phase") == "timed").height == ITERS
    assert merged.summary["graph_id"].to_list() == [graph_id]


def test_report_shows_the_graph_with_its_samples(numeric: tuple[Path, str, Path], tmp_path: Path) -> None:
    _, _, runs = numeric
    assert main(["report", str(runs / "A"), str(runs / "B"), "-o", str(tmp_path / "r.html")]) == 0
    text = (tmp_path / "r.md").read_text()
    assert "no timed samples" not in text and "INCONCLUSIVE (too few" not in text


def test_a_killed_run_whose_only_finished_graph_has_it_resumes(tmp_path: Path) -> None:
    """The suite is killed after its first graph's commit (summary.csv holds that row alone, run.json says
    running): the resume recognises the finished graph and runs only the other one."""
    graph, graph_id = _named_to_read_as_a_number(hg.matmul(name="mm"))
    paths = hg.write(tmp_path / "g", [graph, hg.matmul(name="zz_second")])
    runs = tmp_path / "runs"
    assert _run(runs, "k", *paths) == 0
    folder = runs / "k"
    summary = folder / "summary.csv"
    with summary.open(newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[1][rows[0].index("graph_id")] == graph_id
    with summary.open("w", newline="") as fh:   # what a kill between the two graphs' commits leaves
        csv.writer(fh).writerows(rows[:2])
    meta = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**meta, "status": "running"}))
    assert main(["run", "--resume", str(folder), "-q"]) == 0
    run = load_run(folder, strict=True)
    assert run.meta["status"] == "complete"
    assert sorted(run.summary["graph"].to_list()) == sorted([graph["name"], "zz_second"])
    timed = run.iterations.filter(pl.col("phase") == "timed")
    assert timed.group_by("graph_id").len().sort("graph_id")["len"].to_list() == [ITERS, ITERS]   # not run twice


def test_repro_reads_the_failed_row(tmp_path: Path) -> None:
    """repro finds the failed row and its graph again by graph_id (the bundle's own logic is tested elsewhere)."""
    graph, graph_id = _named_to_read_as_a_number(json.loads(GELU.read_text()))
    path = tmp_path / f"{graph['name']}.json"
    path.write_text(json.dumps(graph))
    assert _run(tmp_path / "runs", "r", path, extra=("--rtol", "0", "--atol", "0", "--no-trace")) == 2
    assert main(["repro", str(tmp_path / "runs" / "r"), "--out", str(tmp_path / "b")]) == 0
    bundle = tmp_path / "b" / graph["name"]
    assert (bundle / path.name).read_bytes() == path.read_bytes()
    assert json.loads((bundle / "repro.json").read_text())["graph_id"] == graph_id


def test_a_copied_run_folder_keeps_it_too(numeric: tuple[Path, str, Path], tmp_path: Path) -> None:
    """The same through the files alone (no parquet: the CSV of every big frame, --format csv)."""
    path, graph_id, _ = numeric
    assert _run(tmp_path, "c", path, extra=("--format", "csv")) == 0
    copy = tmp_path / "copy"
    shutil.copytree(tmp_path / "c", copy)
    (copy / "iterations.parquet").unlink()
    run = load_run(copy, strict=True)
    assert run.iterations["graph_id"].unique().to_list() == [graph_id]
    assert run.iterations.filter(pl.col("phase") == "timed").height == ITERS

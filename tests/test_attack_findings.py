"""What the second run of issue 25's attack (benchmarks/reliability_attack.py) found, each as one focused case:
damaged run folders taken by compare/report/merge, a peaks file that blocks, special files in a suite folder,
a dnn-benchmarking file holding a result twice, NaN timestamps and a full disk under ingest, and integer or
boolean matmuls that the torch backend got wrong while inspect said it could run them."""

from __future__ import annotations

import csv
import errno
import json
import os
import shutil
from pathlib import Path

import pytest
from one_line import one_line_error as _one_line

from hipdnn_trace.cli import main

REPO = Path(__file__).resolve().parents[1]
GRAPH = REPO / "graphs" / "matmul" / "matmul_2d_fp32.json"
KERNEL_TRACE = REPO / "tests" / "data" / "rocprof" / "v62" / "kernel_trace.csv"
DNB = REPO / "tests" / "data" / "dnnbench" / "newest-layout.json"


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    assert main(["run", str(GRAPH), "--out", str(runs), "--run-id", "A", "-i", "3", "-w", "0", "-q"]) == 0
    return runs / "A"


def _edit_summary(folder: Path, edit) -> Path:
    path = folder / "summary.csv"
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(edit(rows))
    return path


def _cell(column: str, value: str):
    def edit(rows: list[list[str]]) -> list[list[str]]:
        rows[1][rows[0].index(column)] = value
        return rows
    return edit


def _drop(column: str):
    return lambda rows: [r[:rows[0].index(column)] + r[rows[0].index(column) + 1:] for r in rows]


@pytest.mark.parametrize("command", ["compare", "report"])
@pytest.mark.parametrize(("edit", "words"), [
    (_cell("n", "many"), ("line 2", "'n'", "'many'")),
    (_cell("median", "nan"), ("line 2", "'median'", "not a measured value")),
    (_drop("median"), ("no column median",)),
    (lambda rows: rows + rows[1:], ("recorded twice (lines 2 and 3)",)),
], ids=["n a word", "median NaN", "no median column", "rows twice"])
def test_compare_and_report_refuse_a_damaged_summary(finished: Path, tmp_path: Path, capsys, command, edit,
                                                     words) -> None:
    """Taken as it stood, each became an INCONCLUSIVE verdict or a report row of garbage, exit 0."""
    damaged = tmp_path / "B"
    shutil.copytree(finished, damaged)
    summary = _edit_summary(damaged, edit)
    capsys.readouterr()
    argv = ["compare", str(finished), str(damaged)] if command == "compare" else \
        ["report", str(damaged), "-o", str(tmp_path / "r.html")]
    assert main(argv) == 1
    _one_line(capsys, str(summary), *words)


def test_merge_refuses_a_run_json_block_of_the_wrong_type(finished: Path, tmp_path: Path, capsys) -> None:
    """``"timing": "x"`` was an AttributeError traceback in merge."""
    damaged = tmp_path / "B"
    shutil.copytree(finished, damaged)
    meta = json.loads((damaged / "run.json").read_text())
    (damaged / "run.json").write_text(json.dumps(meta | {"timing": "x"}))
    capsys.readouterr()
    assert main(["merge", str(damaged), "--out", str(tmp_path / "m")]) == 1
    _one_line(capsys, "run.json", "'timing' is str, not a JSON object")


def test_a_peaks_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path, capsys) -> None:
    """``run --peaks FIFO`` blocked forever in the peaks loader (it read the file past the gate)."""
    fifo = tmp_path / "p.toml"
    os.mkfifo(fifo)
    assert main(["run", str(GRAPH), "--peaks", str(fifo), "--out", str(tmp_path / "runs"), "-q"]) == 1
    _one_line(capsys, str(fifo), "FIFO")


def test_special_files_in_a_suite_folder_are_error_rows_not_skipped(tmp_path: Path, capsys) -> None:
    """A FIFO, a link to a device and a dangling link named like graphs were left out without a word."""
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(GRAPH, suite / "a.json")
    os.mkfifo(suite / "b.json")
    os.symlink("/dev/zero", suite / "c.json")
    os.symlink(tmp_path / "gone.json", suite / "d.json")
    assert main(["inspect", "-q", str(suite)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 3, err
    for name, words in (("b.json", "FIFO"), ("c.json", "character device"), ("d.json", "No such file")):
        assert any(name in line and words in line for line in err.splitlines()), err
    assert main(["run", str(suite), "--out", str(tmp_path / "runs"), "-q", "-i", "2", "-w", "0"]) == 1
    assert "1 passed, 0 failed validation, 0 unsupported, 3 errored" in capsys.readouterr().out


def test_a_dnnbench_file_holding_one_result_twice_is_refused(tmp_path: Path, capsys) -> None:
    """The second copy was reported 'only in B' beside a verdict for the first: which one is the measurement?"""
    data = json.loads(DNB.read_text())
    data["graphs"][0]["results"] += data["graphs"][0]["results"]
    twice = tmp_path / "b.json"
    twice.write_text(json.dumps(data))
    assert main(["compare", str(DNB), str(twice)]) == 1
    _one_line(capsys, str(twice), "graphs[0].results[", "is already at graphs[0].results[")


def test_ingest_refuses_a_nan_timestamp(tmp_path: Path, capsys) -> None:
    """parse_int reads "nan" as an empty cell, so the kernel became one with no start, exit 0."""
    lines = KERNEL_TRACE.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace(",21000,25000,", ",nan,25000,", 1)
    bad = tmp_path / "kernel_trace.csv"
    bad.write_text("".join(lines))
    assert main(["ingest", str(bad), "--out", str(tmp_path / "o"), "-q"]) == 1
    _one_line(capsys, str(bad), "line 2", "'Start_Timestamp'", "not a timestamp: 'nan'")


def test_ingest_onto_a_full_disk_is_one_line(tmp_path: Path, capsys, monkeypatch) -> None:
    """The full file system is simulated (ENOSPC from the atomic writer): it was an OSError traceback."""
    import hipdnn_trace.profilers.ingest as ingest

    def full(path, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))
    monkeypatch.setattr(ingest, "write_atomic", full)
    assert main(["ingest", str(KERNEL_TRACE), "--out", str(tmp_path / "o"), "-q"]) == 1
    _one_line(capsys, "kernels.csv", "cannot write (No space left on device)")


@pytest.mark.parametrize("dtype", ["int8", "boolean"])
def test_torch_runs_the_integer_and_boolean_matmuls_inspect_says_it_can(tmp_path: Path, capsys, dtype) -> None:
    """int8 products wrapped around in torch (FAIL 4788/8192 against the saturated reference) and torch has no
    boolean matmul on the CPU (an error row): now both are multiplied in float32 and stored as hipDNN does."""
    pytest.importorskip("torch")
    graph = json.loads(GRAPH.read_text())
    for t in graph["tensors"]:
        t["data_type"] = dtype
    path = tmp_path / f"mm_{dtype}.json"
    path.write_text(json.dumps(graph | {"io_data_type": dtype}))
    assert main(["inspect", "--json", str(path)]) == 0
    torch_row = next(b for b in json.loads(capsys.readouterr().out)[0]["backends"] if b["name"] == "torch")
    assert torch_row["supported"]
    assert main(["run", str(path), "-b", "torch", "--out", str(tmp_path / "runs"), "-q", "-i", "2", "-w", "0"]) == 0
    assert "1 passed" in capsys.readouterr().out

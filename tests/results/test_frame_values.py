"""compare and report refuse values no run writes in ab.csv and oracle.csv (results/frame_values.py; issue 33's
fourth attack: an edited ab.csv's negative or NaN ratios and verdicts, and regret below 0, were shown as
measured), naming file, line, graph and column; what a run can write (a NaN ratio beside UNDECIDED, an
empty regret beside a flag) is still read."""

from __future__ import annotations

import csv
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from one_line import one_line_error

from hipdnn_trace.cli import main
from hipdnn_trace.results.rundir import load_run

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "tests" / "support"
GRAPH = ROOT / "graphs" / "matmul" / "matmul_2d_fp32.json"
Edit = Callable[[list[list[str]]], list[list[str]]]


def _set(**cells: str) -> Edit:
    def edit(rows: list[list[str]]) -> list[list[str]]:
        for column, value in cells.items():
            rows[1][rows[0].index(column)] = value
        return rows
    return edit


def _twice(rows: list[list[str]]) -> list[list[str]]:
    return rows + rows[1:2]


def _damaged(source: Path, tmp_path: Path, file: str, edit: Edit) -> Path:
    folder = tmp_path / "D"
    shutil.copytree(source, folder)
    path = folder / file
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerows(edit(rows))
    return folder


@pytest.fixture(scope="module")
def ab_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An interleaved A/A on the CPU reference: one ab.csv row."""
    runs = tmp_path_factory.mktemp("ab")
    assert main(["run", str(GRAPH), "--a", "reference", "--b", "reference", "--ab-max-seconds", "5", "-q",
                 "--out", str(runs), "--run-id", "AB"]) == 0
    assert load_run(runs / "AB", strict=True).ab.height == 1
    return runs / "AB"


@pytest.mark.parametrize("command", ["compare", "report"])
@pytest.mark.parametrize(("edit", "words"), [
    (_set(ratio="-1.5"), ("'ratio' is -1.5", "above 0")),
    (_set(ratio="nan", verdict="SAME"), ("'ratio' is nan", "NaN only beside UNDECIDED")),
    (_set(ratio="0"), ("'ratio' is 0.0",)),
    (_set(verdict="MAYBE"), ("'verdict' is 'MAYBE'", "FASTER, SLOWER, SAME, UNDECIDED")),
    (_set(verdict=""), ("'verdict' is None",)),
    (_set(ci_low="1.5", ci_high="1.6", verdict="FASTER"), ("'verdict' is 'FASTER'", "give SLOWER")),
    (_set(ci_low="-0.5"), ("'ci_low' is -0.5",)),
    (_set(confidence="2"), ("'confidence' is 2.0", "between 0 and 1")),
    (_set(rounds="-3"), ("'rounds' is -3",)),
    (_twice, ("recorded twice (lines 2 and 3)",)),
], ids=["negative ratio", "NaN ratio", "zero ratio", "unknown verdict", "no verdict", "verdict against interval",
        "negative ci", "confidence 2", "negative rounds", "row twice"])
def test_an_edited_ab_csv_is_refused(ab_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str,
                                     edit: Edit, words: tuple[str, ...]) -> None:
    damaged = _damaged(ab_run, tmp_path, "ab.csv", edit)
    argv = ["compare", str(damaged)] if command == "compare" else ["report", str(damaged), "-o",
                                                                     str(tmp_path / "r.html")]
    capsys.readouterr()
    assert main(argv) == 1
    one_line_error(capsys, str(damaged / "ab.csv"), *words)


def test_what_an_ab_with_no_measured_round_writes_is_read(ab_run: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Every round without a positive median: ratio and interval NaN, UNDECIDED (bench/ab.py)."""
    folder = _damaged(ab_run, tmp_path, "ab.csv", _set(ratio="NaN", ci_low="NaN", ci_high="NaN", verdict="UNDECIDED"))
    assert main(["compare", str(folder)]) == 0
    assert "1 UNDECIDED" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["compare", "report", "merge"])
@pytest.mark.parametrize(("edit", "words"), [
    (_set(regret="-2"), ("'regret' is -2.0", "above 0")),
    (_set(regret="nan"), ("'regret' is nan",)),
    (_set(regret="0"), ("'regret' is 0.0",)),
    (_set(regret="7.5"), ("'regret' is 7.5", "not ootb_ms / tuned_ms")),
    (_set(ootb_ms="inf"), ("'ootb_ms' is inf",)),
    (_set(flag="fine"), ("'flag' is 'fine'", "faster-but-wrong")),
    (_twice, ("recorded twice (lines 2 and 3)",)),
], ids=["negative regret", "NaN regret", "zero regret", "regret not the ratio", "infinite time", "unknown flag",
        "row twice"])
def test_an_edited_oracle_csv_is_refused(oracle_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         command: str, edit: Edit, words: tuple[str, ...]) -> None:
    damaged = _damaged(oracle_run, tmp_path, "oracle.csv", edit)
    argv = {"compare": ["compare", str(oracle_run), str(damaged)],
            "report": ["report", str(damaged), "-o", str(tmp_path / "r.html")],
            "merge": ["merge", str(damaged), "--out", str(tmp_path / "m")]}[command]
    capsys.readouterr()
    assert main(argv) == 1
    one_line_error(capsys, str(damaged / "oracle.csv"), "line", *words)


def test_what_an_oracle_pair_that_was_not_compared_writes_is_read(oracle_run: Path, tmp_path: Path) -> None:
    folder = _damaged(oracle_run, tmp_path, "oracle.csv", _set(regret="", tuned_ms="", flag="not-compared"))
    assert main(["report", str(folder), "-o", str(tmp_path / "r.html")]) == 0


@pytest.mark.parametrize(("column", "value"), [("status", "fine"), ("validation", "mostly"), ("median", "-0.5"),
                                               ("n", "-5")])
def test_an_edited_summary_word_or_negative_statistic_is_refused(ab_run: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str], column: str,
                                                                 value: str) -> None:
    damaged = _damaged(ab_run, tmp_path, "summary.csv", _set(**{column: value}))
    capsys.readouterr()
    assert main(["report", str(damaged), "-o", str(tmp_path / "r.html")]) == 1
    one_line_error(capsys, str(damaged / "summary.csv"), "line 2", repr(column))

"""``hipdnn-trace compare`` through the CLI entry point: outputs and exit codes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl
import pytest

from hipdnn_trace.cli import main


def _runs(make_run, timings, shift: float = 1.0):
    a = make_run("A", {"fast": timings(1.0, 0.03, 60), "slow": timings(5.0, 0.03, 60)})
    b = make_run("B", {"fast": timings(1.0, 0.03, 60), "slow": timings(5.0 * shift, 0.03, 60)})
    return str(a), str(b)


def test_no_change_exits_0_with_a_table(make_run, timings, capsys) -> None:
    assert main(["compare", *_runs(make_run, timings)]) == 0
    out = capsys.readouterr().out
    assert "verdicts: 0 SLOWER, 0 FASTER, 2 SAME, 0 INCONCLUSIVE" in out
    assert "geomean B/A time over 2 of 2 graph rows:" in out


def test_regression_exits_3_and_is_highlighted(make_run, timings, capsys) -> None:
    assert main(["compare", *_runs(make_run, timings, 1.25)]) == 3
    out = capsys.readouterr().out
    assert "top regressions (B/A time):" in out
    assert out.splitlines()[4].startswith("slow ")  # SLOWER rows come first
    assert "SLOWER" in out.splitlines()[4]


def test_csv_and_json_outputs(make_run, timings, capsys, tmp_path: Path) -> None:
    csv_path, json_path = tmp_path / "out" / "t.csv", tmp_path / "out" / "t.json"
    code = main(["compare", *_runs(make_run, timings, 0.8), "--format", "json",
                 "--csv", str(csv_path), "--json", str(json_path), "--seed", "3"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(json_path.read_text())
    assert printed["counts"]["FASTER"] == 1 and printed["settings"]["seed"] == 3
    table = pl.read_csv(csv_path)
    assert set(table["verdict"]) == {"FASTER", "SAME"}
    assert table.columns[:3] == ["graph", "graph_id", "config"]


def test_every_compare_output_names_the_one_ratio_b_over_a_time(make_run, timings, capsys) -> None:
    """B 25% slower: the console column is named "B/A time (>1: B slower)" and shows 1.25, the CSV's
    ratio column and the JSON rows hold the same number, and the JSON says what it is."""
    runs = _runs(make_run, timings, 1.25)
    assert main(["compare", *runs]) == 3
    lines = capsys.readouterr().out.splitlines()
    header = next(ln for ln in lines if ln.startswith("graph "))
    assert "B/A time (>1: B slower)" in header
    slow = next(ln for ln in lines if ln.startswith("slow "))
    cell = slow[header.index("B/A time"):].split()[0]
    assert float(cell) == pytest.approx(1.25, abs=0.03)
    assert main(["compare", *runs, "--format", "csv"]) == 3
    table = pl.read_csv(io.StringIO(capsys.readouterr().out))
    row = table.filter(pl.col("graph") == "slow").row(0, named=True)
    assert row["ratio"] == pytest.approx(row["median_b"] / row["median_a"]) and row["ratio"] > 1.2
    assert main(["compare", *runs, "--format", "json"]) == 3
    printed = json.loads(capsys.readouterr().out)
    assert printed["settings"]["ratio"] == "median(B) / median(A) of kernel time; > 1: B slower"
    assert next(r for r in printed["rows"] if r["graph"] == "slow")["ratio"] == pytest.approx(row["ratio"])


def test_threshold_flag_changes_the_verdict(make_run, timings, capsys) -> None:
    runs = _runs(make_run, timings, 1.25)
    assert main(["compare", *runs, "--threshold", "0.5", "--format", "csv"]) == 0
    assert "SLOWER" not in capsys.readouterr().out


def test_mismatch_is_one_line_and_exit_1(make_run, timings, capsys) -> None:
    a = make_run("A", {"g": timings(1.0, 0.03, 20)})
    b = make_run("B", {"g": timings(1.0, 0.03, 20)}, timing={"timer": "cuda-event"})
    assert main(["compare", str(a), str(b)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "timer: 'host' vs 'cuda-event'" in err
    assert main(["compare", str(a), str(b), "--allow-mismatch"]) == 0


def test_bad_path_and_bad_flag_exit_1(tmp_path: Path, capsys) -> None:
    assert main(["compare", str(tmp_path / "nope"), str(tmp_path)]) == 1
    assert "no such run directory" in capsys.readouterr().err
    assert main(["compare", "a", "b", "--by", "bogus"]) == 1
    assert "invalid choice: 'bogus'" in capsys.readouterr().err
    assert main(["compare", "a", "b", "--drift", "lots"]) == 1
    assert "--drift must be auto, off or a fraction" in capsys.readouterr().err


def test_runs_sharing_few_graphs_make_no_overall_claim(make_run, timings, tmp_path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    a = make_run("A", {f"g{i}": timings(1.0, 0.02, 30) for i in range(8)})
    b = make_run("B", {"g0": timings(0.6, 0.02, 30), **{f"h{i}": timings(1.0, 0.02, 30) for i in range(7)}})
    assert main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "no overall claim: only 1 of 15 graph rows are in both runs" in out and "overall)" not in out
    assert main(["compare", str(a), str(b), "--min-coverage", "0"]) == 0
    assert "geomean B/A time over 1 of 15 graph rows" in capsys.readouterr().out

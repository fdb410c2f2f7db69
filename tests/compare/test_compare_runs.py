"""compare_runs on synthetic run directories: matching, method checks, validation diffs."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from hipdnn_trace.compare import SAME, SLOWER, TimingMismatchError, compare_runs
from hipdnn_trace.errors import UserError


def test_method_mismatch_is_refused_and_names_the_field(make_run, timings) -> None:
    a = make_run("A", {"g": timings(1, 0.05, 20)})
    b = make_run("B", {"g": timings(1, 0.05, 20)}, timing={"cache": "cold"})
    with pytest.raises(TimingMismatchError, match=r"cache mode: 'warm' vs 'cold'.*--allow-mismatch"):
        compare_runs(a, b)
    allowed = compare_runs(a, b, allow_mismatch=True)
    assert allowed.method_differences == ["cache mode: 'warm' vs 'cold'"]
    assert any("timed differently" in n for n in allowed.notes)


@pytest.mark.parametrize("field,value", [("timer", "cuda-event"), ("clock_control", "locked")])
def test_other_method_fields_are_checked(make_run, timings, field, value) -> None:
    a = make_run("A", {"g": timings(1, 0.05, 20)})
    b = make_run("B", {"g": timings(1, 0.05, 20)}, timing={field: value})
    with pytest.raises(TimingMismatchError):
        compare_runs(a, b)


def test_iteration_counts_may_differ(make_run, timings) -> None:
    a = make_run("A", {"g": timings(1, 0.05, 20)}, timing={"iters": 20})
    b = make_run("B", {"g": timings(1, 0.05, 80)}, timing={"iters": 80, "warmup": 10})
    row = compare_runs(a, b).table.row(0, named=True)
    assert (row["n_a"], row["n_b"]) == (20, 80)


def test_unmatched_and_failed_graphs_are_reported(make_run, timings) -> None:
    a = make_run("A", {"both": timings(1, 0.05, 30), "only_a": timings(1, 0.05, 30),
                       "broken": timings(1, 0.05, 30)})
    b = make_run("B", {"both": timings(1, 0.05, 30), "only_b": timings(1, 0.05, 30),
                       "broken": None})
    result = compare_runs(a, b)
    assert result.unmatched.select("only_in", "graph").rows() == [("A", "only_a"), ("B", "only_b")]
    broken = result.table.filter(pl.col("graph") == "broken").row(0, named=True)
    assert broken["status_b"] == "failed" and broken["n_b"] == 0
    assert broken["verdict"] == "INCONCLUSIVE"
    assert "no timed samples in B" in broken["note"]


def test_newly_failing_validation_is_listed_and_exits_2(make_run, timings) -> None:
    samples = timings(1, 0.02, 50)
    a = make_run("A", {"g": samples, "h": samples},
                 validation=[{"graph": "g", "passed": True, "max_rel": 1e-7},
                             {"graph": "h", "passed": False, "max_rel": 0.5}])
    b = make_run("B", {"g": samples, "h": samples},
                 validation=[{"graph": "g", "passed": False, "max_rel": 0.2},
                             {"graph": "h", "passed": True, "max_rel": 1e-7}])
    result = compare_runs(a, b)
    assert result.validation_changes.select("graph", "change").rows() == [
        ("g", "newly failing"), ("h", "newly passing")]
    assert result.counts[SAME] == 2
    assert result.exit_code == 2


def test_slower_wins_the_exit_code(make_run, timings) -> None:
    a = make_run("A", {"g": timings(1.0, 0.03, 100)})
    b = make_run("B", {"g": timings(1.2, 0.03, 100)})
    result = compare_runs(a, b)
    assert result.counts[SLOWER] == 1 and result.exit_code == 3
    assert result.top(SLOWER).height == 1
    assert result.geomean == pytest.approx(result.table["ratio"][0])
    assert result.geomean_ci[0] > 1.1


def _engine_runs(make_run, timings, slow_engine_b: str):
    a = make_run("A", {("g", "cpu", "e1"): timings(1.0, 0.02, 60),
                       ("g", "cpu", "e2"): timings(2.0, 0.02, 60)})
    b = make_run("B", {("g", "cpu", "e1"): timings(1.0 if slow_engine_b == "e2" else 3.0, 0.02, 60),
                       ("g", "cpu", "e2"): timings(2.0, 0.02, 60)})
    return a, b


def test_by_graph_refuses_several_engines(make_run, timings) -> None:
    a, b = _engine_runs(make_run, timings, "e2")
    with pytest.raises(UserError, match="--by engine"):
        compare_runs(a, b, by="graph")


def test_by_engine_pairs_engines(make_run, timings) -> None:
    a, b = _engine_runs(make_run, timings, "e1")
    table = compare_runs(a, b, by="engine").table.sort("engine_a")
    assert table.select("engine_a", "engine_b", "verdict").rows() == [
        ("e1", "e1", SLOWER), ("e2", "e2", SAME)]


def test_by_best_compares_each_runs_fastest_engine(make_run, timings) -> None:
    a, b = _engine_runs(make_run, timings, "e1")  # B's e1 got slow: its best is now e2
    row = compare_runs(a, b, by="best").table.row(0, named=True)
    assert (row["engine_a"], row["engine_b"]) == ("e1", "e2")
    assert row["verdict"] == SLOWER and row["ratio"] == pytest.approx(2.0, rel=0.05)


def test_one_config_each_pairs_across_config_names(make_run, timings) -> None:
    a = make_run("A", {("g", "torch", "default"): timings(1, 0.02, 40)})
    b = make_run("B", {("g", "hipdnn", "default"): timings(1, 0.02, 40)})
    result = compare_runs(a, b)
    row = result.table.row(0, named=True)
    assert (row["config_a"], row["config_b"], row["config"]) == ("torch", "hipdnn", "torch vs hipdnn")
    assert any("paired by graph" in n for n in result.notes)


def test_inputs_may_be_files_inside_the_run(make_run, timings) -> None:
    a = make_run("A", {"g": timings(1, 0.02, 40)})
    b = make_run("B", {"g": timings(1, 0.02, 40)})
    via_files = compare_runs(a / "summary.json", b / "iterations.parquet")
    assert via_files.table.equals(compare_runs(a, b).table)
    assert (via_files.label_a, via_files.label_b) == ("A", "B")


def test_bare_parquet_has_unknown_method(make_run, timings, tmp_path: Path) -> None:
    a = make_run("A", {"g": timings(1, 0.02, 40)})
    b = make_run("B", {"g": timings(1, 0.02, 40)})
    bare = tmp_path / "elsewhere" / "b.parquet"
    bare.parent.mkdir()
    shutil.copy(b / "iterations.parquet", bare)
    with pytest.raises(TimingMismatchError, match="timing method unknown for run B"):
        compare_runs(a, bare)
    row = compare_runs(a, bare, allow_mismatch=True).table.row(0, named=True)
    assert row["n_b"] == 40 and row["status_b"] == "ok"


@pytest.mark.parametrize("make_bad,match", [
    (lambda root: root / "missing", "no such run directory"),
    (lambda root: root, "not a run directory"),
])
def test_bad_inputs_are_user_errors(make_run, timings, tmp_path, make_bad, match) -> None:
    a = make_run("A", {"g": timings(1, 0.02, 10)})
    with pytest.raises(UserError, match=match):
        compare_runs(a, make_bad(tmp_path))


def test_unfinished_run_is_noted(make_run, timings) -> None:
    a = make_run("A", {"g": timings(1, 0.02, 10)})
    b = make_run("B", {"g": timings(1, 0.02, 10)}, status="interrupted")
    assert "run B is 'interrupted': its suite may be incomplete" in compare_runs(a, b).notes


def test_loaded_runs_pass_through(make_run, timings) -> None:
    from hipdnn_trace.compare.loading import load_input

    a = make_run("A", {"g": timings(1, 0.02, 20)})
    b = make_run("B", {"g": timings(1, 0.02, 20)})
    assert compare_runs(load_input(a), load_input(b)).table.equals(compare_runs(a, b).table)


def test_warmup_iterations_are_not_samples(make_run, timings) -> None:
    a = make_run("A", {"g": timings(1, 0.02, 30)}, warmup={"g": [50.0] * 5})
    b = make_run("B", {"g": timings(1, 0.02, 30)})
    row = compare_runs(a, b).table.row(0, named=True)
    assert row["n_a"] == 30 and row["verdict"] == SAME

"""The library entry points: ``hipdnn_trace.compare`` and ``hipdnn_trace.load_run``."""

from __future__ import annotations

import importlib

import hipdnn_trace
from hipdnn_trace.compare import Comparison, compare_runs


def test_compare_is_callable_even_after_the_subpackage_is_imported(make_run, timings) -> None:
    importlib.import_module("hipdnn_trace.compare.stats")  # binds hipdnn_trace.compare
    a = make_run("A", {"g": timings(1.0, 0.02, 30)})
    b = make_run("B", {"g": timings(1.0, 0.02, 30)})
    result = hipdnn_trace.compare(a, b, threshold=0.1, seed=1)
    assert isinstance(result, Comparison)
    assert result.table.equals(compare_runs(a, b, threshold=0.1, seed=1).table)
    assert result.settings["threshold"] == 0.1


def test_load_run_frames_feed_compare(make_run, timings) -> None:
    a = hipdnn_trace.load_run(make_run("A", {"g": timings(1.0, 0.02, 30)}))
    b = hipdnn_trace.load_run(make_run("B", {"g": timings(1.5, 0.02, 30)}))
    assert a.iterations.filter(a.iterations["phase"] == "timed").height == 30
    assert compare_runs(a, b).exit_code == 3


def test_comparison_repr_is_one_line_and_names_the_frames(make_run, timings) -> None:
    a = make_run("A", {"g": timings(1.0, 0.02, 30)})
    b = make_run("B", {"g": timings(1.5, 0.02, 30)})
    text = repr(hipdnn_trace.compare(a, b, seed=1))
    assert "\n" not in text and len(text) < 300
    assert "1 matched pair(s)" in text and "SLOWER" in text and ".table" in text


def test_run_rejects_a_misspelled_option_naming_the_flag(tmp_path) -> None:
    import pytest

    from hipdnn_trace.errors import UserError

    with pytest.raises(UserError, match=r"unknown option 'itres' \(did you mean 'iters'\?\)"):
        hipdnn_trace.run("graphs/pool", out=tmp_path, itres=50)
    assert not any(tmp_path.iterdir())


def test_run_that_cannot_start_raises_the_reason_itself_and_writes_nothing(tmp_path, capsys) -> None:
    """The plan's own UserError, not text read back from stderr: nothing printed, no run folder."""
    import pytest

    from hipdnn_trace.errors import UserError

    capsys.readouterr()
    with pytest.raises(UserError, match=r"^\S*no-such-folder: no such file or folder$"):
        hipdnn_trace.run(str(tmp_path / "no-such-folder"), out=tmp_path / "runs", iters=2)
    assert capsys.readouterr() == ("", "") and not (tmp_path / "runs").exists()


def test_run_quiet_prints_nothing_and_its_repr_is_a_short_summary(tmp_path, capsys) -> None:
    from pathlib import Path

    graphs = Path(__file__).resolve().parents[2] / "graphs" / "pointwise"
    capsys.readouterr()
    run = hipdnn_trace.run([str(graphs / "gelu_fp32.json"), str(graphs / "swish_fp32.json")], out=tmp_path,
                           run_id="q", iters=2, warmup=0, trace=False)
    assert capsys.readouterr() == ("", "")   # quiet is the default: not even the count line
    text = repr(run)
    lines = text.splitlines()
    assert len(lines) <= 4 and len(text) < 400, text
    assert lines[0] == f"Run({tmp_path / 'q'}: q, status complete, exit code 0"
    assert "2 graph(s) x 1 config(s) [reference]: 2 ok" in lines[1]
    assert "summary 2" in text and "iterations 4" in text
    hipdnn_trace.run(str(graphs / "gelu_fp32.json"), out=tmp_path, run_id="loud", iters=2, warmup=0,
                     trace=False, quiet=False)
    assert capsys.readouterr().out.splitlines()[-1].startswith("done in")


def test_comparison_table_csv_and_json_are_in_the_console_order(make_run, timings, capsys) -> None:
    """Regressions first (largest first), then improvements, then the rest: the same in .table,
    --format csv, --format json and the console, not the graph_id hash order."""
    import io
    import json

    import polars as pl

    from hipdnn_trace.cli import main

    medians_a = {"a_same": 1.0, "b_slow": 1.0, "c_fast": 1.0, "d_slower": 1.0, "e_same": 2.0}
    medians_b = {"a_same": 1.0, "b_slow": 1.3, "c_fast": 0.7, "d_slower": 1.6, "e_same": 2.0}
    a = make_run("A", {g: timings(m, 0.01, 40) for g, m in medians_a.items()})
    b = make_run("B", {g: timings(m, 0.01, 40) for g, m in medians_b.items()})
    result = hipdnn_trace.compare(a, b, seed=1, drift="off")
    order = result.table["graph"].to_list()
    assert order[:3] == ["d_slower", "b_slow", "c_fast"] and set(order[3:]) == {"a_same", "e_same"}
    assert order != sorted(order, key=lambda g: result.table.filter(pl.col("graph") == g)["graph_id"][0])
    assert main(["compare", str(a), str(b), "--drift", "off", "--format", "csv"]) == 3
    assert pl.read_csv(io.StringIO(capsys.readouterr().out))["graph"].to_list() == order
    assert main(["compare", str(a), str(b), "--drift", "off", "--format", "json"]) == 3
    assert [r["graph"] for r in json.loads(capsys.readouterr().out)["rows"]] == order
    assert main(["compare", str(a), str(b), "--drift", "off"]) == 3
    console = [ln.split()[0] for ln in capsys.readouterr().out.splitlines() if ln.split()[:1]
               and ln.split()[0] in medians_a]
    assert console[:len(order)] == order

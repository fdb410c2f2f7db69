"""Bad input gets one line naming what is wrong and exit code 1, never a traceback;
a suite goes on past a failing graph."""

from __future__ import annotations

import json
from pathlib import Path

import graph_dicts as hg
import polars as pl
import pytest

from hipdnn_trace.cli import main
from hipdnn_trace.results.rundir import load_run


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("argv, needle", [
    (["run", "graphs/none-such.json"], "no such file"),
    (["run", "x.json", "--iters", "many"], "--iters"),
    (["run", "x.json", "--backend", "nope"], "--backend"),
    (["run", "x.json", "--max-rel-ci", "5"], "between 0 and 1"),
    (["run", "x.json", "--format", "xml"], "formats are"),
    (["run", "x.json", "--a", "reference"], None),
    (["frobnicate"], "invalid choice"),
])
def test_bad_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str | None) -> None:
    hg.write(tmp_path, [hg.matmul(name="x")])
    argv = [a if a != "x.json" else str(tmp_path / "x.json") for a in argv]
    if argv[0] == "run":
        argv += ["--out", str(tmp_path / "runs")]
    assert main(argv) == 1
    err = _one_line_error(capsys)
    if needle:
        assert needle in err


def test_suite_continues_past_a_broken_graph(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "g"
    hg.write(folder, [hg.matmul(), hg.conv()])
    (folder / "broken.json").write_text('{"name": "broken", "tensors": [')
    bad_conv = hg.conv(name="bad_conv")
    bad_conv["tensors"][2]["dims"] = [2, 8, 5, 5]
    (folder / "bad_conv.json").write_text(json.dumps(bad_conv))
    code = main(["run", str(folder), "-w", "0", "-i", "3", "--out", str(tmp_path / "runs"), "--run-id", "s"])
    out = capsys.readouterr().out
    assert code == 1                    # something errored
    run = load_run(tmp_path / "runs" / "s")
    by_source = {Path(r["source"]).name: r for r in run.summary.iter_rows(named=True)}
    assert by_source["broken.json"]["status"] == "error" and "invalid JSON" in by_source["broken.json"]["error"]
    assert "$.nodes[0].outputs.y_tensor_uid" in by_source["bad_conv.json"]["error"]
    assert by_source["mm_small.json"]["status"] == "ok" and by_source["conv_small.json"]["status"] == "ok"
    assert "2 passed, 0 failed validation, 0 unsupported, 2 errored" in out


def test_unsupported_op_is_a_row_not_a_crash(tmp_path: Path) -> None:
    g = hg.add_relu(name="softplus_graph")
    g["nodes"][1]["inputs"]["operation"] = "gen_index"
    hg.write(tmp_path / "g", [g, hg.matmul()])
    code = main(["run", str(tmp_path / "g"), "-w", "0", "-i", "2", "--out", str(tmp_path / "r"), "--run-id", "u",
                 "--quiet"])
    run = load_run(tmp_path / "r" / "u")
    statuses = dict(zip(run.summary["graph"], run.summary["status"]))
    assert statuses["mm_small"] == "ok"
    assert code in (0, 1)
    row = run.summary.filter(pl.col("graph") == "softplus_graph").row(0, named=True)
    assert row["status"] in ("unsupported", "error") and row["error"]


def test_existing_run_directory_is_not_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = hg.write(tmp_path / "g", [hg.matmul()])[0]
    assert main(["run", str(path), "-w", "0", "-i", "1", "--out", str(tmp_path / "r"), "--run-id", "x", "-q"]) == 0
    capsys.readouterr()
    assert main(["run", str(path), "--out", str(tmp_path / "r"), "--run-id", "x"]) == 1
    assert "already exists" in _one_line_error(capsys)


def test_graph_too_big_for_host_memory_is_refused_before_allocating(tmp_path: Path) -> None:
    import tracemalloc

    g = hg.matmul(name="huge", m=131072, k=131072, n=131072)     # 3 x 64 GiB fp32 tensors
    path = hg.write(tmp_path / "g", [g, hg.matmul()])
    tracemalloc.start()
    code = main(["run", str(tmp_path / "g"), "-w", "0", "-i", "1", "--out", str(tmp_path / "r"),
                 "--run-id", "m", "--quiet"])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert code == 1 and peak < 200 * 2**20
    run = load_run(tmp_path / "r" / "m")
    row = run.summary.filter(pl.col("graph") == "huge").row(0, named=True)
    assert row["status"] == "error" and "GiB of host memory" in row["error"] and row["graph_id"]
    assert run.summary.filter(pl.col("graph") == "mm_small")["status"].to_list() == ["ok"]
    assert path


def test_save_tensors_into_a_file_is_one_line_before_any_work(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = hg.write(tmp_path / "g", [hg.matmul()])[0]
    (tmp_path / "file").write_text("not a folder")
    assert main(["run", str(path), "--out", str(tmp_path / "r"), "--save-tensors", str(tmp_path / "file")]) == 1
    assert "--save-tensors" in _one_line_error(capsys)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("where", ["under_a_file", "is_a_file"])
@pytest.mark.parametrize("command", ["run", "merge"])
def test_an_out_that_cannot_be_a_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    command: str, where: str) -> None:
    path = hg.write(tmp_path / "g", [hg.matmul()])[0]
    assert main(["run", str(path), "-w", "0", "-i", "1", "--out", str(tmp_path / "r"), "--run-id", "a", "-q"]) == 0
    (tmp_path / "file").write_text("not a folder")
    out = tmp_path / "file" / "x" if where == "under_a_file" else tmp_path / "file"
    capsys.readouterr()
    if command == "run":
        argv = ["run", str(path), "--out", str(out.parent), "--run-id", out.name]
    else:
        argv = ["merge", str(tmp_path / "r" / "a"), "--out", str(out)]
    assert main(argv) == 1
    assert str(out) in _one_line_error(capsys)


@pytest.mark.parametrize(("backend", "module", "hint"), [
    ("cudnn", "cudnn", "pip install 'hipdnn-trace[nvidia]'"),
    ("torch", "torch", "pip install 'hipdnn-trace[torch]'"),
])
def test_a_missing_backend_library_is_one_line_before_anything_is_created(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, backend: str,
        module: str, hint: str) -> None:
    import importlib.util

    find_spec = importlib.util.find_spec   # the library hidden where it is installed (torch is, in CI)

    def hidden(name: str, *args: object):
        return None if name == module or name.startswith(module + ".") else find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", hidden)
    graphs = Path(__file__).resolve().parents[2] / "graphs" / "pool"
    assert main(["run", str(graphs), "--backend", backend, "--out", str(tmp_path / "runs")]) == 1
    err = _one_line_error(capsys)
    assert err.startswith(f"hipdnn-trace run: error: --backend {backend}: ") and hint in err
    assert not (tmp_path / "runs").exists(), "no run directory for a run that cannot start"


@pytest.mark.parametrize("command", ["run", "compare", "report", "inspect", "merge", "ingest"])
def test_every_subcommand_help_ends_with_examples(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0   # cli.main turns argparse's exit into a return code
    help_text = capsys.readouterr().out
    examples = help_text[help_text.lower().index("examples:"):]
    assert f"hipdnn-trace {command} " in examples


def test_profile_set_without_a_counter_profiler_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = Path(__file__).resolve().parents[2] / "graphs" / "pool" / "maxpool_2d_index_fp32.json"
    assert main(["run", str(graph), "--profile-set", "memory", "--out", str(tmp_path / "runs")]) == 1
    assert "--profile-set memory chooses hardware counters: it needs --profile ncu" in _one_line_error(capsys)


def test_engine_list_on_a_backend_without_engines_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    graph = Path(__file__).resolve().parents[2] / "graphs" / "pool" / "maxpool_2d_index_fp32.json"
    assert main(["run", str(graph), "--engine", "list"]) == 0
    assert "one way to run: the reference backend has no engines to choose from" in capsys.readouterr().out


def test_a_long_cpu_suite_is_estimated_up_front() -> None:
    from hipdnn_trace.bench.config import Config
    from hipdnn_trace.bench.graph_run import RunSettings
    from hipdnn_trace.bench.loop import LoopSettings
    from hipdnn_trace.graph.sources import expand
    from hipdnn_trace.runs.estimates import estimate_note, suite_estimates

    configs = [Config("reference", "reference")]
    perf = expand([str(Path(__file__).resolve().parents[2] / "graphs" / "perf" / "conv")])
    note = estimate_note(suite_estimates(perf, configs, RunSettings(), None, False))
    assert note is not None and note.startswith("estimate: about") and "longest resnet50_" in note
    small = expand([str(Path(__file__).resolve().parents[2] / "graphs" / "pool")])
    quick = RunSettings(loop=LoopSettings(warmup=1, iters=3))
    assert estimate_note(suite_estimates(small, configs, quick, None, False)) is None


@pytest.mark.parametrize(("argv", "needle"), [
    (["--run-id", "../../x"], "must be a plain folder name inside --out"),
    (["--run-id", ".hidden"], "must be a plain folder name inside --out"),
    (["--atol", "inf"], "must be a finite number >= 0"),
    (["--rtol", "nan"], "must be a finite number >= 0"),
    (["--atol", "-1"], "must be a finite number >= 0"),
    (["--rtol", "1e300"], "would let any result pass validation"),
])
def test_flags_that_would_escape_out_or_neuter_validation_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    graph = Path(__file__).resolve().parents[2] / "graphs" / "pool" / "maxpool_2d_index_fp32.json"
    assert main(["run", str(graph), "--out", str(tmp_path / "runs"), *argv]) == 1
    assert needle in _one_line_error(capsys)
    assert not (tmp_path / "x").exists() and not (tmp_path / "runs").exists()


def test_an_unwritable_save_tensors_folder_fails_before_any_work(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    import os

    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    graph = Path(__file__).resolve().parents[2] / "graphs" / "pool" / "maxpool_2d_index_fp32.json"
    assert main(["run", str(graph), "--save-tensors", str(locked / "golden"), "--out", str(tmp_path / "r")]) == 1
    assert "--save-tensors" in _one_line_error(capsys) and not (tmp_path / "r").exists()


def test_save_tensors_into_a_file_path_fails_before_any_work(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    graph = Path(__file__).resolve().parents[2] / "graphs" / "pool" / "maxpool_2d_index_fp32.json"
    assert main(["run", str(graph), "--save-tensors", str(blocker / "golden"), "--out", str(tmp_path / "r")]) == 1
    assert "cannot write there" in _one_line_error(capsys) and not (tmp_path / "r").exists()

"""One gate for every file read (reliability issue, item 3): a device, a FIFO, a link to /dev/zero or an
oversized file where a recipe, run.json, run table, results file, profiler capture or cache entry is expected
is one line naming the file and why, exit 1, and never a hang or a read without end. Commands that could
block run in a subprocess with a timeout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from reliability_helpers import REPO, cli_env, graph_json

from hipdnn_trace import read_gate
from hipdnn_trace.bench.reference_cache import entry_key
from hipdnn_trace.graph.load import load_file

#: a gated command answers in well under this; a blocked one would not
TIMEOUT_S = 60


def hipdnn_trace(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hipdnn_trace", *map(str, args)], cwd=cwd, env=cli_env(),
                          capture_output=True, text=True, timeout=TIMEOUT_S)


def one_line(done: subprocess.CompletedProcess[str], *words: str) -> str:
    err = done.stderr.strip()
    assert done.returncode == 1, (done.returncode, done.stdout, err)
    assert "\n" not in err and "Traceback" not in err, err
    for word in words:
        assert word in err, err
    return err


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("graphs") / "gated.json"
    path.write_text(__import__("json").dumps(graph_json("gated")))
    return path


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory, graph: Path) -> Path:
    out = tmp_path_factory.mktemp("runs")
    done = hipdnn_trace("run", graph, "--out", out, "--run-id", "r", "-i", "2", "-w", "0", "-q", cwd=out)
    assert done.returncode == 0, done.stderr
    return out / "r"


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


# --------------------------------------------------------------- recipes


def test_run_config_dev_zero_is_refused_by_type(tmp_path: Path, graph: Path) -> None:
    done = hipdnn_trace("run", "--config", "/dev/zero", graph, "--out", tmp_path / "o", cwd=tmp_path)
    one_line(done, "--config /dev/zero", "character device")
    assert not (tmp_path / "o").exists()


def test_run_config_linked_to_dev_zero_is_refused_by_the_targets_type(tmp_path: Path, graph: Path) -> None:
    link = tmp_path / "recipe.toml"
    link.symlink_to("/dev/zero")
    one_line(hipdnn_trace("run", "--config", link, graph, cwd=tmp_path), str(link), "character device")


def test_run_config_fifo_does_not_block(tmp_path: Path, graph: Path) -> None:
    fifo = tmp_path / "recipe.toml"
    os.mkfifo(fifo)
    one_line(hipdnn_trace("run", "--config", fifo, graph, cwd=tmp_path), str(fifo), "FIFO")


def test_run_config_folder_is_refused(tmp_path: Path, graph: Path) -> None:
    one_line(hipdnn_trace("run", "--config", tmp_path, graph, cwd=tmp_path), str(tmp_path), "a folder")


def test_oversized_recipe_is_refused_unread(tmp_path: Path, graph: Path) -> None:
    recipe = tmp_path / "recipe.toml"
    with open(recipe, "wb") as fh:   # sparse: costs no disk
        fh.truncate(read_gate.RECIPE.budget + 1)
    one_line(hipdnn_trace("run", "--config", recipe, graph, cwd=tmp_path), str(recipe),
             f"over {read_gate.RECIPE.budget}")


# ------------------------------------------------------- run folders (compare, report, merge, resume)


@pytest.mark.parametrize("command", ["compare", "report", "merge"])
def test_run_json_linked_to_dev_zero_is_refused(tmp_path: Path, finished_run: Path, command: str) -> None:
    run = _copy(finished_run, tmp_path / "r")
    (run / "run.json").unlink()
    (run / "run.json").symlink_to("/dev/zero")
    argv = {"compare": [run, finished_run], "report": [run], "merge": [run, "--out", tmp_path / "m"]}[command]
    one_line(hipdnn_trace(command, *argv, cwd=tmp_path), str(run / "run.json"), "character device")


@pytest.mark.parametrize("command", ["compare", "report"])
def test_run_json_fifo_does_not_block(tmp_path: Path, finished_run: Path, command: str) -> None:
    run = _copy(finished_run, tmp_path / "r")
    (run / "run.json").unlink()
    os.mkfifo(run / "run.json")
    argv = [run, finished_run] if command == "compare" else [run]
    one_line(hipdnn_trace(command, *argv, cwd=tmp_path), str(run / "run.json"), "FIFO")


def test_resume_with_a_fifo_run_json_does_not_block(tmp_path: Path, finished_run: Path) -> None:
    run = _copy(finished_run, tmp_path / "r")
    (run / "run.json").unlink()
    os.mkfifo(run / "run.json")
    one_line(hipdnn_trace("run", "--resume", run, cwd=tmp_path), f"--resume {run}", "run.json")


def test_oversized_run_json_is_refused_unread(tmp_path: Path, finished_run: Path) -> None:
    run = _copy(finished_run, tmp_path / "r")
    with open(run / "run.json", "r+b") as fh:   # sparse tail: costs no disk
        fh.truncate(read_gate.RUN_JSON.budget + 1)
    one_line(hipdnn_trace("report", run, cwd=tmp_path), str(run / "run.json"), f"over {read_gate.RUN_JSON.budget}")


def test_summary_table_fifo_is_refused(tmp_path: Path, finished_run: Path) -> None:
    run = _copy(finished_run, tmp_path / "r")
    for name in ("breakdown.csv", "breakdown.parquet"):
        if (run / name).exists():
            (run / name).unlink()
            os.mkfifo(run / name)
            break
    else:
        pytest.skip("this run wrote no breakdown table")
    one_line(hipdnn_trace("report", run, cwd=tmp_path), str(run / name), "FIFO")


# ------------------------------------------------------- results files, captures


def test_dnnbench_results_fifo_and_oversized_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "results.json"
    os.mkfifo(fifo)
    newest = REPO / "tests" / "data" / "dnnbench" / "newest-layout.json"
    one_line(hipdnn_trace("compare", newest, fifo, cwd=tmp_path), str(fifo))
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(read_gate.DNB_RESULTS.budget + 1)
    one_line(hipdnn_trace("compare", newest, big, cwd=tmp_path), str(big), f"over {read_gate.DNB_RESULTS.budget}")


def test_ingest_of_a_fifo_or_dev_zero_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "kernel_trace.csv"
    os.mkfifo(fifo)
    one_line(hipdnn_trace("ingest", fifo, "--out", tmp_path / "o", cwd=tmp_path), str(fifo), "FIFO")
    link = tmp_path / "counter_collection.csv"
    link.symlink_to("/dev/zero")
    one_line(hipdnn_trace("ingest", link, "--out", tmp_path / "o", cwd=tmp_path), str(link), "character device")


# ------------------------------------------------------------- the reference cache


@pytest.mark.parametrize("planted", ["npy", "manifest"])
def test_fifo_as_a_cache_entry_does_not_block_and_is_computed_again(tmp_path: Path, graph: Path,
                                                                     planted: str) -> None:
    cache = tmp_path / "cache"
    argv = ["run", graph, "--reference-cache", cache, "-i", "1", "-w", "0", "--out", tmp_path / "o"]
    assert hipdnn_trace(*argv, "--run-id", "a", cwd=tmp_path).returncode == 0
    g = load_file(graph)
    entry = cache / entry_key(g, 0)
    target = entry / (f"{g.output_tensors[0].uid}.npy" if planted == "npy" else "entry.json")
    target.unlink()
    os.mkfifo(target)
    done = hipdnn_trace(*argv, "--run-id", "b", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "FIFO" in done.stdout and "computed again" in done.stdout, done.stdout
    meta = __import__("json").loads((tmp_path / "o" / "b" / "run.json").read_text())
    assert meta["reference_cache"]["graphs"] == {"gated": "computed, cached"}
    assert target.is_file()   # the entry was replaced by a whole one


# ------------------------------------------------------------- the gate itself


def test_gate_refuses_each_special_kind_in_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    cases = {fifo: "FIFO", tmp_path: "a folder", Path("/dev/null"): "character device",
             tmp_path / "absent": "cannot read"}
    for path, why in cases.items():
        with pytest.raises(read_gate.ReadRefused, match=why) as info:
            read_gate.read_bytes(path, read_gate.RECIPE)
        assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)


def test_gate_reads_a_regular_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(b'{"a": [1, 2]}' + b" " * 3_000_000)
    assert read_gate.read_json(path, read_gate.RUN_JSON) == {"a": [1, 2]}
    with pytest.raises(read_gate.ReadRefused, match=f"over {read_gate.RECIPE.budget}"):
        read_gate.read_bytes(path, read_gate.RECIPE)
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"a": \xff}')
    with pytest.raises(read_gate.ReadRefused, match="not UTF-8|not valid JSON"):
        read_gate.read_json(bad, read_gate.RUN_JSON)

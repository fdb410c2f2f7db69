"""Plugin-path A/B through the real command line, in child processes that import the
stand-in hipdnn_frontend (tests/support/stand_ins/ on PYTHONPATH) and log every binding call.

hipDNN's plugin paths are process-wide (set before the first handle; plugins stay
loaded), so one process serves one plugin set: A/A on one build works in one process,
A/B of two builds needs a process per configuration (docs/amd.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
from amd_helpers import REPO, STAND_INS, matmul, write_graphs


def _run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, list[list]]:
    log = tmp_path / "calls.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HIPDNN_TRACE_", "STAND_IN_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(STAND_INS), str(REPO)]), STAND_IN_HIPDNN_LOG=str(log),
               STAND_IN_HIPDNN_GENERATION="newest")
    graph = write_graphs(tmp_path / "g", [matmul()])[0]
    proc = subprocess.run([sys.executable, "-m", "hipdnn_trace", "run", str(graph), "--backend", "hipdnn",
                           "-w", "1", "-i", "2", "--out", str(tmp_path / "runs"), "--run-id", "ab", "--no-trace",
                           *args], env=env, capture_output=True, text=True, timeout=600)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return proc, calls


def test_one_plugin_build_twice_shares_a_process_with_stand_in_hipdnn_frontend(tmp_path) -> None:
    build = tmp_path / "build_a"
    build.mkdir()
    proc, calls = _run(tmp_path, "--a", f"hipdnn:MIOPEN_ENGINE@{build}", "--b", f"hipdnn:MIOPEN_ENGINE@{build}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = [c[0] for c in calls]
    assert [c for c in calls if c[0] == "set_engine_plugin_paths"] == [
        ["set_engine_plugin_paths", [str(build)], "PluginLoadingMode.ABSOLUTE"]]
    assert names.index("set_engine_plugin_paths") < names.index("Handle")
    summary = pl.read_csv(tmp_path / "runs" / "ab" / "summary.csv")
    assert summary["status"].to_list() == ["ok", "ok"]


def test_two_plugin_builds_run_one_process_each_and_b_is_checked_against_a_with_stand_in_hipdnn_frontend(
        tmp_path) -> None:
    a, b = tmp_path / "build_a", tmp_path / "build_b"
    a.mkdir(), b.mkdir()
    proc, calls = _run(tmp_path, "--APath", str(a), "--BPath", str(b), "--AId", "MIOPEN_ENGINE",
                       "--BId", "0x15B46865C717A122")
    assert proc.returncode == 0, proc.stderr[-2000:]
    folder = tmp_path / "runs" / "ab"
    summary = pl.read_csv(folder / "summary.csv")
    assert summary["config"].to_list() == [f"hipdnn:MIOPEN_ENGINE@{a}", f"hipdnn:0x15B46865C717A122@{b}"]
    assert summary["status"].to_list() == ["ok", "ok"]
    # each build was loaded ABSOLUTE, once, in its own process (the calls log is shared)
    loads = [c[1] for c in calls if c[0] == "set_engine_plugin_paths"]
    assert sorted(loads) == sorted([[str(a)], [str(b)]])
    validation = pl.read_csv(folder / "validation.csv")
    ab = validation.filter(pl.col("against") == f"A:hipdnn:MIOPEN_ENGINE@{a}")
    assert ab.height == 1 and ab["passed"].all()
    meta = json.loads((folder / "run.json").read_text())
    assert meta["isolation"]["split"] == [[f"hipdnn:MIOPEN_ENGINE@{a}"], [f"hipdnn:0x15B46865C717A122@{b}"]]
    assert "B/A time (>1: B slower)" in proc.stdout and "95% CI" in proc.stdout
    assert f"A = hipdnn:MIOPEN_ENGINE@{a}, B = hipdnn:0x15B46865C717A122@{b}" in proc.stdout

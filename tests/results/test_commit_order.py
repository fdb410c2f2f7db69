"""The run folder's commit order: a run SIGKILLed at any write step, then resumed, equals an
uninterrupted run in every table (one row set per graph, none missing, none twice) and in its
trace (each graph once), with no temp file or lock left behind.

``kill_at_write.py`` (beside this file) runs the suite once uninterrupted to list its write steps
(each atomic write's temp file before and after its rename, each trace flush torn and whole), then
once per step in a child process that SIGKILLs itself at that step. Each folder is then checked as
the kill left it and resumed here."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from reliability_helpers import HERE, assert_same_results, cli_env, write_graphs

from hipdnn_trace.cli import main as cli_main
from hipdnn_trace.results.rundir import load_run

FLAGS = ["--backend", "reference", "--no-isolate", "-w", "1", "-i", "2", "-q"]
BREAKDOWN_KEYS = ["graph", "graph_id", "config", "source", "backend"]


@pytest.fixture(scope="module")
def killed(tmp_path_factory) -> tuple[Path, Path, list[str], list[int]]:
    """(graphs, folder of the runs, the write steps, the steps whose child died by SIGKILL)."""
    root = tmp_path_factory.mktemp("kills")
    graphs = root / "g"
    write_graphs(graphs, ["ok__a", "ok__b"])
    (graphs / "zz_broken.json").write_text('{"nodes": [')   # never loads: a row with no graph_id or config
    done = subprocess.run([sys.executable, str(HERE / "kill_at_write.py"), str(root / "runs"), "--", "run",
                           str(graphs), *FLAGS], cwd=root, env=cli_env(), capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return graphs, root / "runs", report["steps"], report["killed"]


def _rows(df: pl.DataFrame, keys: list[str]) -> list[tuple]:
    return sorted(df.select(keys).rows(), key=repr)


def _check_as_killed(folder: Path) -> None:
    """What a kill leaves: every file a reader opens is whole, and a graph in summary.csv (the commit
    point) has its rows in every table, its breakdown rows included."""
    if not (folder / "run.json").exists():   # killed before run.json: the folder resumes as new
        return
    run = load_run(folder)
    committed = set(run.summary.get_column("source").to_list())
    for name in ("breakdown", "validation", "iterations"):
        have = set(getattr(run, name).get_column("source").to_list())
        loaded = {s for s in committed if not s.endswith("zz_broken.json")}   # a broken file has neither
        assert (committed if name == "breakdown" else loaded) <= have, (folder.name, name)


def test_a_kill_at_every_write_step_resumes_to_the_uninterrupted_result(killed, tmp_path):
    graphs, runs, steps, died = killed
    assert len(steps) >= 40 and "after:summary.csv" in steps and "torn:trace" in steps
    assert died == list(range(len(steps)))   # every child was killed at its step
    whole = load_run(runs / "whole")
    assert whole.summary.height == 3 and whole.breakdown.height == 3
    for k, step in enumerate(steps):
        _check_as_killed(runs / f"k{k}")
        folder = tmp_path / f"k{k}"   # a copy: the other tests read the folders as the kills left them
        shutil.copytree(runs / f"k{k}", folder)
        code = cli_main(["run", str(graphs), *FLAGS, "--resume", str(folder)])
        assert code == 1, (k, step)   # the broken file's error row: the exit code of the whole run
        assert_same_results(runs / "whole", folder)   # every table, and each graph once in the trace
        run = load_run(folder)
        assert _rows(run.breakdown, BREAKDOWN_KEYS) == _rows(whole.breakdown, BREAKDOWN_KEYS), (k, step)
        assert pl.read_json(folder / "summary.json").height == run.summary.height
        assert run.meta["status"] == "complete", (k, step)
        left = [p.name for p in folder.iterdir() if p.name.startswith(".")]
        assert left == [], (k, step, left)   # no temp file, no lock


def test_a_kill_between_the_summary_and_the_final_breakdown_keeps_the_graphs_breakdown_row(killed):
    """The reported loss: summary.csv was the commit point and breakdown.csv came after the trace, so a
    kill in between lost the graph's breakdown row for good (resume never runs a finished graph)."""
    _, runs, steps, _ = killed
    k = steps.index("after:summary.csv")
    run = load_run(runs / "whole")
    kept = load_run(runs / f"k{k}")
    assert kept.summary.height == 1 and kept.breakdown.height == 1
    assert kept.breakdown["source"].to_list() == kept.summary["source"].to_list()
    # the provisional row: its wall time stops at the commit, so it is no longer than the final one
    assert kept.breakdown["wall_ms"][0] > 0 and run.breakdown.height == 3


def test_stale_temporaries_are_removed_when_a_writer_opens_the_folder(killed):
    graphs, runs, steps, _ = killed
    folder = runs / f"k{steps.index('before:summary.csv')}"
    temps = [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]
    assert temps and all(t.startswith(".summary.csv.") for t in temps)   # what the kill left
    assert cli_main(["run", str(graphs), *FLAGS, "--resume", str(folder)]) == 1
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]

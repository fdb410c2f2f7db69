"""One writer per run folder (results/runlock.py), and merge's refusal of duplicated rows.

Two ``--resume`` of one folder at once both ran every remaining graph and the trace doubled; two
merges into one ``--out`` both wrote it. Now every writer holds an ``flock`` on DIR/.lock and a
second one is one line naming the holder's pid; a lock left by a killed writer never blocks."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from reliability_helpers import assert_same_results, cli, cli_env, write_graphs

from hipdnn_trace.cli import main as cli_main
from hipdnn_trace.results import runlock
from hipdnn_trace.results.rundir import load_run
from hipdnn_trace.trace import read_trace

FAST = ["--backend", "faulty", "--no-isolate", "-w", "1", "-i", "2", "-q"]

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, f"{os.getpid()}\\n".encode())
print("held", flush=True)
time.sleep(60)
"""


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _hold(lock: Path) -> subprocess.Popen:
    """Another process holding ``lock`` as a writer would."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def _wait_for(predicate, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("timed out")


@pytest.fixture
def interrupted(faulty, tmp_path) -> tuple[Path, Path, list[str]]:
    """(graphs, a run folder holding 1 of 3 graphs as a kill left it, the run's flags)."""
    graphs = tmp_path / "g"
    write_graphs(graphs, ["ok__a", "ok__b", "ok__c"])
    assert cli_main(["run", str(graphs), *FAST, "--out", str(tmp_path), "--run-id", "whole"]) == 0
    assert cli_main(["run", str(graphs / "ok__a.json"), *FAST, "--out", str(tmp_path), "--run-id", "r"]) == 0
    meta = json.loads((tmp_path / "r" / "run.json").read_text())   # as if the suite's run was killed after
    meta.update(status="running", graphs=json.loads((tmp_path / "whole" / "run.json").read_text())["graphs"])
    (tmp_path / "r" / "run.json").write_text(json.dumps(meta))     # its first graph
    return graphs, tmp_path / "r", FAST


def test_a_resume_of_a_folder_another_process_writes_is_one_line(interrupted, tmp_path, capsys):
    graphs, folder, flags = interrupted
    holder = _hold(folder / runlock.LOCK_NAME)
    try:
        assert cli_main(["run", str(graphs), *flags, "--resume", str(folder)]) == 1
        line = _one_line(capsys.readouterr().err)
        assert f"{folder} is in use by pid {holder.pid}" in line, line
        assert load_run(folder).summary.height == 1   # nothing ran, nothing written
    finally:
        holder.kill()
        holder.wait()
    # the holder died without unlocking (SIGKILL): the kernel dropped its lock, the stale file blocks nothing
    assert (folder / runlock.LOCK_NAME).exists()
    assert cli_main(["run", str(graphs), *flags, "--resume", str(folder)]) == 0
    assert_same_results(tmp_path / "whole", folder)
    assert not (folder / runlock.LOCK_NAME).exists()   # released and removed when the run finished


def test_two_resumes_at_once_run_the_remaining_graphs_once(faulty, tmp_path):
    """Real processes: the first resume waits inside a gated graph; the second, started while it holds the
    folder, stops with one line naming it; the gate opens; the trace holds each graph once."""
    graphs, gate = tmp_path / "g", tmp_path / "gate"
    names = ["a__ok"] + [f"gated__{i}" for i in range(4)]   # the suite runs them in this order
    write_graphs(graphs, names)
    base = ["run", str(graphs), *FAST]
    proc = cli(*base, "--out", str(tmp_path), "--run-id", "r", cwd=tmp_path, env=cli_env(FAULTY_GATE=str(gate)))
    folder = tmp_path / "r"
    _wait_for(lambda: (folder / "summary.csv").exists())   # a__ok is done, gated__0 waits for the gate
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    assert load_run(folder).summary.height == 1
    first = cli(*base, "--resume", str(folder), cwd=tmp_path, env=cli_env(FAULTY_GATE=str(gate)))
    _wait_for(lambda: (folder / runlock.LOCK_NAME).exists() and (folder / runlock.LOCK_NAME).read_text().strip()
              == str(first.pid))
    second = subprocess.run([sys.executable, "-m", "hipdnn_trace", *base, "--resume", str(folder)], cwd=tmp_path,
                            env=cli_env(), capture_output=True, text=True, timeout=120)
    gate.touch()
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert second.returncode == 1, second.stderr
    assert f"{folder} is in use by pid {first.pid}" in _one_line(second.stderr)
    run = load_run(folder)
    assert run.summary.height == 5 and run.iterations.height == 5 * 3
    traced = read_trace(folder / "trace.pftrace").slices.filter(pl.col("name").str.starts_with("graph "))["name"]
    assert sorted(traced.to_list()) == sorted(f"graph {n}" for n in names)


def test_the_lock_is_per_process_reentrant_and_released(tmp_path):
    runlock.lock_run_dir(tmp_path)
    runlock.lock_run_dir(tmp_path)   # the resume's check and its writer share it
    assert runlock.holds_lock(tmp_path)
    other = subprocess.run([sys.executable, "-c", "import sys\nfrom pathlib import Path\n"
                            "from hipdnn_trace.results.runlock import lock_run_dir\nlock_run_dir(Path(sys.argv[1]))",
                            str(tmp_path)], env=cli_env(), capture_output=True, text=True, timeout=60)
    assert other.returncode != 0 and f"is in use by pid {__import__('os').getpid()}" in other.stderr
    runlock.unlock_run_dir(tmp_path)
    assert not runlock.holds_lock(tmp_path) and not (tmp_path / runlock.LOCK_NAME).exists()


def test_a_refused_resume_releases_its_lock_in_a_long_lived_process(interrupted, capsys):
    """hipdnn_trace.run() in a script: a resume refused after it locked its folder leaves it free."""
    graphs, folder, flags = interrupted
    assert cli_main(["run", str(graphs), *flags, "-i", "3", "--resume", str(folder)]) == 1
    assert "not the same run" in capsys.readouterr().err
    assert not runlock.holds_lock(folder) and not (folder / runlock.LOCK_NAME).exists()


def test_merge_into_a_folder_another_process_writes_is_one_line(interrupted, tmp_path, capsys):
    _, folder, _ = interrupted
    out = tmp_path / "merged"
    out.mkdir()
    holder = _hold(out / runlock.LOCK_NAME)
    try:
        assert cli_main(["merge", str(tmp_path / "whole"), "--out", str(out)]) == 1
        assert f"{out} is in use by pid {holder.pid}" in _one_line(capsys.readouterr().err)
    finally:
        holder.kill()
        holder.wait()
    assert cli_main(["merge", str(tmp_path / "whole"), "--out", str(out), "-q"]) == 0   # a stale lock file
    assert load_run(out).summary.height == 3 and not (out / runlock.LOCK_NAME).exists()


@pytest.mark.parametrize("rows", ["all", "one", "one-edited"])
def test_merge_refuses_a_summary_holding_a_graph_twice(interrupted, tmp_path, capsys, rows):
    """A summary whose rows are duplicated (two writers at once, or an edit) is refused naming the row,
    even when both copies are identical: it said '3 graph(s), 6 summary row(s)', exit 0."""
    whole = tmp_path / "whole"
    doubled = tmp_path / "doubled"
    shutil.copytree(whole, doubled)
    summary = pl.read_csv(whole / "summary.csv", infer_schema_length=None)
    extra = summary if rows == "all" else summary.head(1)
    if rows == "one-edited":
        extra = extra.with_columns(pl.col("median") * 2)
    pl.concat([summary, extra]).write_csv(doubled / "summary.csv")
    capsys.readouterr()
    assert cli_main(["merge", str(doubled), "--out", str(tmp_path / "m")]) == 1
    line = _one_line(capsys.readouterr().err)
    first = summary.row(0, named=True)
    assert f"{doubled / 'summary.csv'}: graph {first['graph']!r} ({first['source']}) on config " in line, line
    assert f"is recorded twice (lines 2 and {summary.height + 2})" in line
    assert not (tmp_path / "m").exists()


def test_merge_of_overlapping_shards_names_the_graph(interrupted, tmp_path, capsys):
    _, folder, _ = interrupted
    capsys.readouterr()
    assert cli_main(["merge", str(tmp_path / "whole"), str(folder), "--out", str(tmp_path / "m")]) == 1
    line = _one_line(capsys.readouterr().err)
    assert "graph 'ok__a'" in line and "is in both" in line


"""A suite killed mid-way leaves valid files holding every graph finished before the kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import graph_dicts as hg
import polars as pl

from hipdnn_trace.results.rundir import load_run
from hipdnn_trace.trace.reader import read_trace


def test_sigkill_mid_suite_keeps_finished_graphs(tmp_path: Path) -> None:
    graphs = [hg.matmul(name=f"mm_{i:02d}", m=16, k=32, n=16) for i in range(40)]
    hg.write(tmp_path / "g", graphs)
    out = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "hipdnn_trace", "run", str(tmp_path / "g"), "-w", "0", "-i", "200",
         "--out", str(out), "--run-id", "k", "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, "HIPDNN_TRACE_COMMIT_EVERY_S": "0"},   # a commit per graph: kills land between them
    )
    summary = out / "k" / "summary.csv"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if summary.exists() and pl.read_csv(summary).height >= 3:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    run = load_run(out / "k")
    finished = run.summary.height
    assert 3 <= finished < 40
    assert run.summary["status"].to_list() == ["ok"] * finished
    # every finished graph has all its iterations, and nothing half-written is visible; summary is
    # written last, so the graphs of a commit caught between its tables (fast graphs are committed
    # together, runs/measure.py COMMIT_EVERY_S) may have iterations but no summary row yet (not
    # finished: --resume redoes them)
    counts = run.iterations.group_by("graph").len()
    assert set(run.summary["graph"]) <= set(counts["graph"])
    assert set(counts["len"]) == {200}
    assert json.loads((out / "k" / "run.json").read_text())["status"] == "running"
    contents = read_trace(out / "k" / "trace.pftrace")
    graphs_in_trace = contents.slices.filter(pl.col("name").str.starts_with("graph "))
    # the trace is appended after the tables (it never shows an unfinished graph), so a kill
    # between the two leaves the last commit's graphs out of it
    assert set(graphs_in_trace.get_column("name").str.strip_prefix("graph ")) <= set(run.summary["graph"])
    # a kill inside an atomic write can leave its dot-temp behind (nothing runs after SIGKILL); readers never
    # see it: every file a reader opens is whole (load_run above) and temps are hidden, never the real name
    temps = [p.name for p in (out / "k").iterdir() if p.name.endswith(".tmp")]
    assert all(name.startswith(".") for name in temps), temps


def test_a_closed_stdout_pipe_ends_the_suite_as_an_interruption_with_results_kept(tmp_path: Path) -> None:
    """`hipdnn-trace run ... | head -2`: exit 141 (128 + SIGPIPE), run.json interrupted, resumable."""
    graphs = [hg.matmul(name=f"mm_{i:02d}", m=16, k=32, n=16) for i in range(60)]   # seconds of work: the
    hg.write(tmp_path / "g", graphs)                                                   # pipe closes long before
    out = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "hipdnn_trace", "run", str(tmp_path / "g"), "-w", "0", "-i", "400",
         "--out", str(out), "--run-id", "p", "--no-trace", "--progress", "off"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    proc.stdout.readline(), proc.stdout.readline()   # the header and the first graph, as `head -2` reads
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGPIPE
    assert b"interrupted by SIGPIPE" in err and b"--resume" in err
    run = load_run(out / "p")
    assert run.meta["status"] == "interrupted" and 1 <= run.summary.height < 60

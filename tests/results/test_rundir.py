"""Run directories never lose or mix results: a second run cannot claim a folder another
run owns, a full (or read-only, or failing) disk is one line and a resumable folder, and
``--resume`` after a kill at the worst points gives the tables and trace of an
uninterrupted run. Kills are placed exactly by a wrapper script (in tmp_path) that
patches the harness in its own process; disk-full is simulated in-process, since a
small real file system cannot be mounted here."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from reliability_helpers import assert_same_results, cli_env, graph_json, write_graphs

from hipdnn_trace.cli import main as cli_main
from hipdnn_trace.results import rundir
from hipdnn_trace.results.rundir import load_run
from hipdnn_trace.trace import read_trace, writer as trace_writer

TIMING = ["-w", "1", "-i", "3", "-q"]

#: Runs the CLI after patching the harness so the process SIGKILLs itself at one exact point:
#: KILL_AT=timeline:N (the Nth graph's summary is on disk, its trace not yet) or summary:N
#: (the Nth graph is in every table but summary.csv). BARRIER=folder: two processes wait for
#: each other right before claiming the run directory.
WRAPPER = r'''
import os, signal, sys, time
from pathlib import Path
from hipdnn_trace.results import rundir, timeline

where, _, nth = os.environ.get("KILL_AT", ":0").partition(":")
calls = {"n": 0}

def _count() -> None:
    calls["n"] += 1
    if calls["n"] == int(nth):
        os.kill(os.getpid(), signal.SIGKILL)

if where == "timeline":
    add_graph = timeline.Timeline.add_graph
    def killing_add_graph(self, g):
        _count()
        return add_graph(self, g)
    timeline.Timeline.add_graph = killing_add_graph
elif where == "summary":
    write_frame = rundir._write_frame
    def killing_write_frame(path, df, fmt):
        if path.name == "summary.csv":
            _count()
        return write_frame(path, df, fmt)
    rundir._write_frame = killing_write_frame

if os.environ.get("BARRIER"):
    barrier, create = Path(os.environ["BARRIER"]), rundir.create_run_dir
    def waiting_create(folder):
        (barrier / str(os.getpid())).touch()
        while len(list(barrier.iterdir())) < 2:
            time.sleep(0.005)
        return create(folder)
    rundir.create_run_dir = waiting_create

from hipdnn_trace.cli import main
sys.exit(main(sys.argv[1:]))
'''


def _wrapped(tmp_path: Path, *args: str, **env: str) -> subprocess.Popen:
    script = tmp_path / "wrapper.py"
    script.write_text(WRAPPER)
    return subprocess.Popen([sys.executable, str(script), *args], cwd=tmp_path, env=cli_env(**env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _run_args(graphs: Path, out: Path, run_id: str) -> list[str]:
    return ["run", str(graphs), "--backend", "reference", *TIMING, "--out", str(out), "--run-id", run_id]


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def graphs(tmp_path) -> Path:
    folder = tmp_path / "g"
    write_graphs(folder, ["a", "b", "c", "d", "e"])
    return folder


@pytest.fixture
def whole(graphs, tmp_path) -> Path:
    assert cli_main(_run_args(graphs, tmp_path / "ref", "whole")) == 0
    return tmp_path / "ref" / "whole"


# --- 1. one run per folder ------------------------------------------------------------------



@pytest.fixture(autouse=True)
def _commit_per_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests fail or kill a run at one graph's writes: a commit per graph (runs/measure.py)."""
    monkeypatch.setattr("hipdnn_trace.runs.measure.COMMIT_EVERY_S", 0.0)

def test_two_racing_runs_with_one_run_id_one_wins_the_other_is_refused(graphs, tmp_path):
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = [_wrapped(tmp_path, *_run_args(graphs, tmp_path / "out", "same"), BARRIER=str(barrier))
             for _ in range(2)]
    results = [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in procs]
    assert len(list(barrier.iterdir())) == 2   # both passed the early check and raced on mkdir
    assert sorted(code for code, _, _ in results) == [0, 1], results
    loser = next(err for code, _, err in results if code == 1)
    assert "already exists (another run with this --run-id" in _one_error_line(loser)
    run = load_run(tmp_path / "out" / "same")
    assert run.meta["status"] == "complete"
    assert run.summary.height == 5 and run.iterations.height == 5 * 4   # one run's rows, not two
    trace = read_trace(tmp_path / "out" / "same" / "trace.pftrace")
    assert not trace.truncated
    assert trace.slices.filter(pl.col("name").str.starts_with("graph ")).height == 5


def test_a_pre_existing_folder_is_refused_and_left_alone(graphs, tmp_path, capsys):
    folder = tmp_path / "out" / "taken"
    folder.mkdir(parents=True)
    assert cli_main(_run_args(graphs, tmp_path / "out", "taken")) == 1
    assert "taken already exists" in _one_error_line(capsys.readouterr().err)
    assert list(folder.iterdir()) == []


# --- 2. disk full, quota, read-only or failing storage -------------------------------------


def _enospc_parquet(monkeypatch, nth: int) -> None:
    """polars' own way of failing a parquet write on a full disk (ComputeError, errno in the text)."""
    from polars.exceptions import ComputeError

    original, calls = pl.DataFrame.write_parquet, {"n": 0}

    def failing(self, *a, **kw):
        calls["n"] += 1
        if calls["n"] == nth:
            raise ComputeError("parquet: File out of specification: underlying IO error: "
                               "No space left on device (os error 28)")
        return original(self, *a, **kw)

    monkeypatch.setattr(pl.DataFrame, "write_parquet", failing)


def _edquot_summary_csv(monkeypatch, nth: int) -> None:
    """polars' OSError without errno, as a CSV write past the quota raises it."""
    original, calls = rundir._write_frame, {"n": 0}

    def failing(path, df, fmt):
        if path.name == "summary.csv":
            calls["n"] += 1
            if calls["n"] == nth:
                return rundir.write_atomic(path, lambda fh: (_ for _ in ()).throw(
                    OSError("Disk quota exceeded (os error 122)")))
        return original(path, df, fmt)

    monkeypatch.setattr(rundir, "_write_frame", failing)


def _enospc_trace(monkeypatch, nth: int) -> None:
    """The trace file takes half of the Nth flush, then the disk is full."""
    real_open, calls = open, {"n": 0}

    class FullDisk:
        def __init__(self, fh):
            self._fh = fh

        def write(self, data):
            calls["n"] += 1
            if calls["n"] == nth:
                self._fh.write(bytes(data[: len(data) // 2]))
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return self._fh.write(data)

        def __getattr__(self, name):
            return getattr(self._fh, name)

    monkeypatch.setattr(trace_writer, "open", lambda *a, **kw: FullDisk(real_open(*a, **kw)), raising=False)


def _eio_from_now_on(monkeypatch, nth: int) -> None:
    """Every fsync from the Nth on fails (a dying disk): run.json cannot be marked either."""
    original, calls = os.fsync, {"n": 0}

    def failing(fd):
        calls["n"] += 1
        if calls["n"] >= nth:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return original(fd)

    monkeypatch.setattr(os, "fsync", failing)


@pytest.mark.parametrize("inject, nth, file, reason, marked", [
    (_enospc_parquet, 3, "iterations.parquet", "No space left on device", True),
    (_edquot_summary_csv, 3, "summary.csv", "Disk quota exceeded", True),
    (_enospc_trace, 3, "trace.pftrace", "No space left on device", True),
    (_eio_from_now_on, 12, None, "Input/output error", False),
])
def test_a_failing_write_is_one_line_and_the_run_resumes_to_the_same_result(
        graphs, whole, tmp_path, monkeypatch, capsys, inject, nth, file, reason, marked):
    folder = tmp_path / "out" / "full"
    with monkeypatch.context() as patch:
        inject(patch, nth)
        code = cli_main(_run_args(graphs, tmp_path / "out", "full"))
    line = _one_error_line(capsys.readouterr().err)
    assert code == 1
    where = f"{folder / file}" if file else f"{folder}{os.sep}"   # None: whichever file was written then
    assert where in line and f": cannot write ({reason})" in line and f"--resume {folder}" in line, line
    meta = json.loads((folder / "run.json").read_text())
    if marked:
        assert meta["status"] == "interrupted" and reason in meta["error"]
    else:   # the disk took nothing more: run.json still says running, which resumes the same way
        assert meta["status"] == "running"
    partial = load_run(folder)
    assert 1 <= partial.summary.height < 5
    assert not read_trace(folder / "trace.pftrace").truncated
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]

    assert cli_main(["run", str(graphs), "--backend", "reference", *TIMING, "--resume", str(folder)]) == 0
    assert_same_results(whole, folder)
    assert json.loads((folder / "run.json").read_text())["status"] == "complete"


def test_disk_full_at_the_start_strands_nothing(graphs, tmp_path, monkeypatch, capsys):
    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left on device")))
        assert cli_main(_run_args(graphs, tmp_path / "out", "r")) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert "r/run.json: cannot write (No space left on device); nothing was recorded" in line
    assert not (tmp_path / "out" / "r").exists()
    assert cli_main(_run_args(graphs, tmp_path / "out", "r")) == 0


def test_resume_accepts_a_folder_stranded_before_run_json(graphs, whole, tmp_path, capsys):
    """A kill between the folder's mkdir and run.json leaves it empty but for a temp file."""
    folder = tmp_path / "out" / "stranded"
    folder.mkdir(parents=True)
    (folder / ".run.json.k2j3.tmp").write_text('{"run_')
    assert cli_main(_run_args(graphs, tmp_path / "out", "stranded")) == 1
    assert "--resume it" in capsys.readouterr().err
    assert cli_main(["run", str(graphs), "--backend", "reference", *TIMING, "--resume", str(folder)]) == 0
    assert load_run(folder).meta["run_id"] == "stranded"
    assert_same_results(whole, folder)


def test_a_folder_with_results_but_no_run_json_is_not_taken_for_stranded(tmp_path):
    folder = tmp_path / "r"
    folder.mkdir()
    (folder / "summary.csv").write_text("graph,config,status\nx,cpu,ok\n")
    assert not rundir.is_stranded(folder)


# --- 3. a kill between the summary's rename and the trace's flush ------------------------------


def test_sigkill_after_the_summary_before_the_trace_then_resume_rebuilds_the_trace(graphs, whole, tmp_path):
    folder = tmp_path / "out" / "killed"
    proc = _wrapped(tmp_path, *_run_args(graphs, tmp_path / "out", "killed"), KILL_AT="timeline:3")
    assert proc.wait(timeout=300) == -9, proc.stderr.read()
    run = load_run(folder)
    assert run.summary.height == 3 and run.meta["status"] == "running"
    graph_slices = read_trace(folder / "trace.pftrace").slices.filter(pl.col("name").str.starts_with("graph "))
    assert graph_slices.height == 2                        # the third graph is in the tables only

    assert cli_main(["run", str(graphs), "--backend", "reference", *TIMING, "--resume", str(folder)]) == 0
    assert_same_results(whole, folder)
    trace = read_trace(folder / "trace.pftrace")
    rebuilt = trace.slices.filter(pl.col("args").str.contains('"rebuilt"'))
    assert rebuilt.get_column("name").to_list() == ["graph c"]
    c = run.iterations.filter(pl.col("graph") == "c")
    first = rebuilt.row(0, named=True)
    start, end = first["ts_ns"], first["ts_ns"] + first["dur_ns"]
    inside = trace.slices.filter((pl.col("ts_ns") >= start) & (pl.col("ts_ns") < end))
    assert inside.filter(pl.col("name") == "iter").height == c.filter(pl.col("phase") == "timed").height
    assert inside.filter(pl.col("name") == "warmup iter").height == c.filter(pl.col("phase") == "warmup").height
    # the timed iterations keep their flow ids, so kernels parsed later still link to them
    assert inside.filter(pl.col("name") == "iter").get_column("flow_ids").list.len().min() == 1
    # a second resume finds nothing missing and adds nothing
    before = (folder / "trace.pftrace").stat().st_size
    assert cli_main(["run", str(graphs), "--backend", "reference", *TIMING, "--resume", str(folder)]) == 0
    again = read_trace(folder / "trace.pftrace").slices.filter(pl.col("name").str.starts_with("graph "))
    assert again.height == 5 and (folder / "trace.pftrace").stat().st_size >= before


# --- 4. identical content under two file names ---------------------------------------------------


def test_kill_between_renames_with_identical_graphs_in_two_files_duplicates_nothing(tmp_path):
    graphs = tmp_path / "same"
    graphs.mkdir()
    content = json.dumps(graph_json("twin"))
    for name in ("a_first.json", "b_second.json"):
        (graphs / name).write_text(content)
    (graphs / "c_other.json").write_text(json.dumps(graph_json("other", dims=(2, 4, 4, 6))))
    assert cli_main(_run_args(graphs, tmp_path / "ref", "whole")) == 0
    folder = tmp_path / "out" / "torn"
    proc = _wrapped(tmp_path, *_run_args(graphs, tmp_path / "out", "torn"), KILL_AT="summary:2")
    assert proc.wait(timeout=300) == -9, proc.stderr.read()
    torn = load_run(folder)
    assert torn.summary.height == 1 and torn.validation.height == 2   # b_second: validation, no summary

    assert cli_main(["run", str(graphs), "--backend", "reference", *TIMING, "--resume", str(folder)]) == 0
    assert_same_results(tmp_path / "ref" / "whole", folder)
    run = load_run(folder)
    assert run.validation.height == 3
    assert sorted(run.validation.get_column("source").to_list()) == sorted(run.summary.get_column("source").to_list())

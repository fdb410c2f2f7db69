"""Killed runs: SIGKILL, SIGTERM and SIGINT leave complete, valid files, and --resume
finishes the run with the same rows and validation as an uninterrupted run (timings
aside). The suites run the faulty test backend (a stand-in for a GPU library) in
``hipdnn-trace`` subprocesses that the tests signal."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest
from reliability_helpers import assert_same_results, cli, cli_env, write_graphs

from hipdnn_trace.cli import main as cli_main
from hipdnn_trace.results.rundir import load_run
from hipdnn_trace.trace import read_trace

TIMING = ["-w", "1", "-i", "3"]


def _wait_for(predicate, timeout: float = 60.0, what: str = "") -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _graphs_recorded(folder: Path) -> int:
    try:
        return load_run(folder).summary.get_column("source").n_unique()
    except Exception:   # not written yet
        return 0


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("suite")
    write_graphs(folder, ["abort__a", "nan__b", "slow__0", "slow__1", "slow__2", "slow__3", "slow__4",
                          "unwritten__c", "slow__5"])
    return folder


@pytest.fixture(scope="module")
def uninterrupted(suite, tmp_path_factory) -> tuple[Path, int]:
    out = tmp_path_factory.mktemp("runs")
    code, _, err = _finish(cli("run", str(suite), "--backend", "faulty", *TIMING, "--out", str(out),
                               "--run-id", "whole", "-q", cwd=out))
    assert code == 1, err   # the aborting graph is an error row
    return out / "whole", code


def test_sigkill_mid_suite_then_resume_equals_uninterrupted(suite, uninterrupted, tmp_path):
    folder = tmp_path / "killed"
    proc = cli("run", str(suite), "--backend", "faulty", *TIMING, "--out", str(tmp_path), "--run-id", "killed",
               "-q", cwd=tmp_path)
    _wait_for(lambda: _graphs_recorded(folder) >= 4, what="four graphs recorded")
    server = _children(proc.pid)
    graph_children = [c for s in server for c in _children(s)]
    proc.send_signal(signal.SIGKILL)
    assert _finish(proc)[0] == -signal.SIGKILL
    # nothing it started survives it: fork server and graph child follow it down
    _wait_for(lambda: not any(_alive(p) for p in server + graph_children), timeout=10, what="orphans to exit")

    meta = json.loads((folder / "run.json").read_text())
    assert meta["status"] == "running"
    partial = load_run(folder)               # every file is whole
    done = partial.summary.get_column("source").n_unique()
    assert 4 <= done < 9
    read_trace(folder / "trace.pftrace")

    code, out, err = _finish(cli("run", str(suite), "--backend", "faulty", *TIMING, "--resume", str(folder),
                                 cwd=tmp_path))
    assert code == uninterrupted[1], err
    assert f"{done} graph(s) already recorded, {9 - done} to run" in out
    meta = json.loads((folder / "run.json").read_text())
    assert meta["status"] == "complete" and meta["run_id"] == "killed"
    assert [r["previous_status"] for r in meta["resumed"]] == ["running"]
    assert_same_results(uninterrupted[0], folder)


@pytest.mark.parametrize("sig, isolate", [(signal.SIGTERM, "--isolate"), (signal.SIGINT, "--no-isolate")])
def test_sigterm_and_sigint_mark_the_run_interrupted(faulty, tmp_path, sig, isolate):
    graphs, gate = tmp_path / "g", tmp_path / "gate"
    write_graphs(graphs, ["a__0", "a__1", *(f"gated__{i}" for i in range(2, 6))])   # gated: wait for the gate
    folder = tmp_path / "r"
    args = ("run", str(graphs), "--backend", "faulty", "-w", "1", "-i", "4", isolate, "--out", str(tmp_path))
    proc = cli(*args, "--run-id", "r", "-q", cwd=tmp_path, env=cli_env(FAULTY_GATE=str(gate)))
    _wait_for(lambda: _graphs_recorded(folder) >= 2, what="two graphs recorded")
    proc.send_signal(sig)   # while gated__2 waits, on a machine of any speed
    code, _, err = _finish(proc)
    assert code == 128 + sig, err
    assert f"interrupted by {signal.Signals(sig).name}" in err and "--resume" in err
    assert "Traceback" not in err
    assert json.loads((folder / "run.json").read_text())["status"] == "interrupted"
    run = load_run(folder)
    done = run.summary.height
    assert done == 2
    gate.touch()
    # finished graphs are whole in every table; the interrupted one is nowhere
    assert run.iterations.get_column("source").n_unique() == done == run.validation.height
    assert not read_trace(folder / "trace.pftrace").truncated

    code, _, err = _finish(cli(*args[:-2], "--resume", str(folder), "-q", cwd=tmp_path,
                               env=cli_env(FAULTY_GATE=str(gate))))
    assert code == 0, err
    whole = tmp_path / "whole"
    assert cli_main([*args[:-2], "--out", str(tmp_path), "--run-id", "whole", "-q"]) == 0
    assert_same_results(whole, folder)


def test_resume_refusals_are_one_line_errors(faulty, tmp_path, capsys):
    graphs = tmp_path / "g"
    write_graphs(graphs, ["ok__a", "ok__b"])
    base = ["run", str(graphs), "--backend", "faulty", "--no-isolate", "-w", "1", "-i", "2", "-q"]
    assert cli_main([*base, "--out", str(tmp_path), "--run-id", "r"]) == 0
    folder = str(tmp_path / "r")
    capsys.readouterr()
    assert cli_main([*base, "-i", "3", "--resume", folder]) == 1
    assert capsys.readouterr().err.strip() == (
        "hipdnn-trace run: error: --resume: not the same run (timing.iters: 2 then, 3 now); "
        "resume with the flags and graphs of the interrupted run")
    assert cli_main(["run", str(graphs / "ok__a.json"), *base[2:], "--resume", folder]) == 1
    assert "not the same run (graphs: " in capsys.readouterr().err
    (graphs / "ok__b.json").write_text((graphs / "ok__a.json").read_text())
    assert cli_main([*base, "--resume", folder]) == 1
    assert "changed since the interrupted run" in capsys.readouterr().err
    assert cli_main([*base, "--resume", folder, "--run-id", "x"]) == 1
    assert "--run-id does not apply" in capsys.readouterr().err
    assert cli_main([*base, "--resume", str(tmp_path / "nothing")]) == 1
    assert "no such folder, nothing to resume" in capsys.readouterr().err


@pytest.mark.parametrize("recorded", [None, "counter-fmix32-v0"])
def test_resume_refuses_a_run_of_another_input_generator(faulty, tmp_path, capsys, recorded):
    """A run written by the old stream generator (no ``inputs`` in run.json) or another
    generator version is never continued: its rows saw other input values."""
    from hipdnn_trace.bench.counter_rng import GENERATOR

    graphs = tmp_path / "g"
    write_graphs(graphs, ["ok__a", "ok__b"])
    base = ["run", str(graphs), "--backend", "faulty", "--no-isolate", "-w", "1", "-i", "2", "-q"]
    assert cli_main([*base, "--out", str(tmp_path), "--run-id", "r"]) == 0
    folder = tmp_path / "r"
    meta = json.loads((folder / "run.json").read_text())
    assert meta["inputs"] == {"generator": GENERATOR}
    if recorded is None:
        del meta["inputs"]
    else:
        meta["inputs"] = {"generator": recorded}
    (folder / "run.json").write_text(json.dumps({**meta, "status": "running"}))
    capsys.readouterr()
    assert cli_main([*base, "--resume", str(folder)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"hipdnn-trace run: error: --resume: the interrupted run's inputs came from "
                   f"{recorded or 'an older input generator'}, this version makes them with {GENERATOR}; "
                   f"start a new run")
    assert "\n" not in err


def test_resume_reruns_a_graph_whose_summary_never_landed(faulty, tmp_path):
    """A kill between renames: the last graph is in every table but summary.csv.
    Resume drops its stray rows, runs it again, and repairs a torn trace tail.
    (The real writer appends the trace after summary.csv, so this hand-made state
    also has the graph in its trace, once more than a real kill would leave.)"""
    graphs = tmp_path / "g"
    write_graphs(graphs, ["ok__a", "nan__b", "ok__c"])
    base = ["run", str(graphs), "--backend", "faulty", "--no-isolate", "-w", "1", "-i", "2", "-q"]
    assert cli_main([*base, "--out", str(tmp_path), "--run-id", "whole"]) == 2
    assert cli_main([*base, "--out", str(tmp_path), "--run-id", "torn"]) == 2
    folder = tmp_path / "torn"
    summary = pl.read_csv(folder / "summary.csv", infer_schema_length=None)
    summary.filter(pl.col("graph") != "ok__c").write_csv(folder / "summary.csv")
    meta = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**meta, "status": "running"}))
    with open(folder / "trace.pftrace", "ab") as fh:
        fh.write(b"\x0a\xff\xff\x03partial")     # a packet cut short by the kill
    assert cli_main([*base, "--resume", str(folder)]) == 2
    assert_same_results(tmp_path / "whole", folder, trace=False)
    assert not read_trace(folder / "trace.pftrace").truncated
    run = load_run(folder)
    assert run.iterations.filter(pl.col("graph") == "ok__c").height == 3   # once, not twice


def test_ctrl_c_then_resume_dir_alone_takes_graphs_and_flags_from_run_json(faulty, tmp_path, monkeypatch):
    """The interrupt message says `finish with --resume runs/r`: that alone finishes the run, with
    the graphs and flags run.json recorded, and equals an uninterrupted run."""
    write_graphs(tmp_path / "g", [f"slow__{i}" for i in range(6)] + ["nan__x"])
    flags = ["--backend", "faulty", "-w", "1", "-i", "4", "--no-isolate", "--seed", "3", "--format", "json"]
    proc = cli("run", "g", *flags, "--out", "runs", "--run-id", "r", "-q", cwd=tmp_path)   # relative paths
    folder = tmp_path / "runs" / "r"
    _wait_for(lambda: _graphs_recorded(folder) >= 2, what="two graphs recorded")
    proc.send_signal(signal.SIGINT)
    code, _, err = _finish(proc)
    assert code == 130 and "finish with --resume runs/r" in err, err
    done = load_run(folder).summary.height
    assert 2 <= done < 7

    code, out, err = _finish(cli("run", "--resume", "runs/r", "--progress", "off", cwd=tmp_path))
    assert code == 2, err   # the NaN graph fails validation: the whole run's exit code
    assert f"{done} graph(s) already recorded, {7 - done} to run" in out
    meta = json.loads((folder / "run.json").read_text())
    assert meta["status"] == "complete" and meta["seed"] == 3 and meta["timing"]["iters"] == 4
    assert meta["resumed"][-1]["argv"] == ["hipdnn-trace", "run", "--resume", "runs/r", "--progress", "off"]
    assert load_run(folder).iterations.height == 7 * 5 and (folder / "iterations.json").is_file()   # --format json
    monkeypatch.chdir(tmp_path)   # the same relative graph paths: the same source column
    assert cli_main(["run", "g", *flags, "--out", "runs", "--run-id", "whole", "-q"]) == 2
    assert_same_results(tmp_path / "runs" / "whole", folder)


def test_resume_dir_alone_lets_allowed_flags_win_and_refuses_the_others_in_one_line(faulty, tmp_path, capsys,
                                                                                   monkeypatch):
    graphs = tmp_path / "g"
    write_graphs(graphs, ["ok__a", "ok__b"])
    monkeypatch.chdir(tmp_path)
    assert cli_main(["run", "g", "--backend", "faulty", "--no-isolate", "-w", "1", "-i", "2", "-q",
                     "--out", "runs", "--run-id", "r"]) == 0
    meta = json.loads((tmp_path / "runs" / "r" / "run.json").read_text())
    (tmp_path / "runs" / "r" / "run.json").write_text(json.dumps({**meta, "status": "interrupted"}))
    capsys.readouterr()
    assert cli_main(["run", "--resume", "runs/r", "-i", "3"]) == 1
    assert capsys.readouterr().err.strip() == (
        "hipdnn-trace run: error: --resume: not the same run (timing.iters: 2 then, 3 now); "
        "resume with the flags and graphs of the interrupted run")
    assert cli_main(["run", "--resume", "runs/r", "--run-id", "x"]) == 1
    assert "--run-id does not apply" in capsys.readouterr().err
    assert cli_main(["run", "--resume", "runs/r", "-v"]) == 0   # how much it prints is this command's choice
    out = capsys.readouterr().out
    assert "2 graph(s) already recorded, 0 to run" in out and "done in" in out


@pytest.mark.parametrize("case, problem", [
    ("missing", "--resume {d}: no such folder"),
    ("file", "--resume {d}: not a folder"),
    ("empty", "--resume {d}: no run.json there (not a run folder, or stopped before anything was recorded)"),
    ("garbage", "--resume {d}: cannot read {d}/run.json ("),
    ("no-argv", "{d}/run.json: argv: not a 'hipdnn-trace run' command line"),
    ("bad-argv", "{d}/run.json: argv: argument --iters/-i: "),
    ("elsewhere", "--resume {d}: the interrupted run's graph path nowhere/g is not found from "),
])
def test_resume_dir_alone_without_a_readable_run_json_is_one_line(tmp_path, capsys, case, problem):
    folder = tmp_path / "r"
    if case == "file":
        folder.write_text("")
    elif case != "missing":
        folder.mkdir()
    meta = {"garbage": "{not json", "no-argv": json.dumps({"argv": ["hipdnn-trace", "inspect", "g"]}),
            "bad-argv": json.dumps({"argv": ["hipdnn-trace", "run", "g", "-i", "many"]}),
            "elsewhere": json.dumps({"argv": ["hipdnn-trace", "run", "nowhere/g", "-i", "2"]})}.get(case)
    if meta is not None:
        (folder / "run.json").write_text(meta)
    assert cli_main(["run", "--resume", str(folder)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("hipdnn-trace run: error: " + problem.format(d=folder)), err


def test_resume_dir_alone_reads_the_interrupted_runs_recipe(faulty, tmp_path, capsys, monkeypatch):
    """A run started from --config: its recipe's graphs and flags (iters 2, not the default 100) come back."""
    write_graphs(tmp_path / "g", ["ok__a", "ok__b"])
    (tmp_path / "recipe.toml").write_text('graphs = ["g"]\nbackend = "faulty"\niters = 2\nwarmup = 1\n'
                                          'isolate = false\n')
    monkeypatch.chdir(tmp_path)
    assert cli_main(["run", "--config", "recipe.toml", "-q", "--out", "runs", "--run-id", "r"]) == 0
    folder = tmp_path / "runs" / "r"
    summary = pl.read_csv(folder / "summary.csv", infer_schema_length=None)
    summary.filter(pl.col("graph") != "ok__b").write_csv(folder / "summary.csv")   # as if killed before ok__b
    capsys.readouterr()
    assert cli_main(["run", "--resume", "runs/r"]) == 0
    assert "1 graph(s) already recorded, 1 to run" in capsys.readouterr().out
    run = load_run(folder)
    assert sorted(run.summary["graph"]) == ["ok__a", "ok__b"] and run.meta["timing"]["iters"] == 2

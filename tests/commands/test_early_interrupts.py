"""SIGTERM and SIGINT in a command's first moments, with real signals to real processes (issue 33's fourth
attack: SIGTERM early in a ``--resume`` left run.json ``running``; Ctrl-C in the first half second was a
traceback). From the moment the command line's handler is in place (cli.run_and_exit, its first tens of
milliseconds), either signal is one line and 128 + the signal (130, 143: docs/reliability.md), and run.json
is never left ``running``: a resume that was stopped says ``interrupted`` and keeps every recorded graph."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from reliability_helpers import cli, write_graphs

from hipdnn_trace.bench.interrupts import RECEIVED, Interrupted
from hipdnn_trace.cli import handle_signals, main
from hipdnn_trace.results.rundir import load_run

FLAGS = ["--backend", "faulty", "--no-isolate", "-w", "1", "-i", "2", "-q"]
NAMES = ["ok__a"] + [f"slow__{i}" for i in range(8)]   # slow: each execution sleeps (faulty_backend.SLOW_S)


def _handler_in_place(pid: int, timeout: float = 60.0) -> None:
    """Wait until process ``pid`` catches SIGTERM (its SigCgt mask in /proc): the command line's handler is
    installed. Python itself never catches SIGTERM, so before this a SIGTERM is the default death."""
    bit = 1 << (signal.SIGTERM - 1)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return   # already gone
        caught = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:"))
        if caught & bit:
            return
        time.sleep(0.001)
    raise AssertionError("the handler never came")


def _signalled(argv: list[str], cwd: Path, signum: int, delay: float) -> tuple[int, str]:
    proc = cli(*argv, cwd=cwd)
    _handler_in_place(proc.pid)
    time.sleep(delay)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def _status(folder: Path) -> str | None:
    path = folder / "run.json"
    return json.loads(path.read_text())["status"] if path.exists() else None


def _check_one_line(code: int, err: str, signum: int) -> None:
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 1, err
    assert code in (0, 128 + signum), (code, err)
    if code:
        assert err.startswith(f"hipdnn-trace run: interrupted by {signal.Signals(signum).name}"), err


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A suite stopped by Ctrl-C after its first graphs (the folder the resumes below continue), and how many
    graphs it recorded."""
    root = tmp_path_factory.mktemp("early")
    write_graphs(root / "g", NAMES)
    proc = cli("run", str(root / "g"), *FLAGS, "--out", str(root / "runs"), "--run-id", "r", cwd=root)
    summary = root / "runs" / "r" / "summary.csv"
    end = time.monotonic() + 60
    while not (summary.exists() and pl.read_csv(summary).height >= 1) and time.monotonic() < end:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    run = load_run(root / "runs" / "r")
    assert run.meta["status"] == "interrupted" and 1 <= run.summary.height < len(NAMES)
    return root / "runs" / "r", run.summary.height


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("delay", [0.0, 0.02, 0.05, 0.1, 0.2, 0.4])
def test_a_resume_stopped_early_says_interrupted_and_keeps_what_was_recorded(
        interrupted: tuple[Path, int], tmp_path: Path, signum: int, delay: float) -> None:
    source, recorded = interrupted
    folder = tmp_path / "r"
    shutil.copytree(source, folder)
    code, err = _signalled(["run", "--resume", str(folder), "-q"], tmp_path, signum, delay)
    _check_one_line(code, err, signum)
    assert _status(folder) == ("complete" if code == 0 else "interrupted"), (code, err)
    assert load_run(folder).summary.height >= recorded


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.3])
def test_a_new_run_stopped_early_is_one_line_and_never_left_running(tmp_path: Path, signum: int,
                                                                    delay: float) -> None:
    write_graphs(tmp_path / "g", NAMES[:3])
    folder = tmp_path / "runs" / "n"
    code, err = _signalled(["run", str(tmp_path / "g"), *FLAGS, "--out", str(tmp_path / "runs"), "--run-id", "n"],
                           tmp_path, signum, delay)
    _check_one_line(code, err, signum)
    assert _status(folder) in ((None, "interrupted") if code else ("complete",)), (code, err)


def test_a_resume_stopped_early_can_be_finished(interrupted: tuple[Path, int], tmp_path: Path) -> None:
    source, _ = interrupted
    folder = tmp_path / "r"
    shutil.copytree(source, folder)
    code, err = _signalled(["run", "--resume", str(folder), "-q"], tmp_path, signal.SIGTERM, 0.05)
    _check_one_line(code, err, signal.SIGTERM)
    finish = cli("run", "--resume", str(folder), "-q", cwd=tmp_path)
    _, err = finish.communicate(timeout=120)
    assert finish.returncode == 0, err
    run = load_run(folder, strict=True)
    assert run.meta["status"] == "complete" and sorted(run.summary["graph"].to_list()) == sorted(NAMES)


@pytest.fixture
def command_line_handler() -> Iterator[None]:
    """This process with the command line's handler, as ``run_and_exit`` installs it; Python's defaults after."""
    handle_signals()
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        RECEIVED.clear()


def _swallowed_sigterm() -> None:
    """A real SIGTERM to this process, lost the way an optional import loses it: the C extension being imported
    turns the exception into an ImportError, and ``except ImportError`` drops it."""
    try:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)   # the handler raises before this ends
        except Interrupted as exc:
            raise ImportError("PyCapsule_Import could not import module \"datetime\"") from exc
    except ImportError:
        pass


@pytest.mark.parametrize("command", ["run", "compare"])
def test_a_signal_a_library_swallowed_still_stops_the_command(command_line_handler: None, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str],
                                                              command: str) -> None:
    paths = write_graphs(tmp_path / "g", ["ok__a"])
    argv = {"run": ["run", str(paths[0]), "-w", "0", "-i", "2", "-q", "--out", str(tmp_path / "runs"),
                    "--run-id", "s"],
            "compare": ["compare", str(tmp_path / "nowhere"), str(tmp_path / "nowhere")]}[command]
    _swallowed_sigterm()
    assert main(argv) == 143
    err = capsys.readouterr().err.strip()
    assert err == f"hipdnn-trace {command}: interrupted by SIGTERM", err
    assert not (tmp_path / "runs" / "s").exists()   # stopped before the run folder was made

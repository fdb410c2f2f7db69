"""Hostile paths: special files, link loops, broken archives in folders, an archive budget,
reads that hang under isolation, and names that would take over the terminal.

Cases that hung or ate memory before (a FIFO, /dev/zero, a ``**`` glob through link loops)
run the CLI in a subprocess with a timeout, so a regression fails the test instead of
hanging the test run.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import tarfile
import threading
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from reliability_helpers import FAULTY_SPEC, HERE, cli, graph_json, write_graphs

from hipdnn_trace import backends, read_gate
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings
from hipdnn_trace.bench.isolation import IsolatedRunner
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.bench.records import ERROR, OK
from hipdnn_trace.bench.suite import SuiteCallbacks, run_in_process, run_suite
from hipdnn_trace.cli import main as cli_main
from hipdnn_trace.console import Progress, Reporter, escape
from hipdnn_trace.errors import GraphError, UserError
from hipdnn_trace.graph import load as graph_load, sources
from hipdnn_trace.graph.load import read_graph_file
from hipdnn_trace.graph.sources import ArchiveBudget, ArchiveBudgetError, GraphSource, archive_sources, expand
from hipdnn_trace.markers import Markers
from hipdnn_trace.results.rundir import load_run

#: A CLI run of a few tiny graphs takes seconds; a hang or an endless glob never ends.
CLI_TIMEOUT_S = 120
REFERENCE = [Config("reference", "reference")]
SETTINGS = RunSettings(loop=LoopSettings(warmup=0, iters=1))


def run_cli(*args: str, cwd: Path) -> tuple[int, str, str]:
    proc = cli(*args, cwd=cwd)
    try:
        out, err = proc.communicate(timeout=CLI_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        pytest.fail(f"hipdnn-trace {' '.join(args)} did not finish in {CLI_TIMEOUT_S} s")
    return proc.returncode, out, err


def errors_by_source(run_dir: Path) -> dict[str, str | None]:
    summary = load_run(run_dir).summary
    return dict(zip(summary.get_column("source").to_list(), summary.get_column("error").to_list()))


def statuses_by_source(run_dir: Path) -> dict[str, str]:
    summary = load_run(run_dir).summary
    return dict(zip(summary.get_column("source").to_list(), summary.get_column("status").to_list()))


def finishes(action, timeout_s: float = 60.0) -> object:
    """``action()`` in a daemon thread: a call that blocks forever fails the test, not the run."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = action()
        except BaseException as exc:   # re-raised below
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout_s)
    assert not thread.is_alive(), f"still blocked after {timeout_s} s"
    if "error" in box:
        raise box["error"]   # type: ignore[misc]
    return box.get("value")


# ------------------------------------------------------------- special files

@pytest.fixture
def special(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Path, str]:
    """A device, FIFO or socket with a .json name, and the kind the refusal names."""
    kind = request.param
    if kind == "device":
        return Path("/dev/zero"), "a character device"
    if kind == "fifo":
        path = tmp_path / "pipe.json"
        os.mkfifo(path)
        return path, "a FIFO (named pipe)"
    path = tmp_path / "sock.json"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    request.addfinalizer(sock.close)
    return path, "a socket"


@pytest.mark.parametrize("special", ["device", "fifo", "socket"], indirect=True)
def test_special_file_in_a_suite_is_one_error_row_and_the_suite_goes_on(special, tmp_path):
    path, kind = special
    (good,) = write_graphs(tmp_path / "g", ["good"])
    code, out, err = run_cli("run", str(path), str(good), "-w", "0", "-i", "1", "--out", str(tmp_path / "runs"),
                             "--run-id", "r", cwd=tmp_path)
    assert code == 1, err
    assert "Traceback" not in out + err
    errors = errors_by_source(tmp_path / "runs" / "r")
    assert errors[str(path)] == f"{path}: not a regular file but {kind}; only regular files are read as graphs"
    assert statuses_by_source(tmp_path / "runs" / "r")[str(good)] == OK


@pytest.mark.parametrize("special", ["device", "fifo", "socket"], indirect=True)
def test_special_file_alone_is_one_line_and_exit_1(special, tmp_path):
    path, kind = special
    code, out, err = run_cli("run", str(path), "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert code == 1
    assert "Traceback" not in out + err
    assert f"== {path.stem}: ERROR {path}: not a regular file but {kind}; only regular files are read as graphs" \
        in out.splitlines()


def test_fifo_swapped_in_after_the_type_check_is_refused_without_blocking(tmp_path, monkeypatch):
    """The race: stat saw a regular file, open finds a FIFO. The open does not block (O_NONBLOCK)
    and the opened file's own type is checked again."""
    regular = os.stat(__file__)
    fifo = tmp_path / "late.json"
    os.mkfifo(fifo)
    monkeypatch.setattr(read_gate.os, "stat", lambda path, *a, **k: regular)
    with pytest.raises(GraphError, match="not a regular file but a FIFO"):
        finishes(lambda: read_graph_file(fifo))


def test_fifo_named_like_an_archive_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "suite.tar.gz"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match=r"suite\.tar\.gz: not a regular file but a FIFO"):
        finishes(lambda: expand([str(fifo)]))


def test_a_file_growing_past_the_limit_while_read_is_cut_off(tmp_path, monkeypatch):
    """The read stops one byte past the limit whatever the size check saw."""
    monkeypatch.setattr(graph_load, "MAX_FILE_BYTES", 100)
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 50)
    real_fstat = os.fstat

    def fstat_before_growth(fd: int) -> os.stat_result:
        info = real_fstat(fd)
        path.write_bytes(b" " * 10_000)   # grows between the size check and the read
        return info

    monkeypatch.setattr(read_gate.os, "fstat", fstat_before_growth)
    with pytest.raises(GraphError, match="file is over 100 bytes"):
        read_graph_file(path)


def test_the_failure_path_never_reads_the_source_again():
    """A graph whose run raises unexpectedly is recorded from the bytes already read."""
    data = json.dumps(graph_json("once")).encode()
    reads: list[int] = []

    def read() -> bytes:
        reads.append(1)
        return data

    def run_graph_that_breaks(source, *args, **kw):
        source.read()
        raise MemoryError

    import hipdnn_trace.bench.suite as suite

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(suite, "run_graph", run_graph_that_breaks)
        g = run_in_process(GraphSource("once.json", read), REFERENCE, SETTINGS, Markers())
    assert len(reads) == 1
    assert g.name == "once" and g.graph_id and g.configs[0].status == ERROR
    assert g.configs[0].error == "out of memory (MemoryError)"


# ------------------------------------------------------------- isolation reads in the child

@dataclass(frozen=True)
class BlockingReader:
    """Opens a FIFO nobody writes to: the read blocks, like a file on a hung network file system.
    (Module level, so it pickles: the isolated child imports this module to unpickle it.)"""

    path: Path

    def __call__(self) -> bytes:
        with open(self.path, "rb") as fh:   # blocks until a writer comes: none does
            return fh.read()


@dataclass(frozen=True)
class ReadOnceReader:
    """Reads a file and deletes it: a second read (by the parent) would fail."""

    path: Path

    def __call__(self) -> bytes:
        data = self.path.read_bytes()
        self.path.unlink()
        return data


@pytest.fixture
def isolated(monkeypatch):
    monkeypatch.setitem(backends.REGISTRY, "faulty", FAULTY_SPEC)
    monkeypatch.syspath_prepend(str(HERE))
    runners: list[IsolatedRunner] = []

    def make(timeout_s: float) -> IsolatedRunner:
        runners.append(IsolatedRunner(timeout_s=timeout_s))
        return runners[-1]

    yield make
    for r in runners:
        r.close()


def test_a_read_that_hangs_is_under_the_graph_timeout_and_the_suite_goes_on(tmp_path, isolated):
    fifo = tmp_path / "hung.json"
    os.mkfifo(fifo)
    (good,) = expand([str(p) for p in write_graphs(tmp_path / "g", ["good"])])
    hung = GraphSource(str(fifo), BlockingReader(fifo), fifo)
    runner = isolated(2)
    outcome = finishes(lambda: run_suite([hung, good], REFERENCE, SETTINGS, Markers(), SuiteCallbacks(),
                                         runner=runner), timeout_s=90)
    first, second = outcome.runs
    assert first.unrunnable and first.error.startswith("timed out after 2 s (killed) during read")
    assert second.configs[0].status == OK


def test_the_isolated_child_reads_the_source_and_the_parent_keeps_its_bytes(tmp_path, isolated):
    """The child reads (and deletes) the file and then crashes: the row still names the graph,
    from the bytes the child sent back, not from reading the file again."""
    (path,) = write_graphs(tmp_path / "g", ["segfault__x"])
    source = GraphSource(str(path), ReadOnceReader(path), path)
    g = isolated(30)(source, [Config("faulty", "faulty")], SETTINGS, Markers())
    assert not path.exists(), "the child did the reading"
    assert g.name == "segfault__x" and g.graph_id
    assert g.configs[0].status == ERROR and "SIGSEGV" in g.configs[0].error


def test_isolated_run_of_a_fifo_through_the_cli_is_one_error_row(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    (good,) = write_graphs(tmp_path / "g", ["good"])
    code, out, err = run_cli("run", str(fifo), str(good), "--isolate", "--graph-timeout", "2", "-w", "0",
                             "-i", "1", "--out", str(tmp_path / "runs"), "--run-id", "r", cwd=tmp_path)
    assert code == 1, err
    assert "not a regular file but a FIFO" in errors_by_source(tmp_path / "runs" / "r")[str(fifo)]
    assert statuses_by_source(tmp_path / "runs" / "r")[str(good)] == OK


# ------------------------------------------------------------- link loops

@pytest.fixture
def looped(tmp_path: Path) -> Path:
    """suite/a.json, suite/sub/b.json, two loops (sub/up -> suite, down -> sub), and a link
    to a folder outside (ext -> ../other, holding c.json) that is followed once."""
    suite = tmp_path / "suite"
    write_graphs(suite, ["a"])
    write_graphs(suite / "sub", ["b"])
    write_graphs(tmp_path / "other", ["c"])
    (suite / "sub" / "up").symlink_to(suite, target_is_directory=True)
    (suite / "down").symlink_to(suite / "sub", target_is_directory=True)
    (suite / "ext").symlink_to(tmp_path / "other", target_is_directory=True)
    return suite


def _stems(found: list[GraphSource]) -> list[str]:
    return sorted(Path(s.name).stem for s in found)


def test_recursive_glob_through_two_link_loops_ends(looped):
    found = finishes(lambda: expand([str(looped / "**" / "*.json")]))
    assert _stems(found) == ["a", "b", "c"]


def test_folder_through_two_link_loops_ends(looped):
    assert _stems(finishes(lambda: expand([str(looped)]))) == ["a", "b", "c"]


def test_recursive_glob_through_link_loops_on_the_command_line(looped, tmp_path):
    code, out, err = run_cli("run", "suite/**/*.json", "-w", "0", "-i", "1", "--out", "runs", "--run-id", "r",
                             cwd=tmp_path)
    assert code == 0, err
    assert sorted(load_run(tmp_path / "runs" / "r").summary.get_column("graph").to_list()) == ["a", "b", "c"]


def test_recursive_glob_matches_like_glob(looped):
    """Hidden names stay out of wildcards, ``**`` matches zero folders too."""
    write_graphs(looped / ".hidden", ["h"])
    (looped / ".dot.json").write_text(json.dumps(graph_json("dot")))
    assert _stems(expand([str(looped / "**" / "*.json")])) == ["a", "b", "c"]
    assert _stems(expand([str(looped / "**" / "a.json")])) == ["a"]
    assert _stems(expand([str(looped / "s*" / "**" / "b.json")])) == ["b"]


def test_walking_is_bounded(looped, monkeypatch):
    monkeypatch.setattr(sources, "MAX_WALK_ENTRIES", 3)
    with pytest.raises(UserError, match="more than 3 files and folders to search; name a smaller folder"):
        expand([str(looped)])


# ------------------------------------------------------------- archives

def _tar(path: Path, members: dict[str, bytes], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _graph(name: str, pad: int = 0) -> bytes:
    return (json.dumps(graph_json(name)) + " " * pad).encode()


def test_broken_archives_in_a_folder_are_one_error_row_each_and_the_rest_runs(tmp_path, capsys):
    folder = tmp_path / "suite"
    write_graphs(folder, ["plain"])
    (folder / "broken.tar.gz").write_bytes(b"\x1f\x8b\x08\x00" + os.urandom(64))
    _tar(folder / "evil.tar", {"ok.json": _graph("ok"), "../escape.json": _graph("escape")}, "w")
    _tar(folder / "z_good.tgz", {"inner.json": _graph("inner")})
    code = cli_main(["run", str(folder), "-w", "0", "-i", "1", "--out", str(tmp_path / "runs"), "--run-id", "r",
                     "-q"])
    assert code == 1
    errors = errors_by_source(tmp_path / "runs" / "r")
    assert errors[str(folder / "broken.tar.gz")].startswith(f"{folder / 'broken.tar.gz'}: not a readable tar archive")
    assert errors[str(folder / "evil.tar")] == (f"{folder / 'evil.tar'}: refused: member '../escape.json' "
                                                "climbs out with '..'")
    statuses = statuses_by_source(tmp_path / "runs" / "r")
    assert statuses[str(folder / "plain.json")] == OK and statuses[f"{folder / 'z_good.tgz'}:inner.json"] == OK
    assert not any(":ok.json" in s for s in statuses), "an unsafe archive is refused whole"


def test_archives_past_the_command_budget_are_error_rows(tmp_path, monkeypatch, capsys):
    """Three archives of about 1 KiB each under a budget for two: the third is refused (also when
    named on the command line), the others run. The real budget is 2 GiB."""
    members = {f"g{i}": {f"g{i}.json": _graph(f"g{i}", pad=1000)} for i in range(3)}
    paths = [_tar(tmp_path / f"{name}.tar.gz", m) for name, m in members.items()]
    each = max(len(d) for m in members.values() for d in m.values())
    monkeypatch.setattr(sources, "MAX_TOTAL_ARCHIVE_BYTES", 2 * each + each // 2)
    code = cli_main(["run", *map(str, paths), "-w", "0", "-i", "1", "--out", str(tmp_path / "runs"),
                     "--run-id", "r", "-q"])
    assert code == 1
    errors = errors_by_source(tmp_path / "runs" / "r")
    assert errors[f"{paths[0]}:g0.json"] is None and errors[f"{paths[1]}:g1.json"] is None
    assert errors[str(paths[2])].startswith(
        f"{paths[2]}: refused: the archives of this command would unpack to more than {2 * each + each // 2} bytes")
    assert "Traceback" not in "".join(capsys.readouterr())


def test_budget_refusal_comes_from_the_headers_before_reading(tmp_path):
    path = _tar(tmp_path / "big.tar.gz", {"a.json": _graph("a"), "b.json": b" " * 4_000_000})
    budget = ArchiveBudget(1_000_000)
    with pytest.raises(ArchiveBudgetError, match="would unpack to more than 1000000 bytes"):
        archive_sources(path, budget)
    assert budget.used == 0
    ok = ArchiveBudget(10_000_000)
    assert [s.name.rsplit(":", 1)[1] for s in archive_sources(path, ok)] == ["a.json", "b.json"]
    assert ok.used == len(_graph("a")) + 4_000_000


# ------------------------------------------------------------- names on the terminal

EVIL = "evil\nTraceback (most recent call last):\x1b[31m\u202e"


def test_escape_shows_control_characters_as_escapes():
    assert escape(EVIL) == "evil\\nTraceback (most recent call last):\\x1b[31m\\u202e"
    assert escape("caf\u00e9 \u65e5\u672c conv_3x3") == "caf\u00e9 \u65e5\u672c conv_3x3"
    assert escape("bad\udcff\x7f\x9b") == "bad\\udcff\\x7f\\x9b"


def test_names_with_newlines_and_ansi_escapes_are_escaped_on_the_console(tmp_path, capsys):
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / f"{EVIL}.json").write_text(json.dumps(graph_json(EVIL)))
    (folder / "broken\x1b[2J.json").write_text("{")
    write_graphs(folder, ["good"])
    code = cli_main(["run", str(folder), "-w", "0", "-i", "1", "--out", str(tmp_path / "runs"), "--run-id", "r"])
    assert code == 1
    out, err = capsys.readouterr()
    for text in (out, err):
        assert "\x1b" not in text and "\u202e" not in text
        assert not any(line.startswith("Traceback") for line in text.splitlines())
    assert "evil\\nTraceback (most recent call last):\\x1b[31m\\u202e" in out
    assert "broken\\x1b[2J" in out
    summary = load_run(tmp_path / "runs" / "r").summary   # the files keep the real names
    assert EVIL in summary.get_column("graph").to_list()
    assert str(folder / f"{EVIL}.json") in summary.get_column("source").to_list()
    assert summary.filter(pl.col("graph") == "broken\x1b[2J").height == 1


def test_inspect_escapes_names_and_errors(tmp_path, capsys):
    (tmp_path / f"{EVIL}.json").write_text(json.dumps(graph_json(EVIL)))
    (tmp_path / "broken\x1b[2J.json").write_text("{")
    assert cli_main(["inspect", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\u202e" not in out + err
    assert escape(EVIL) in out.splitlines()   # the graph's name heads its block
    assert "broken\\x1b[2J.json" in err
    assert cli_main(["inspect", "--json", str(tmp_path / f"{EVIL}.json")]) == 0
    assert json.loads(capsys.readouterr().out)[0]["name"] == EVIL   # machine output keeps the name


def test_command_line_errors_and_the_progress_line_are_escaped(tmp_path, capsys):
    assert cli_main(["run", str(tmp_path / "gone\x1b\n.json")]) == 1
    assert capsys.readouterr().err == f"hipdnn-trace run: error: {tmp_path}/gone\\x1b .json: no such file or folder\n"
    stream = io.StringIO()
    progress = Progress(2, stream=stream, enabled=True)
    progress.graph(1, EVIL)
    assert "\x1b" not in stream.getvalue() and "\n" not in stream.getvalue()
    reporter_out = io.StringIO()
    Reporter(reporter_out).print(f"== {EVIL}")
    assert reporter_out.getvalue() == f"== {escape(EVIL)}\n"

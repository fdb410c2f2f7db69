"""The CLI starts light: ``import hipdnn_trace.cli`` and ``hipdnn-trace --help`` load neither numpy
nor polars (the subcommand that runs is the only module imported), and the help the lazy parser
prints is the one the complete parser prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hipdnn_trace.cli import COMMANDS, EXTRA_BACKENDS_ENV, build_parser, command_named

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str) -> str:
    """``code`` in a fresh interpreter (this one has numpy loaded already); its stdout."""
    env = {k: v for k, v in os.environ.items() if k != EXTRA_BACKENDS_ENV}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_loads_neither_numpy_nor_polars() -> None:
    out = _python("import sys, hipdnn_trace.cli; print('numpy' in sys.modules, 'polars' in sys.modules)")
    assert out.split() == ["False", "False"]


def test_help_loads_no_command_module() -> None:
    code = ("import contextlib, io, sys\n"
            "from hipdnn_trace.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    rc = main(['--help'])\n"
            "loaded = sorted(m for m in sys.modules if m.startswith('hipdnn_trace.commands.'))\n"
            "print(rc, 'numpy' in sys.modules, 'polars' in sys.modules, loaded)")
    assert _python(code).strip() == "0 False False []"


def test_lazy_top_level_help_is_the_complete_one() -> None:
    """The summaries the lazy parser lists are the ones each command's own parser declares."""
    assert build_parser(load=[]).format_help() == build_parser().format_help()


@pytest.mark.parametrize("name", COMMANDS)
def test_the_command_that_runs_is_complete(name: str) -> None:
    lazy = build_parser(load=[name])
    full = build_parser()
    choices = lambda parser: next(a for a in parser._actions if a.dest == "command").choices
    assert choices(lazy)[name].format_help() == choices(full)[name].format_help()
    assert callable(lazy.parse_args([name, *_minimal(name)]).main)


def _minimal(name: str) -> list[str]:
    """Arguments enough for ``name`` to parse (what it requires)."""
    return {"run": ["g.json"], "inspect": ["g.json"], "ingest": ["p", "--out", "o"], "compare": ["a", "b"],
            "report": ["a"], "merge": ["a", "--out", "o"], "slurm": ["g.json", "--array", "2"],
            "calibrate": [], "repro": ["a", "--out", "o"], "db": ["import", "a", "--db", "s.duckdb"],
            "history": ["--db", "s.duckdb"]}[name]


@pytest.mark.parametrize("argv, name", [
    ([], None),
    (["--help"], None),
    (["--version"], None),
    (["run", "g.json", "-i", "5"], "run"),
    (["-h", "compare", "a", "b"], "compare"),
    (["--", "merge", "a"], "merge"),
])
def test_command_named(argv: list[str], name: str | None) -> None:
    assert command_named(argv) == name


def test_a_fork_servers_harness_imports_no_scipy() -> None:
    """Every fork server imports the harness before it forks (bench/early.py HARNESS_MODULES); scipy, an
    optional speed-up of the reference's erf, is imported on first use only: it was 1.5 s of each
    server's set-up on an H200 host (docs/benchmarks.md, issue 36)."""
    code = ("import sys\n"
            "from hipdnn_trace.bench.early import HARNESS_MODULES\n"
            "import importlib\n"
            "for m in HARNESS_MODULES: importlib.import_module(m)\n"
            "print('scipy' in sys.modules)")
    assert _python(code).strip() == "False"

"""Command line: ``hipdnn-trace <command> ...``.

Each subcommand lives in ``hipdnn_trace/commands/<name>.py`` with two functions,
``add_parser(subparsers)`` and ``main(args) -> int``; this module only wires them
up and turns user errors into one line on stderr and exit code 1. Only the module of
the command that runs is imported (the others are listed by their summary), so
``import hipdnn_trace.cli`` and ``--help`` load neither numpy nor polars.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import signal
import sys
from collections.abc import Collection, Sequence
from types import FrameType

from hipdnn_trace import __version__
from hipdnn_trace.bench.interrupts import RECEIVED, Interrupted
from hipdnn_trace.commands import SUMMARIES
from hipdnn_trace.console import escape
from hipdnn_trace.errors import UserError

#: Subcommands in the order ``--help`` lists them.
COMMANDS = tuple(SUMMARIES)

EPILOG = """\
examples:
  hipdnn-trace run graphs/                       # every bundled graph on the CPU reference
  hipdnn-trace run g.json --backend cudnn -i 200 # time one graph on cuDNN
  hipdnn-trace inspect graphs/conv/              # shapes, FLOPs, which backends can run it
  hipdnn-trace compare runs/A runs/B             # significance-tested A/B of two runs
  hipdnn-trace <command> --help                  # options of one command
"""


#: Out-of-tree backends: ``name=module:Class[,name=module:Class...]`` (docs/reliability.md).
EXTRA_BACKENDS_ENV = "HIPDNN_TRACE_EXTRA_BACKENDS"
_EXTRA_BACKEND = re.compile(r"^([A-Za-z0-9_]+)=([A-Za-z_][\w.]*):([A-Za-z_]\w*)$")


def register_extra_backends(value: str | None = None) -> list[str]:
    """Add the backends named in $HIPDNN_TRACE_EXTRA_BACKENDS to the registry.

    The one extension point for executors that live outside this package (a
    vendor's own backend, the test suite's fault-injecting one). They are
    imported only when used, like the built-in ones; isolated child processes
    receive the registry entries they need from the parent.
    """
    text = os.environ.get(EXTRA_BACKENDS_ENV, "") if value is None else value
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not items:
        return []   # nothing to add: the registry (it loads numpy) stays unimported, so --help stays fast
    from hipdnn_trace import backends

    added: list[str] = []
    for item in items:
        m = _EXTRA_BACKEND.match(item)
        if not m:
            raise UserError(f"{EXTRA_BACKENDS_ENV}: {item!r} is not name=module:Class")
        name, module, cls = m.groups()
        if name in backends.REGISTRY and backends.REGISTRY[name] != f"{module}:{cls}":
            raise UserError(f"{EXTRA_BACKENDS_ENV}: backend {name!r} already exists")
        backends.REGISTRY[name] = f"{module}:{cls}"
        added.append(name)
    return added


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad flags as one line + exit 1 (the project's error code)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(1, f"{self.prog}: error: {message}\n")


def build_parser(load: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser. With ``load``, only those commands' modules are imported (their
    options and ``main``); every other command is listed by its summary alone, which is all the
    top-level ``--help`` shows. Without it, every command is complete (recipes, resume, the API)."""
    parser = _Parser(
        prog="hipdnn-trace",
        description="Run, time, validate and profile hipDNN operation graphs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"hipdnn-trace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        if load is None or name in load:
            importlib.import_module(f"hipdnn_trace.commands.{name}").add_parser(sub)
        else:
            sub.add_parser(name, help=SUMMARIES[name])
    return parser


def command_named(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option (the top level has only
    --help and --version, neither taking a value), or None."""
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: the command's exit code; a user error or an interrupt is one line on stderr."""
    given = list(sys.argv[1:] if argv is None else argv)
    command = command_named(given)
    try:
        return _main(given, command)
    except (KeyboardInterrupt, Interrupted) as exc:   # before the command's own handling began (imports, planning)
        return _interrupted(command, exc)
    except Exception:
        if RECEIVED:   # the signal, turned into a library's own error on its way up (interrupts.RECEIVED)
            return _interrupted(command, Interrupted(RECEIVED[-1]))
        raise


def _interrupted(command: str | None, exc: BaseException) -> int:
    """One line for a SIGINT/SIGTERM that stopped a command; 128 + the signal (docs/reliability.md)."""
    signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
    where = f"hipdnn-trace {command}" if command in COMMANDS else "hipdnn-trace"
    with contextlib.suppress(OSError, ValueError):
        print(f"{where}: interrupted by {signal.Signals(signum).name}", file=sys.stderr)
    return 128 + signum


def _main(given: list[str], command: str | None) -> int:
    try:
        register_extra_backends()
    except UserError as exc:
        print(f"hipdnn-trace: error: {escape(exc)}", file=sys.stderr)
        return exc.exit_code
    if command == "run" and "--help" not in given and "-h" not in given:   # before the harness is imported
        from hipdnn_trace.bench.early import start_servers

        if start_servers(given[given.index("run") + 1:]):
            try:
                return _parse_and_run(given, command)
            finally:   # a refused plan, or one that chose otherwise: no server is left behind
                from hipdnn_trace.bench.forkserver import ForkServer

                ForkServer.discard_early()
    return _parse_and_run(given, command)


def _parse_and_run(given: list[str], command: str | None) -> int:
    """Parse ``given`` (recipe and resume applied) and run the command; its exit code."""
    parser = build_parser(load=[command] if command in COMMANDS else [])
    try:
        args = parser.parse_args(given)
    except SystemExit as exc:   # --help, --version and bad flags: argparse already printed
        return int(exc.code or 0)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return 1
    if getattr(args, "config", None) is not None:   # a recipe: defaults < file < flags given
        from hipdnn_trace.commands.recipe import apply_recipe

        sub = next(a for a in parser._actions if a.dest == "command").choices[args.command]
        try:
            args = apply_recipe(parser, sub, given, args)
        except UserError as exc:
            print(f"hipdnn-trace {args.command}: error: {escape(exc)}", file=sys.stderr)
            return exc.exit_code
    from hipdnn_trace.commands.resume import from_run_json, needs_rebuild

    if needs_rebuild(args):   # `run --resume DIR` alone: DIR/run.json's graphs and flags, flags given win
        try:
            args = from_run_json(build_parser, given, args)
        except UserError as exc:
            print(f"hipdnn-trace {args.command}: error: {escape(exc)}", file=sys.stderr)
            return exc.exit_code
    # the subcommand's own arguments as given (a profiled run re-runs itself with them)
    args.argv = given[given.index(args.command) + 1:] if args.command in given else given
    try:
        code = int(args.main(args) or 0)
        if RECEIVED:   # a signal a library swallowed (interrupts.RECEIVED): the command did not run as asked
            raise Interrupted(RECEIVED[-1])
    except (KeyboardInterrupt, Interrupted) as exc:
        return _interrupted(args.command, exc)
    except UserError as exc:
        if RECEIVED:   # e.g. "torch cannot run: ImportError ..." where the signal stopped torch's import
            return _interrupted(args.command, Interrupted(RECEIVED[-1]))
        print(f"hipdnn-trace {args.command}: error: {escape(exc)}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return 0
    _RETURNED[:] = [code]   # its files are whole: a signal from here on ends the process with this code
    return code


#: the running command's exit code once it returned (``run_and_exit``'s handler exits with it)
_RETURNED: list[int] = []


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """SIGINT / SIGTERM outside a suite's own guard (bench/interrupts.py): before the command returned, raised as
    :class:`Interrupted` so ``main`` prints one line and exits 130 / 143 with every ``finally`` run (not as
    KeyboardInterrupt: one that passed through a library's embedded ``PyRun`` made Python kill itself with
    SIGINT at exit, -2, even when caught); after, the process ends with the command's code, its files whole."""
    if _RETURNED:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(_RETURNED[0])
    RECEIVED.append(signum)
    raise Interrupted(signum)


def handle_signals() -> None:
    """Install :func:`_on_signal` for SIGINT and SIGTERM (the entry points call it first)."""
    _RETURNED.clear()
    RECEIVED.clear()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _on_signal)


def run_and_exit() -> None:
    """The console entry point: run the command, then exit with its code. A SIGINT or SIGTERM before
    the command returns is one line and 130 / 143 (a suite marks run.json ``interrupted`` first); once
    it has returned, its files are whole, and a signal that arrives while the interpreter tears down
    (seconds with torch loaded) ends the process with that code instead of the signal's default
    death, which read as a run killed mid-write."""
    handle_signals()
    code = main()
    _RETURNED[:] = [code]
    raise SystemExit(code)

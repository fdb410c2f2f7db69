"""``run --resume DIR`` with no graphs: the interrupted run's graphs and flags, read back from DIR/run.json.

An interrupted run ends with "finish with --resume DIR", so that alone must be the whole command.
run.json keeps the run's own command line (``argv``: the first run's, also after earlier resumes);
it is parsed again and the flags given now are applied on top of it (defaults < the interrupted run
< a --config recipe given now < flags given now), the layering a recipe already has. What a resume
cannot change (timing, configurations, seed, validation, shard, graphs) is refused afterwards by
``results.rundir.check_resumable``, in one line, like any resume.

Relative paths in that command line are relative to the folder the run was started in, as is the
``DIR`` the message prints: resume from there (a graph path not found from here is one line saying so).
"""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hipdnn_trace import read_gate
from hipdnn_trace.errors import UserError

#: Not taken from the interrupted run: where it lives is DIR itself (``--out``/``--run-id`` named it),
#: its recipe was already read into its values, and how much this command prints is this command's own.
NOT_CARRIED = frozenset({"command", "main", "argv", "graphs", "config", "resume", "out", "run_id",
                         "quiet", "verbose", "progress"})


def needs_rebuild(args: argparse.Namespace) -> bool:
    """True for ``run --resume DIR`` given without graphs (nor graphs from a recipe)."""
    return getattr(args, "command", None) == "run" and getattr(args, "resume", None) is not None \
        and not args.graphs


def interrupted_argv(folder: Path) -> list[str]:
    """The interrupted run's own arguments (after ``run``) from DIR/run.json; one-line UserError when
    the folder or its run.json is missing or unreadable."""
    where = f"--resume {folder}"
    if not folder.exists():
        raise UserError(f"{where}: no such folder")
    if not folder.is_dir():
        raise UserError(f"{where}: not a folder")
    path = folder / "run.json"
    if not path.is_file():
        raise UserError(f"{where}: no run.json there (not a run folder, or stopped before anything was "
                        "recorded); name the graphs and flags to run it")
    try:
        meta = read_gate.read_json(path, read_gate.RUN_JSON)
    except read_gate.ReadRefused as exc:
        raise UserError(f"{where}: cannot read {path} ({exc.problem}); name the graphs and flags to resume it") \
            from None
    argv = meta.get("argv") if isinstance(meta, dict) else None
    if not (isinstance(argv, list) and len(argv) >= 2 and argv[1] == "run"
            and all(isinstance(a, str) for a in argv)):
        raise UserError(f"{path}: argv: not a 'hipdnn-trace run' command line; name the graphs and flags "
                        "to resume it")
    return argv[2:]


def _parse(parser: argparse.ArgumentParser, argv: list[str], path: Path) -> argparse.Namespace:
    """``argv`` parsed, argparse's complaint turned into one line naming run.json."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
            return parser.parse_args(argv)
    except SystemExit:
        lines = [ln for ln in said.getvalue().splitlines() if ln.strip()]
        why = lines[-1].split("error: ", 1)[-1] if lines else "cannot be parsed"
        raise UserError(f"{path / 'run.json'}: argv: {why}") from None


def _run_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    return next(a for a in parser._actions if a.dest == "command").choices["run"]


def _interrupted_values(build_parser: Callable[[], argparse.ArgumentParser], folder: Path) -> dict[str, Any]:
    """Every ``run`` option of the interrupted run, its recipe (if any) applied."""
    old_argv = ["run", *interrupted_argv(folder)]
    parser = build_parser()
    old = _parse(parser, old_argv, folder)
    if old.config is not None:
        from hipdnn_trace.commands.recipe import apply_recipe

        try:
            old = apply_recipe(parser, _run_parser(parser), old_argv, old)
        except UserError as exc:
            raise UserError(f"--resume {folder}: the interrupted run's recipe: {exc}") from None
    return vars(old)


def _check_graphs(folder: Path, graphs: list[str]) -> None:
    """Graph paths relative to where the run started must be found from here (a glob is expanded later)."""
    if not graphs:
        raise UserError(f"--resume {folder}: its run.json names no graphs; name them")
    for arg in graphs:
        if not any(ch in arg for ch in "*?[") and not Path(arg).exists():
            raise UserError(f"--resume {folder}: the interrupted run's graph path {arg} is not found from "
                            f"{Path.cwd()}; resume from the folder the run was started in, or name the graphs")


def from_run_json(build_parser: Callable[[], argparse.ArgumentParser], given: list[str],
                  args: argparse.Namespace) -> argparse.Namespace:
    """``args`` of ``run --resume DIR`` without graphs, rebuilt: the graphs and flags of DIR/run.json,
    with the flags in ``given`` (this command line) winning."""
    folder = Path(args.resume)
    values = _interrupted_values(build_parser, folder)
    graphs = [str(g) for g in values.get("graphs") or []]
    _check_graphs(folder, graphs)
    parser = build_parser()
    sub = _run_parser(parser)
    sub.set_defaults(**{k: v for k, v in values.items() if k not in NOT_CARRIED})
    again = _parse_given(parser, sub, given, args)
    again.graphs = graphs
    return again


def _parse_given(parser: argparse.ArgumentParser, sub: argparse.ArgumentParser, given: list[str],
                 args: argparse.Namespace) -> argparse.Namespace:
    """This command line over the interrupted run's values (and a recipe given now over both)."""
    if args.config is None:
        return parser.parse_args(given)
    from hipdnn_trace.commands.recipe import apply_recipe

    return apply_recipe(parser, sub, given, args)

"""The library interface: drive hipdnn-trace from Python and get polars frames back.

``run`` takes the same options as the command line (underscores for dashes), builds the same
``runs.request.RunRequest`` the CLI builds and executes it on the same path (plan, measure, record),
then returns the run directory read back, so scripts and other tools (a PARAM-style harness, a
notebook) see exactly what the CLI would have written. A problem arrives as the project's exception
(``hipdnn_trace.errors.UserError`` and its kinds), never as text on stderr.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hipdnn_trace.errors import UserError
from hipdnn_trace.results.metadata import new_run_id
from hipdnn_trace.results.rundir import Run, load_run

#: Options that are on by default and switched off with --no-<name>.
NEGATABLE = {"isolate", "trace"}


def _flags(options: dict[str, Any]) -> list[str]:
    """``options`` as ``run`` flags: the run's own command line in run.json (what --resume rebuilds
    and a profiled child re-runs)."""
    argv: list[str] = []
    for key, value in options.items():
        if value is False and key in NEGATABLE:
            argv.append(f"--no-{key.replace('_', '-')}")
            continue
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            argv += [flag, ",".join(str(v) for v in value)]
        else:
            argv += [flag, str(value)]
    return argv


def _run_actions() -> dict[str, argparse.Action]:
    """``run``'s argparse actions by option name: the converters and choices every value passes."""
    from hipdnn_trace.commands import run as run_command

    parser = argparse.ArgumentParser(add_help=False)
    run_command.add_parser(parser.add_subparsers(dest="command"))
    sub = parser._subparsers._group_actions[0].choices["run"]  # type: ignore[union-attr]
    return {a.dest: a for a in sub._actions if a.dest not in ("help", "graphs")}


def _check_options(options: dict[str, Any], actions: dict[str, argparse.Action]) -> None:
    """Keyword options must be ``run`` flags (``iters=50`` is ``--iters 50``): a typo is an error
    naming the closest flag, not a run that fails for a reason printed somewhere else."""
    import difflib

    for key in options:
        if key not in actions:
            guess = difflib.get_close_matches(key, sorted(actions), n=1)
            raise UserError(f"run(): unknown option {key!r}" + (f" (did you mean {guess[0]!r}?)" if guess else ""))


def _value(key: str, value: Any, action: argparse.Action) -> Any:
    """``value`` as the flag's parser gives it (its converter and choices; UserError naming the option)."""
    if value is None:
        return action.default
    if isinstance(value, bool) and action.nargs == 0:   # a switch (--x, --[no-]x, --no-x): its value
        return value
    if value is False:   # a flag that takes a value, left out
        return action.default
    text = ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)
    try:
        converted = action.type(text) if callable(action.type) else text
    except (argparse.ArgumentTypeError, ValueError) as exc:
        raise UserError(f"run(): {key}={value!r}: {exc}") from None
    if action.choices is not None and converted not in action.choices:
        raise UserError(f"run(): {key}={value!r}: choose from {', '.join(map(str, action.choices))}")
    return converted


def _request(items: list[str], out: str | Path, run_id: str, quiet: bool, options: dict[str, Any]) -> Any:
    """The RunRequest the command line ``run <items> --out OUT --run-id ID <options>`` would give."""
    from hipdnn_trace.runs.request import OPTIONS, RunRequest, normalize

    actions = _run_actions()
    _check_options(options, actions)
    argv = [*items, "--out", str(out), "--run-id", run_id, *_flags(options), *(["--quiet"] if quiet else [])]
    if options.get("config") is not None or (options.get("resume") is not None and not items):
        return _layered(argv)   # a recipe, or a resume's run.json: the CLI's layering of defaults
    values = {key: normalize(key, _value(key, value, actions[key])) for key, value in options.items()
              if key in OPTIONS}
    return RunRequest(**values, graphs=tuple(items), out=Path(out), run_id=run_id, quiet=quiet, argv=tuple(argv))


def _layered(argv: list[str]) -> Any:
    """A request whose values come partly from a file: a --config recipe (defaults < recipe < options)
    or, for ``resume`` without graphs, the interrupted run's run.json; read as the command line reads them."""
    from hipdnn_trace.cli import build_parser
    from hipdnn_trace.commands.recipe import apply_recipe
    from hipdnn_trace.commands.resume import from_run_json, needs_rebuild
    from hipdnn_trace.runs.request import request_from_args

    parser = build_parser(load=["run"])
    given = ["run", *argv]
    args = parser.parse_args(given)
    if args.config is not None:
        sub = parser._subparsers._group_actions[0].choices["run"]  # type: ignore[union-attr]
        args = apply_recipe(parser, sub, given, args)
    if needs_rebuild(args):
        args = from_run_json(build_parser, given, args)
    args.argv = argv
    return request_from_args(args)


def run(graphs: str | Path | Sequence[str | Path], *, out: str | Path = "runs", run_id: str | None = None,
        quiet: bool = True, **options: Any) -> Run:
    """Run graphs like ``hipdnn-trace run`` and return the run directory's frames.

    Example: ``hipdnn_trace.run("graphs/conv", backend="cudnn", iters=200).summary``.
    The exit code is in ``run.meta["exit_code"]``; a problem with the options, the graphs or the
    machine raises UserError (or its kinds: GraphError, ToolMissingError) before any run folder exists.
    ``quiet`` (default): nothing on stdout, not even the count line (the result is the return value);
    warnings still reach stderr, which a healthy run leaves empty.
    """
    import contextlib
    import io

    from hipdnn_trace.cli import register_extra_backends
    from hipdnn_trace.runs.measure import execute

    register_extra_backends()
    items = [str(g) for g in ([graphs] if isinstance(graphs, (str, Path)) else graphs)]
    request = _request(items, out, run_id or new_run_id(), quiet, options)
    with contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext():
        finished = execute(request)
    folder = finished.folder
    if folder is None or not (folder / "run.json").exists():
        raise UserError(f"run(): nothing was recorded (exit code {finished.exit_code}); --engine list prints "
                        "the engines and runs nothing")
    result = load_run(folder)
    result.meta["exit_code"] = finished.exit_code
    return result


def compare(run_a: str | Path | Run, run_b: str | Path | Run, **options: Any) -> Any:
    """Significance-tested comparison of two runs (see docs/compare.md)."""
    from hipdnn_trace.compare import compare_runs

    return compare_runs(run_a, run_b, **options)


__all__ = ["compare", "load_run", "run"]

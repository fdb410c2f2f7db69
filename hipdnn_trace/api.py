"""The library interface: drive hipdnn-trace from Python and get polars frames back.

``run`` takes the same options as the command line (underscores for dashes) and
returns the run directory read back, so scripts and other tools (a PARAM-style
harness, a notebook) see exactly what the CLI would have written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hipdnn_trace.errors import UserError
from hipdnn_trace.results.metadata import new_run_id
from hipdnn_trace.results.rundir import Run, load_run

#: Options that are on by default and switched off with --no-<name>.
NEGATABLE = {"isolate", "trace"}


def _flags(options: dict[str, Any]) -> list[str]:
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


def _check_options(options: dict[str, Any]) -> None:
    """Keyword options must be ``run`` flags (``iters=50`` is ``--iters 50``): a typo is an error
    naming the closest flag, not a run that fails for a reason printed somewhere else."""
    import difflib

    from hipdnn_trace.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["run"]
    known = {a.dest for a in sub._actions} - {"help", "graphs"}
    for key in options:
        if key not in known:
            guess = difflib.get_close_matches(key, sorted(known), n=1)
            raise UserError(f"run(): unknown option {key!r}" + (f" (did you mean {guess[0]!r}?)" if guess else ""))


def run(graphs: str | Path | Sequence[str | Path], *, out: str | Path = "runs", run_id: str | None = None,
        quiet: bool = True, **options: Any) -> Run:
    """Run graphs like ``hipdnn-trace run`` and return the run directory's frames.

    Example: ``hipdnn_trace.run("graphs/conv", backend="cudnn", iters=200).summary``.
    The exit code is in ``run.meta["exit_code"]``; a user error raises UserError.
    ``quiet`` (default): nothing on stdout, not even the count line (the result is the return value);
    warnings still reach stderr, which a healthy run leaves empty.
    """
    import contextlib
    import io
    import sys

    from hipdnn_trace.cli import main

    _check_options(options)
    items = [graphs] if isinstance(graphs, (str, Path)) else list(graphs)
    run_id = run_id or new_run_id()
    argv = ["run", *map(str, items), "--out", str(out), "--run-id", run_id, *_flags(options)]
    if quiet:
        argv.append("--quiet")
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), \
            contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext():
        code = main(argv)
    folder = Path(out) / run_id
    if not (folder / "run.json").exists():   # the reason is raised, not printed as well
        reason = next((line for line in reversed(errors.getvalue().splitlines()) if "error" in line), "")
        raise UserError(f"run failed before writing results (exit code {code})"
                        + (f": {reason.split('error: ', 1)[-1]}" if reason else ""))
    sys.stderr.write(errors.getvalue())
    result = load_run(folder)
    result.meta["exit_code"] = code
    return result


def compare(run_a: str | Path | Run, run_b: str | Path | Run, **options: Any) -> Any:
    """Significance-tested comparison of two runs (see docs/compare.md)."""
    from hipdnn_trace.compare import compare_runs

    return compare_runs(run_a, run_b, **options)


__all__ = ["compare", "load_run", "run"]

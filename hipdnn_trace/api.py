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


def run(graphs: str | Path | Sequence[str | Path], *, out: str | Path = "runs", run_id: str | None = None,
        quiet: bool = True, **options: Any) -> Run:
    """Run graphs like ``hipdnn-trace run`` and return the run directory's frames.

    Example: ``hipdnn_trace.run("graphs/conv", backend="cudnn", iters=200).summary``.
    The exit code is in ``run.meta["exit_code"]``; a user error raises UserError.
    """
    from hipdnn_trace.cli import main

    items = [graphs] if isinstance(graphs, (str, Path)) else list(graphs)
    run_id = run_id or new_run_id()
    argv = ["run", *map(str, items), "--out", str(out), "--run-id", run_id, *_flags(options)]
    if quiet:
        argv.append("--quiet")
    code = main(argv)
    folder = Path(out) / run_id
    if not (folder / "run.json").exists():
        raise UserError(f"run failed before writing results (exit code {code})")
    result = load_run(folder)
    result.meta["exit_code"] = code
    return result


def compare(run_a: str | Path | Run, run_b: str | Path | Run, **options: Any) -> Any:
    """Significance-tested comparison of two runs (see docs/compare.md)."""
    from hipdnn_trace.compare import compare_runs

    return compare_runs(run_a, run_b, **options)


__all__ = ["compare", "load_run", "run"]

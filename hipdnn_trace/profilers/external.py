"""Run the harness as a child under an external profiler, then fold the profile in.

The parent builds the child's command line (the user's own ``run`` arguments minus
``--profile``/``--out``/``--run-id``, plus a fixed run id and the marker API the
tool scopes by), lets the profiler wrap it, waits, and then adds what the tool
measured to the child's run directory: kernels and counters frames, per-graph
verdicts in summary, kernel and counter tracks in trace.pftrace, and a
``profile`` block in run.json.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl

from hipdnn_trace.errors import UserError
from hipdnn_trace.profilers.base import Collected
from hipdnn_trace.results.metadata import new_run_id
from hipdnn_trace.results.profile_fold import ProfileResults, fold_profile
from hipdnn_trace.results.run_record import Profile
from hipdnn_trace.results.rundir import Run, load_run
from hipdnn_trace.results.runlock import lock_run_dir

#: Options the parent owns; removed from the child's command line.
_PARENT_OPTIONS = {"--profile": True, "--out": True, "-o": True, "--run-id": True}


def child_arguments(argv: list[str]) -> list[str]:
    """The user's ``run`` arguments without the options the parent decides."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in _PARENT_OPTIONS:
            skip = "=" not in arg
            continue
        out.append(arg)
    return out


def run_external(profiler: Any, args: Any, run_argv: list[str]) -> int:
    """Profile ``hipdnn-trace run <run_argv>``; returns the child's exit code. ``args``: the run's
    request (runs/request.py), which the profiler reads its options from (device, profile_set)."""
    profiler.check_tool()
    run_id = args.run_id or new_run_id()
    folder: Path = args.out / run_id
    if folder.exists() and any(folder.iterdir()):
        raise UserError(f"{folder} already exists; choose another --run-id or --out")
    base = [sys.executable, "-m", "hipdnn_trace", "run", *child_arguments(run_argv),
            "--profile-child", profiler.name, "--markers", profiler.markers]
    passes = max(1, int(profiler.passes(args)))
    pass_dirs: list[Path] = []
    main_rc = 1
    commands: list[str] = []
    pass_codes: list[int] = []
    for index in range(passes):
        if index == 0:
            out, rid = args.out, run_id
        else:
            out, rid = folder / "passes", f"pass{index}"
        child = [*base, "--out", str(out), "--run-id", rid, "--quiet" if index else "--progress=off"]
        run_dir = out / rid
        run_dir.mkdir(parents=True, exist_ok=True)
        command = profiler.command(child, run_dir, index, args)
        commands.append(shlex.join(command))
        env = {**os.environ, **profiler.env(index)}
        try:
            rc = subprocess.call(command, env=env)
        except FileNotFoundError as exc:
            raise UserError(f"--profile {profiler.name}: cannot start {command[0]} ({exc.strerror})") from None
        pass_codes.append(rc)
        if index == 0:
            main_rc = rc
        else:
            pass_dirs.append(run_dir)
            if rc != 0:
                print(f"hipdnn-trace run: warning: counter pass {index} exited with code {rc}; "
                      f"its counters may be missing (see {run_dir})", file=sys.stderr)
    if not (folder / "run.json").exists():
        raise UserError(f"--profile {profiler.name}: the profiled run wrote no results "
                        f"(exit code {main_rc}); command: {commands[0]}")
    lock_run_dir(folder)   # the child released it; nothing else may write the folder while the profile folds in
    run = load_run(folder)
    try:
        collected = profiler.collect(folder, pass_dirs, run.iterations, args)
    except UserError:
        raise
    except Exception as exc:  # a parser failure must not lose the run itself
        raise UserError(f"--profile {profiler.name}: could not read the profile in {folder}: "
                        f"{type(exc).__name__}: {exc}") from None
    collected.meta["pass_exit_codes"] = pass_codes
    fold_in(folder, collected, profiler, args, commands, run)
    return main_rc


def fold_in(folder: Path, collected: Collected, profiler: Any, args: Any, commands: list[str], run: Run) -> None:
    """What the tool measured, handed to results (results/profile_fold.py) to write into ``run``'s folder."""
    details = dict(collected.meta)
    verdicts = details.pop("verdicts", None)
    added = ProfileResults(kernels=collected.kernels, counters=collected.counters,
                           verdicts=verdicts if isinstance(verdicts, pl.DataFrame) else None,
                           profile=Profile.of(profiler.name, details, commands=commands),
                           timing=profiler.timing_meta(args))
    fold_profile(run, added, formats=getattr(args, "format", ["parquet"]))

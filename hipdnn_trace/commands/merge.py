"""``hipdnn-trace merge``: combine the run directories of a sharded sweep into one run."""

from __future__ import annotations

import argparse
import glob
import os
import sys
from pathlib import Path
from typing import Any

from hipdnn_trace.commands import SUMMARIES, argtypes
from hipdnn_trace.console import escape
from hipdnn_trace.errors import UserError

EXAMPLES = """\
examples:
  hipdnn-trace merge runs/shard-* --out runs/sweep        # shards 1..N -> one run
  hipdnn-trace merge runs/sweep/shards --out runs/sweep/all   # every run directory in a folder
  hipdnn-trace merge 'runs/sweep/shards/shard-*' --out runs/all   # a glob, expanded here
  hipdnn-trace compare runs/baseline runs/sweep           # then use it like any run

Refuses runs timed differently (run.json timing blocks), a graph measured on the
same configuration by two inputs (a run and a copy of it) or recorded twice in one,
and inputs whose summary.csv is missing, empty or not a summary table. An --out
another merge or run is writing is refused ("DIR is in use by pid N"). Rows of graphs with no summary
row (a shard killed mid-write) are dropped with a warning. Rows come back in suite
order when the inputs are shards of one suite (--shard I/N); traces are concatenated.
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "merge", help=SUMMARIES["merge"],
        description="Combine run directories (the shards of one sweep, see run --shard) into one run "
                    "directory with every table and the trace.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
    )
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR",
                   help="run directories to combine; a folder with no run.json stands for the run directories "
                        "in it (e.g. the shards folder of 'hipdnn-trace slurm'), and a glob is expanded")
    p.add_argument("--out", "-o", type=Path, required=True, metavar="DIR",
                   help="the merged run directory (new or empty; its name becomes the run_id)")
    p.add_argument("--format", type=argtypes.formats, default=[],
                   help="extra formats for the big frames (default: those the inputs have)")
    p.add_argument("--quiet", "-q", action="store_true", help="no summary line")
    p.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    from hipdnn_trace.results.merge import merge_runs

    runs, skipped = run_directories(args.runs)
    for folder in skipped:
        print(f"hipdnn-trace merge: warning: {escape(folder)}: no run.json (the run never started); skipped",
              file=sys.stderr)
    result = merge_runs(runs, args.out, formats=args.format)
    for warning in result.warnings:
        print(f"hipdnn-trace merge: warning: {escape(warning)}", file=sys.stderr)
    if not args.quiet:
        print(f"merged {len(runs)} run(s): {result.graphs} graph(s), {result.rows} summary row(s)"
              f"{', trace' if result.trace else ''} -> {escape(result.folder)}")
    return 0


def _is_run(folder: Path) -> bool:
    """Has a run.json of any type: one that is no regular file is refused by the loader, by name."""
    return os.path.lexists(folder / "run.json")


def run_directories(given: list[Path]) -> tuple[list[Path], list[Path]]:
    """(run directories, folders skipped) for the RUN_DIR arguments.

    A run directory is itself; a folder without run.json stands for the folders in it
    that have one (sorted by name; its sub-folders without one are skipped, with a
    warning: a shard that never started); a path that does not exist but has glob
    characters is expanded, so a merge job can pass ``DIR/shard-*`` quoted.
    """
    runs: list[Path] = []
    skipped: list[Path] = []
    for arg in given:
        if arg.is_dir():
            if _is_run(arg):
                runs.append(arg)
                continue
            children = sorted(c for c in arg.iterdir() if c.is_dir())
            inside = [c for c in children if _is_run(c)]
            if not inside:
                raise UserError(f"{arg}: not a run directory (no run.json) and holds none")
            runs.extend(inside)
            skipped.extend(c for c in children if not _is_run(c))
        elif not arg.exists() and any(c in str(arg) for c in "*?["):
            matches = sorted(Path(m) for m in glob.glob(str(arg)))
            folders = [m for m in matches if m.is_dir()]
            if not folders:
                raise UserError(f"{arg}: matches no folder")
            runs.extend(m for m in folders if _is_run(m))
            skipped.extend(m for m in folders if not _is_run(m))
            if not any(_is_run(m) for m in folders):
                raise UserError(f"{arg}: matches no run directory (no run.json in {folders[0]})")
        else:
            raise UserError(f"{arg}: not a run directory")
    return runs, skipped

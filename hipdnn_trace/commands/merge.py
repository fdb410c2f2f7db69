"""``hipdnn-trace merge``: combine the run directories of a sharded sweep into one run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hipdnn_trace.commands import argtypes
from hipdnn_trace.console import escape
from hipdnn_trace.errors import UserError

EXAMPLES = """\
examples:
  hipdnn-trace merge runs/shard-* --out runs/sweep        # shards 0..N-1 -> one run
  hipdnn-trace compare runs/baseline runs/sweep           # then use it like any run

Refuses runs timed differently (run.json timing blocks), a graph measured on the
same configuration by two inputs (a run and a copy of it), and inputs whose
summary.csv is missing, empty or not a summary table. Rows of graphs with no summary
row (a shard killed mid-write) are dropped with a warning. Rows come back in suite
order when the inputs are shards of one suite (--shard I/N); traces are concatenated.
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "merge", help="combine shard runs into one run directory",
        description="Combine run directories (the shards of one sweep, see run --shard) into one run "
                    "directory with every table and the trace.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
    )
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="run directories to combine")
    p.add_argument("--out", "-o", type=Path, required=True, metavar="DIR",
                   help="the merged run directory (new or empty; its name becomes the run_id)")
    p.add_argument("--format", type=argtypes.formats, default=[],
                   help="extra formats for the big frames (default: those the inputs have)")
    p.add_argument("--quiet", "-q", action="store_true", help="no summary line")
    p.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    from hipdnn_trace.results.merge import merge_runs

    missing = [str(p) for p in args.runs if not p.is_dir()]
    if missing:
        raise UserError(f"{missing[0]}: not a run directory")
    result = merge_runs(args.runs, args.out, formats=args.format)
    for warning in result.warnings:
        print(f"hipdnn-trace merge: warning: {escape(warning)}", file=sys.stderr)
    if not args.quiet:
        print(f"merged {len(args.runs)} run(s): {result.graphs} graph(s), {result.rows} summary row(s)"
              f"{', trace' if result.trace else ''} -> {escape(result.folder)}")
    return 0

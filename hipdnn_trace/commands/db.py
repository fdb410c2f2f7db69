"""``hipdnn-trace db import RUN_DIR... --db FILE|URL``: run folders into the results store (docs/history.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hipdnn_trace.commands import SUMMARIES
from hipdnn_trace.console import escape

EXAMPLES = """\
examples:
  hipdnn-trace db import runs/nightly-2026-11-28 --db perf.duckdb        # one run into a DuckDB file
  hipdnn-trace db import runs/ --db perf.duckdb                          # every run folder under runs/
  hipdnn-trace db import runs/sweep --db postgresql://perf@db-host/perf  # a team's PostgreSQL
  hipdnn-trace history --db perf.duckdb --html history.html              # then: series and steps

Importing a run twice changes nothing (runs are keyed by run_id and creation time); a different run with
a run_id already in the store is refused. All runs of one call go in together or not at all.
"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser("db", help=SUMMARIES["db"], description="The results store: every run in one database.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    imp = verbs.add_parser("import", help="import run folders (a folder without run.json: the runs in it)",
                           epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    imp.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR")
    add_db_option(imp, required=True)
    imp.add_argument("--quiet", "-q", action="store_true", help="no summary line")
    p.set_defaults(main=main)


def add_db_option(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument("--db", required=required, metavar="FILE|URL",
                        help="the store: a DuckDB file (made when absent) or a postgresql:// URL")


def main(args: argparse.Namespace) -> int:
    from hipdnn_trace.commands.merge import run_directories
    from hipdnn_trace.history.importer import import_runs
    from hipdnn_trace.history.store import Store

    runs, skipped = run_directories(args.runs)
    for folder in skipped:
        print(f"hipdnn-trace db: warning: {escape(folder)}: no run.json; skipped", file=sys.stderr)
    store = Store(args.db)
    try:
        outcome = import_runs(store, runs)
    finally:
        store.close()
    if not args.quiet:
        print(f"imported {len(outcome.imported)} run(s), {outcome.rows} row(s)"
              f"{f'; {len(outcome.skipped)} already in the store' if outcome.skipped else ''} -> {escape(args.db)}")
    return 0

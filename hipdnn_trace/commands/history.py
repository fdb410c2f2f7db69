"""``hipdnn-trace history [GRAPH...] --db FILE|URL [--html PAGE]``: series per graph x configuration x GPU
from the store, their step changes, and the dashboard (docs/history.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hipdnn_trace.commands import SUMMARIES
from hipdnn_trace.console import escape

EXAMPLES = """\
examples:
  hipdnn-trace history --db perf.duckdb                        # every step change, largest first
  hipdnn-trace history llm_rmsnorm_backward_8x2048x4096_bf16 --db perf.duckdb --series   # one graph's runs
  hipdnn-trace history --db perf.duckdb --html history.html    # the morning page
  hipdnn-trace history --db postgresql://perf@db-host/perf --json changes.json
exit codes: 0 no regression, 3 a regression was found (as compare), 1 bad input.
"""


def add_parser(sub: Any) -> None:
    from hipdnn_trace.commands.db import add_db_option

    p = sub.add_parser("history", help=SUMMARIES["history"], epilog=EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
                       description="Series of each graph x configuration x GPU over the runs in the store, and the "
                                   "step changes in them (PELT, judged against the runs' own noise), with what "
                                   "changed in the libraries at each step.")
    p.add_argument("graphs", nargs="*", metavar="GRAPH", help="graph names or graph_ids (default: all)")
    add_db_option(p, required=True)
    p.add_argument("--html", type=Path, metavar="PAGE", help="write the dashboard: one self-contained HTML page")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the step changes as JSON")
    p.add_argument("--series", action="store_true", help="print every point of the selected series too")
    p.set_defaults(main=main)


def _print(changes: list, points: Any, series: bool) -> None:
    if not changes:
        print("no step change")
    for c in changes:
        print(f"{c.kind:11s} {escape(c.graph)} [{escape(c.config)}, {escape(c.gpu)}] at {escape(c.run_id)} "
              f"({c.created}): x{c.ratio:.4f} [{c.ratio_low:.4f}, {c.ratio_high:.4f}], {c.sigmas:.1f} noise units; "
              f"changed: {escape(c.versions_changed or 'nothing recorded')}")
    if series:
        for row in points.iter_rows(named=True):
            print(f"  {escape(row['graph'])} {escape(row['config'])} {escape(row['gpu'])} {escape(row['run_id'])} "
                  f"{row['created']} {row['median_ms']} [{row['ci_low_ms']}, {row['ci_high_ms']}] {row['status']}")


def main(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from hipdnn_trace.atomic import write_text_atomic
    from hipdnn_trace.errors import UserError
    from hipdnn_trace.history.dashboard import write_dashboard
    from hipdnn_trace.history.series import changes_in, load_series
    from hipdnn_trace.history.store import Store

    store = Store(args.db, create=False)
    try:
        points = load_series(store, args.graphs or None)
    finally:
        store.close()
    if args.graphs and points.is_empty():
        raise UserError(f"history: no graph named {', '.join(args.graphs)} in {args.db}")
    changes = changes_in(points)
    _print(changes, points, args.series)
    if args.json:
        write_text_atomic(args.json, json.dumps([{**asdict(c), "kind": c.kind, "created": str(c.created)}
                                                 for c in changes], indent=1))
    if args.html:
        write_dashboard(args.html, points, changes)
        print(f"dashboard -> {escape(args.html)}", file=sys.stderr)
    return 3 if any(c.kind == "regression" for c in changes) else 0

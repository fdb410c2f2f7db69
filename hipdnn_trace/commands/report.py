"""``hipdnn-trace report RUN [RUN_B]``: self-contained HTML + Markdown report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hipdnn_trace.commands import SUMMARIES
from hipdnn_trace.commands.compare import add_comparison_options, comparison_options
from hipdnn_trace.errors import UserError

DESCRIPTION = """\
Write one self-contained HTML file (figures embedded, nothing fetched when it opens)
and a Markdown twin: run metadata, per-graph summary, timing distributions,
per-iteration time series (warmup and throttled iterations visible), throughput /
roofline when FLOPs or counters exist, validation. A run profiled with the why set
(--profile ncu) adds a "Why" section: limiter bars per graph, a hierarchical roofline
(L1, L2, DRAM) with kernels as points and the kernel-level explanation table of its
oracle / A/B pairs (or of RUN_B's SLOWER/FASTER graphs). With RUN_B, also the A/B verdicts
of `hipdnn-trace compare` with CI bars. Figures show the top N graphs (largest
changes, or slowest); tables list all of them.
"""


EXAMPLES = """\
examples:
  hipdnn-trace report runs/20261124-010203-ab12cd              # report.html + report.md in the run
  hipdnn-trace report runs/base runs/new -o ab.html            # B against A, with verdicts and CI bars
  hipdnn-trace report runs/new --top 20                        # more graphs in the figures
  hipdnn-trace report runs/oracle_ncu                          # run --oracle --profile ncu: the Why section
"""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "report",
        help=SUMMARIES["report"],
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run", metavar="RUN", help="run directory (A when RUN_B is given)")
    parser.add_argument("run_b", metavar="RUN_B", nargs="?", help="run to compare against RUN")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE.html",
                        help="where to write (default RUN/report.html, or "
                             "RUN_B/report-vs-<A>.html); the .md goes beside it")
    parser.add_argument("--top", type=int, default=12,
                        help="graphs to plot (default 12); tables list all")
    add_comparison_options(parser)   # used with RUN_B
    parser.set_defaults(main=main)
    return parser


def _load(name: str) -> Any:
    """A run to report on: readable (compare.loading) and with at least one summary row."""
    from hipdnn_trace.compare.loading import load_input

    run = load_input(name)
    if not run.summary.height and not run.iterations.height:
        raise UserError(f"{Path(run.path) / 'summary.csv'}: no graph recorded; nothing to report")
    return run


def main(args: argparse.Namespace) -> int:
    from hipdnn_trace.compare.report import write_report  # matplotlib loads only here

    options = {}
    if args.run_b is not None:
        options = comparison_options(args)
    run_a = _load(args.run)
    run_b = _load(args.run_b) if args.run_b is not None else None
    html_path, md_path = write_report(run_a, run_b, output=args.output, top=args.top, **options)
    print(f"wrote {html_path}")
    print(f"wrote {md_path}")
    return 0

"""``hipdnn-trace report RUN [RUN_B]``: self-contained HTML + Markdown report."""

from __future__ import annotations

import argparse
from pathlib import Path

from hipdnn_trace.compare.comparison import N_BOOT
from hipdnn_trace.compare.matching import MODES

DESCRIPTION = """\
Write one self-contained HTML file (figures embedded, nothing fetched when it opens)
and a Markdown twin: run metadata, per-graph summary, timing distributions,
per-iteration time series (warmup and throttled iterations visible), throughput /
roofline when FLOPs or counters exist, validation. With RUN_B, also the A/B verdicts
of `hipdnn-trace compare` with CI bars. Figures show the top N graphs (largest
changes, or slowest); tables list all of them.
"""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "report",
        help="HTML + Markdown report of a run, or of run B against run A",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run", metavar="RUN", help="run directory (A when RUN_B is given)")
    parser.add_argument("run_b", metavar="RUN_B", nargs="?", help="run to compare against RUN")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE.html",
                        help="where to write (default RUN/report.html, or "
                             "RUN_B/report-vs-<A>.html); the .md goes beside it")
    parser.add_argument("--top", type=int, default=12,
                        help="graphs to plot (default 12); tables list all")
    parser.add_argument("--by", choices=MODES, default="graph", help="as in compare")
    parser.add_argument("-t", "--threshold", type=float, default=0.05, help="as in compare")
    parser.add_argument("--alpha", type=float, default=0.05, help="as in compare")
    parser.add_argument("--allow-mismatch", action="store_true", help="as in compare")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--bootstrap", type=int, default=N_BOOT, metavar="N",
                        help=f"bootstrap replicates per row (default {N_BOOT})")
    parser.add_argument("--drift", default="auto", metavar="auto|off|FRACTION",
                        help="as in compare")
    parser.add_argument("--relative", action="store_true", help="as in compare")
    parser.set_defaults(main=main)
    return parser


def main(args: argparse.Namespace) -> int:
    from hipdnn_trace.compare.report import write_report  # matplotlib loads only here

    options = {}
    if args.run_b is not None:
        options = dict(by=args.by, threshold=args.threshold, alpha=args.alpha,
                       allow_mismatch=args.allow_mismatch, seed=args.seed, n_boot=args.bootstrap,
                       drift=args.drift, relative=args.relative)
    html_path, md_path = write_report(args.run, args.run_b, output=args.output, top=args.top,
                                      **options)
    print(f"wrote {html_path}")
    print(f"wrote {md_path}")
    return 0

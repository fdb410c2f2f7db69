"""``hipdnn-trace compare RUN_A [RUN_B]``: significance-tested A/B of two runs, or the interleaved A/B
verdicts one run decided as it ran (its ab.csv)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hipdnn_trace.commands import SUMMARIES
from hipdnn_trace.compare import compare_runs, render
from hipdnn_trace.compare.comparison import N_BOOT
from hipdnn_trace.compare.matching import MODES
from hipdnn_trace.console import escape
from hipdnn_trace.errors import UserError

DESCRIPTION = """\
Compare run B against run A graph by graph: B/A time, the ratio of medians (>1: B
slower, the direction every output of hipdnn-trace uses), with a 95% CI
(bootstrap of the raw samples, widened by the run-to-run drift the suite shows), a
Mann-Whitney U p-value (Holm-adjusted across the suite) and a verdict:
  SLOWER / FASTER  p(Holm) < alpha and the whole CI beyond 1+t (or below 1/(1+t))
  SAME             the whole CI inside [1/(1+t), 1+t]
  INCONCLUSIVE     anything else (need more samples, or a change near t)
exit codes: 0 no regression, 2 an output newly fails validation, 3 a row is SLOWER,
1 bad input, runs timed differently (see --allow-mismatch) or under different clock
policies (see --allow-clock-mismatch), or too few graphs in both
runs for an overall claim (see --min-coverage). docs/compare.md.
With RUN_A alone: the verdicts of the interleaved A/B that `run --a X --b Y` decided
(ab.csv: FASTER / SLOWER / SAME / UNDECIDED per graph; exit 3 when a row is SLOWER);
with two runs, each run's interleaved verdicts follow the table.
"""


EXAMPLES = """\
examples:
  hipdnn-trace compare runs/base runs/new                   # verdict per graph, exit 3 on a slowdown
  hipdnn-trace compare runs/base runs/new -t 0.02           # changes under 2% do not matter
  hipdnn-trace compare runs/base runs/new --format csv > ab.csv
  hipdnn-trace compare runs/base runs/new --json ab.json --top 10
  hipdnn-trace compare runs/plugin_a runs/plugin_b --by engine   # pair rows by engine too
  hipdnn-trace compare runs/locked runs/boost --cycles      # time x clock: runs at different clocks
  hipdnn-trace compare runs/ab                              # run --a X --b Y: its interleaved verdicts
  hipdnn-trace compare runs/base runs/new --why             # SLOWER/FASTER graphs explained kernel by kernel
  hipdnn-trace compare runs/oracle --why                    # run --oracle --profile ncu: why the tuned plan wins
"""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "compare",
        help=SUMMARIES["compare"],
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_a", metavar="RUN_A", help="baseline run directory (or a file in it)")
    parser.add_argument("run_b", metavar="RUN_B", nargs="?",
                        help="run to judge against the baseline (left out: RUN_A's interleaved A/B verdicts)")
    add_comparison_options(parser)
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table",
                        help="what to print on stdout (default table)")
    parser.add_argument("--csv", type=Path, metavar="FILE", help="also write the table as CSV")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write everything as JSON")
    parser.add_argument("--why", action="store_true",
                        help="explain each SLOWER/FASTER graph kernel by kernel (time, grid and waves, occupancy, "
                             "limiter, stalls) from the runs' kernel_metrics (run --profile ncu); with RUN_A alone, "
                             "the oracle's out-of-the-box vs tuned plans and the interleaved A/B pairs")
    parser.add_argument("--top", type=int, default=5,
                        help="regressions and improvements to highlight (default 5)")
    parser.set_defaults(main=main)
    return parser


def add_comparison_options(parser: argparse.ArgumentParser) -> None:
    """The options that shape a comparison: shared by ``compare`` and ``report``."""
    parser.add_argument("--by", choices=MODES, default="graph",
                        help="pair rows by graph x config (default), also by engine, "
                             "or each run's best engine")
    parser.add_argument("-t", "--threshold", type=float, default=0.05,
                        help="smallest change that matters, as a fraction (default 0.05 = 5%%)")
    parser.add_argument("--alpha", type=float, default=0.05,
                        help="family-wise significance level for the Holm-adjusted test (0.05)")
    parser.add_argument("--allow-mismatch", action="store_true",
                        help="compare even if the runs used different timers, cache modes, "
                             "profiler clock control, staged timing or CUDA graph replay")
    parser.add_argument("--allow-clock-mismatch", action="store_true",
                        help="compare even if the runs' GPU clocks were under different policies "
                             "(run --clocks, and whether the lock held); the output says so")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--bootstrap", type=int, default=N_BOOT, metavar="N",
                        help=f"bootstrap replicates per row (default {N_BOOT})")
    parser.add_argument("--drift", default="auto", metavar="auto|off|FRACTION",
                        help="run-to-run noise per graph that widens each CI: estimated from "
                             "the suite (auto, needs 10+ rows), none (off), or given, e.g. "
                             "0.02 from an A/A calibration")
    parser.add_argument("--min-coverage", type=float, default=0.5, metavar="FRACTION",
                        help="make an overall (geomean) claim only when at least this share of the graph "
                             "rows of either run is in both (default 0.5; 0 always claims); below it "
                             "compare exits 1 unless a row is SLOWER or newly failing")
    parser.add_argument("--cycles", action="store_true",
                        help="compare GPU cycles (kernel_ms x the SM clock sampled during each iteration) "
                             "instead of times: for runs taken at different clocks (allows a clock-policy "
                             "difference); needs clock samples (NVML) in both runs")
    parser.add_argument("--relative", action="store_true",
                        help="judge each graph against the suite's centre instead of 1: for "
                             "machines whose overall speed moves between runs (a suite-wide "
                             "change then shows only in the geomean)")


def comparison_options(args: argparse.Namespace) -> dict:
    """Those options as keyword arguments of :func:`hipdnn_trace.compare.compare_runs`."""
    return dict(by=args.by, threshold=args.threshold, alpha=args.alpha, allow_mismatch=args.allow_mismatch,
                allow_clock_mismatch=args.allow_clock_mismatch, seed=args.seed, n_boot=args.bootstrap, drift=args.drift,
                relative=args.relative, min_coverage=args.min_coverage, cycles=args.cycles)


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as exc:
        raise UserError(f"{path}: cannot write: {exc.strerror or exc}") from exc


def _one_run(args: argparse.Namespace) -> int:
    """RUN_A alone: the interleaved A/B verdicts it decided as it ran (with --why: and its pairs explained)."""
    from hipdnn_trace.compare import ab_view
    from hipdnn_trace.compare.loading import load_input, run_label

    run = load_input(args.run_a)
    df = ab_view.ab_frame(run)
    if getattr(args, "why", False) and not df.height:
        from hipdnn_trace.compare.why_sections import one_run

        text, _ = one_run(run, args.threshold)
        sys.stdout.write("\n".join(escape(line) for line in text.split("\n")))
        return 0
    if not df.height:
        raise UserError(f"{args.run_a}: no interleaved A/B verdicts (ab.csv: a run --a X --b Y writes them); "
                        "name RUN_B to compare two runs")
    text = {"table": lambda: ab_view.console(df, run_label(run)), "csv": df.write_csv,
            "json": lambda: ab_view.to_json(df)}[args.format]()
    if args.csv:
        _write(args.csv, df.write_csv())
    if args.json:
        _write(args.json, ab_view.to_json(df))
    if args.format == "table" and getattr(args, "why", False):
        from hipdnn_trace.compare.why_sections import one_run

        text += "\n" + one_run(run, args.threshold)[0]
    sys.stdout.write("\n".join(escape(line) for line in text.split("\n")) if args.format == "table" else text)
    return ab_view.exit_code(df)


def _interleaved_sections(sources: list[str]) -> str:
    """Each run's own interleaved A/B verdicts, after the two-run table (dnn-benchmarking files and
    lone iterations files have none)."""
    from hipdnn_trace.compare import ab_view, dnnbench_input
    from hipdnn_trace.compare.loading import load_input, run_label

    parts = []
    for source in sources:
        if dnnbench_input.is_dnnbench(source):
            continue
        run = load_input(source)
        df = ab_view.ab_frame(run)
        if df.height:
            parts.append("\n" + ab_view.console(df, run_label(run)))
    return "".join(parts)


def main(args: argparse.Namespace) -> int:
    if args.run_b is None:
        return _one_run(args)
    comparison = compare_runs(args.run_a, args.run_b, **comparison_options(args))
    if args.csv:
        _write(args.csv, render.to_csv(comparison))
    if args.json:
        _write(args.json, render.to_json(comparison))
    text = {
        "table": lambda: render.console(comparison, top=args.top),
        "csv": lambda: render.to_csv(comparison),
        "json": lambda: render.to_json(comparison),
    }[args.format]()
    if args.format == "table":   # names are data: no control characters on the terminal (csv/json as they are)
        text += _interleaved_sections([args.run_a, args.run_b])
        if args.why:
            from hipdnn_trace.compare.loading import load_input
            from hipdnn_trace.compare.why_sections import two_runs

            text += two_runs(comparison, load_input(args.run_a), load_input(args.run_b))
        text = "\n".join(escape(line) for line in text.split("\n"))
    sys.stdout.write(text)
    return comparison.exit_code

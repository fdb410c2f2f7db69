"""A/A calibration of ``hipdnn-trace compare``: how often does it cry wolf?

Compare a suite with itself (two runs of the same code) and count verdicts. Every
FASTER or SLOWER is a false verdict; the rule promises a rate <= 5% at the default
threshold. The same script also checks the other side: a true 10% slowdown with enough
samples must come out SLOWER.

Two sources of A/A pairs:

- ``--synthetic`` (default): a noise model of GPU kernel timings with what makes real
  A/A runs differ: log-normal per-sample noise (CV 0.5-8%), AR(1) drift inside a run,
  rare interrupt spikes, and a run-to-run offset per graph (``--drift``, default 1% sd)
  that the within-run samples cannot see.
- ``--harness GRAPHS``: really run ``hipdnn-trace run GRAPHS`` twice and compare (pass
  extra run flags with ``--run-args``).

    python benchmarks/aa_calibration.py                   # synthetic, prints a summary
    python benchmarks/aa_calibration.py --json aa.json    # ... and records it
    python benchmarks/aa_calibration.py --harness graphs/ --run-args "--iters 50"
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from hipdnn_trace.compare import FASTER, SLOWER, VERDICTS, compare_runs
from hipdnn_trace.results import schemas
from hipdnn_trace.results.rundir import Run

TIMING = {"timer": "synthetic", "cache": "warm", "clock_control": None,
          "cuda_graph": False, "staged": False}


class NoiseModel:
    """Kernel timings of one suite; ``draw_run`` gives one run of it."""

    def __init__(self, rng: np.random.Generator, n_graphs: int, iters: tuple[int, ...],
                 drift: float) -> None:
        self.rng = rng
        self.medians = np.exp(rng.uniform(np.log(0.01), np.log(10.0), n_graphs))
        self.cv = rng.uniform(0.005, 0.08, n_graphs)
        self.iters = rng.choice(iters, n_graphs)
        self.drift = drift

    def draw_run(self, run_id: str, slowdown: float = 1.0) -> Run:
        rows: dict[str, list[Any]] = {c: [] for c in ("graph", "graph_id", "iteration", "kernel_ms")}
        for g, (median, cv, n) in enumerate(zip(self.medians, self.cv, self.iters)):
            offset = np.exp(self.rng.normal(0.0, self.drift))  # run-to-run, per graph
            innovations = self.rng.normal(0.0, cv, n)
            log_noise = np.empty(n)
            log_noise[0] = innovations[0]
            for i in range(1, n):  # AR(1), phi 0.5, same marginal sd
                log_noise[i] = 0.5 * log_noise[i - 1] + np.sqrt(0.75) * innovations[i]
            spikes = self.rng.random(n) < 0.03
            values = median * offset * slowdown * np.exp(log_noise)
            values[spikes] *= 1.0 + self.rng.exponential(0.3, spikes.sum())
            rows["graph"] += [f"g{g}"] * n
            rows["graph_id"] += [f"id{g}"] * n
            rows["iteration"] += list(range(n))
            rows["kernel_ms"] += values.tolist()
        iterations = pl.DataFrame(rows).with_columns(
            pl.lit(run_id).alias("run_id"), pl.lit("synthetic").alias("config"),
            pl.lit("timed").alias("phase"), pl.lit("default").alias("engine"),
        )
        frames = {name: schemas.empty(schema) for name, schema in schemas.FRAMES.items()}
        frames["iterations"] = schemas.conform(iterations, schemas.ITERATIONS)
        return Run(path=Path(run_id), meta={"run_id": run_id, "status": "complete",
                                            "timing": TIMING}, **frames)


def tally(tables: list[pl.DataFrame]) -> dict[str, Any]:
    table = pl.concat(tables)
    counts = {v: int((table["verdict"] == v).sum()) for v in VERDICTS}
    rows = table.height
    return {
        "rows": rows,
        "counts": counts,
        "false_verdict_rate": (counts[FASTER] + counts[SLOWER]) / rows if rows else None,
        "slower_rate": counts[SLOWER] / rows if rows else None,
    }


def synthetic(args: argparse.Namespace) -> dict[str, Any]:
    """A/A and a 10% slowdown on synthetic suites, with drift estimation on and off."""
    rng = np.random.default_rng(args.seed)
    tables: dict[str, list[pl.DataFrame]] = {"aa": [], "aa_off": [], "shift": [], "shift_off": []}
    for s in range(args.suites):
        model = NoiseModel(rng, args.graphs, tuple(args.iters), args.drift)
        a, b, slow = model.draw_run(f"A{s}"), model.draw_run(f"B{s}"), model.draw_run(
            f"S{s}", slowdown=1.10)
        for suffix, drift in (("", "auto"), ("_off", "off")):
            options = {"threshold": args.threshold, "seed": s, "drift": drift}
            tables["aa" + suffix].append(compare_runs(a, b, **options).table)
            shifted = compare_runs(a, slow, **options).table
            tables["shift" + suffix].append(shifted.filter(pl.col("n_a") >= 50))
    return {
        "source": "synthetic",
        "model": {"suites": args.suites, "graphs_per_suite": args.graphs, "iters": args.iters,
                  "cv": [0.005, 0.08], "ar1_phi": 0.5, "spike_rate": 0.03,
                  "run_to_run_drift_sd": args.drift, "seed": args.seed},
        "threshold": args.threshold,
        "aa": tally(tables["aa"]),
        "aa_drift_off": tally(tables["aa_off"]),
        "shift_10pct_n_ge_50": tally(tables["shift"]),
        "shift_10pct_n_ge_50_drift_off": tally(tables["shift_off"]),
    }


def harness(args: argparse.Namespace) -> dict[str, Any]:
    """Run the suite ``pairs + 1`` times back to back; judge each run against the one before."""
    from hipdnn_trace.cli import main as cli

    extra = shlex.split(args.run_args)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        dirs = []
        for index in range(args.pairs + 1):
            out = root / f"run{index}"
            code = cli(["run", args.harness, "--out", str(out), "--quiet", *extra])
            if code not in (0, 2):
                raise SystemExit(f"hipdnn-trace run exited {code}")
            found = sorted(p.parent for p in out.glob("*/run.json"))
            if len(found) != 1:
                raise SystemExit(f"expected one run directory under {out}, found {len(found)}")
            dirs.append(found[0])
        absolute, relative, pairs = [], [], []
        for first, second in zip(dirs, dirs[1:]):
            options = {"threshold": args.threshold, "seed": args.seed}
            result = compare_runs(first, second, **options)
            absolute.append(result.table)
            relative.append(compare_runs(first, second, relative=True, **options).table)
            pairs.append({"drift": result.settings["drift"], "geomean": result.geomean,
                          "geomean_ci": list(result.geomean_ci), "counts": result.counts,
                          "notes": result.notes})
    return {
        "source": "harness",
        "graphs": args.harness,
        "run_args": extra,
        "runs": [str(d) for d in dirs] if args.keep else None,
        "threshold": args.threshold,
        "aa": tally(absolute),
        "aa_relative": tally(relative),
        "pairs": pairs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--harness", metavar="GRAPHS", help="run this suite twice for real")
    parser.add_argument("--run-args", default="", help="extra flags for hipdnn-trace run")
    parser.add_argument("--suites", type=int, default=20, help="synthetic suites (20)")
    parser.add_argument("--graphs", type=int, default=50, help="graphs per synthetic suite (50)")
    parser.add_argument("--iters", type=int, nargs="+", default=[20, 50, 100],
                        help="timed iterations a synthetic graph may have (20 50 100)")
    parser.add_argument("--drift", type=float, default=0.01,
                        help="run-to-run offset sd per graph, synthetic (0.01)")
    parser.add_argument("--threshold", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the result here")
    parser.add_argument("--pairs", type=int, default=1,
                        help="harness: A/A pairs (pairs + 1 runs, each against the one before)")
    parser.add_argument("--keep", metavar="DIR", help="harness: keep the runs under DIR")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    result = harness(args) if args.harness else synthetic(args)
    result["seconds"] = round(time.perf_counter() - started, 1)
    aa = result["aa"]
    print(f"A/A ({result['source']}): {aa['rows']} rows, verdicts {aa['counts']}, "
          f"false-verdict rate {aa['false_verdict_rate']:.2%} (must be <= 5%)")
    if "aa_relative" in result:
        rel = result["aa_relative"]
        print(f"  --relative: verdicts {rel['counts']}, false-verdict rate "
              f"{rel['false_verdict_rate']:.2%}")
        for pair in result["pairs"]:
            print(f"  pair: geomean B/A {pair['geomean']:.3f}, drift {pair['drift']:.1%}, "
                  f"{pair['counts']}")
    if "aa_drift_off" in result:
        off = result["aa_drift_off"]
        print(f"  --drift off: verdicts {off['counts']}, false-verdict rate "
              f"{off['false_verdict_rate']:.2%}")
        power, power_off = result["shift_10pct_n_ge_50"], result["shift_10pct_n_ge_50_drift_off"]
        print(f"10% slowdown, n >= 50: {power['rows']} rows, SLOWER {power['slower_rate']:.1%} "
              f"(--drift off: {power_off['slower_rate']:.1%})")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if aa["false_verdict_rate"] is not None and aa["false_verdict_rate"] <= 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())

"""How close ``run``'s up-front estimate came to what happened, per suite and per graph.

Reads finished run directories: run.json's ``estimate`` (what ``run`` expected before any work:
``seconds``, per-graph ``graphs`` and the ``rates`` it measured, bench/estimate.py), its ``elapsed_s``
(the suite's wall), and breakdown.csv's ``wall_ms`` per graph. Prints one row per run (estimate,
actual, ratio) and, over all runs, the graphs that took longer than ``--min-s`` whose estimate was
furthest off. ``--recompute`` prices the run again with this checkout's model at the rates that run
measured (for a run made before a change to the model's constants).

    hipdnn-trace run graphs/ --out runs --run-id bundled
    python benchmarks/estimate_accuracy.py runs/bundled [runs/other ...] --min-s 2
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path


def _graph_walls(folder: Path) -> dict[str, float]:
    """Seconds per source from breakdown.csv (a graph's configs share its wall: the first row)."""
    walls: dict[str, float] = {}
    with open(folder / "breakdown.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            walls.setdefault(row["source"], float(row["wall_ms"]) / 1e3)
    return walls


def _recomputed(meta: dict) -> dict:
    """The run's estimate from this checkout's model, at the rates recorded in its run.json."""
    from hipdnn_trace.backends.reference import cost
    from hipdnn_trace.bench.config import Config
    from hipdnn_trace.bench.estimate import estimate_suite
    from hipdnn_trace.bench.graph_run import RunSettings
    from hipdnn_trace.bench.loop import LoopSettings
    from hipdnn_trace.graph.sources import expand

    timing, iso = meta["timing"], meta.get("isolation") or {}
    settings = RunSettings(loop=LoopSettings(warmup=timing["warmup"], iters=timing["iters"],
                                             min_time_ms=timing.get("min_time_ms") or 0.0),
                           validate=(meta.get("validation") or {}).get("against", "reference"), allow_unknown=True)
    configs = [Config(c["name"], c["backend"], c.get("engine")) for c in meta["configs"]]
    isolation = None if not iso.get("enabled") else ("fresh" if iso.get("child") == "fresh per graph" else "resident")
    ests = estimate_suite(expand(list(meta["estimate"]["graphs"])), configs, settings,
                          rates=cost.Rates(**meta["estimate"]["rates"]), isolation=isolation)
    return {"seconds": sum(e.seconds for e in ests), "graphs": {e.source: e.seconds for e in ests}}


def _ratio(estimate: float, actual: float) -> float:
    return estimate / actual if actual > 0 else math.inf


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="finished run directories")
    parser.add_argument("--min-s", type=float, default=2.0, help="per-graph check: graphs longer than this")
    parser.add_argument("--worst", type=int, default=10, help="how many of the worst graphs to list")
    parser.add_argument("--recompute", action="store_true",
                        help="price each run again with this checkout's model at the rates it recorded")
    args = parser.parse_args(argv)
    graphs: list[tuple[float, float, str, str]] = []
    print("| run | graphs | estimate s | actual wall s | ratio |")
    print("|---|---:|---:|---:|---:|")
    for folder in args.runs:
        meta = json.loads((folder / "run.json").read_text())
        est = meta.get("estimate")
        if not est or (args.recompute and "rates" not in est):
            print(f"{folder}: run.json has no estimate{' rates' if est else ''} (a --gpus run, or older code)",
                  file=sys.stderr)
            continue
        if args.recompute:
            est = _recomputed(meta)
        actual = float(meta.get("elapsed_s") or 0.0)
        print(f"| {folder.name} | {len(est['graphs'])} | {est['seconds']:.1f} | {actual:.1f} | "
              f"{_ratio(est['seconds'], actual):.2f} |")
        for source, wall in _graph_walls(folder).items():
            if source in est["graphs"]:
                graphs.append((wall, float(est["graphs"][source]), Path(source).stem, folder.name))
    long = [g for g in graphs if g[0] > args.min_s]
    outside = [g for g in long if not 0.5 <= _ratio(g[1], g[0]) <= 2.0]
    print(f"\ngraphs longer than {args.min_s:g} s: {len(long)}; estimate outside 2x: {len(outside)}")
    print("\n| graph | run | estimate s | actual s | ratio |")
    print("|---|---|---:|---:|---:|")
    for wall, est, name, run in sorted(long, key=lambda g: -abs(math.log(_ratio(g[1], g[0]))))[:args.worst]:
        print(f"| {name} | {run} | {est:.1f} | {wall:.1f} | {_ratio(est, wall):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

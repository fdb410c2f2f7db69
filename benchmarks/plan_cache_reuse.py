"""What the plan cache saves a rerun: one suite run cold (an empty cache), again (the cache filled by the
first), and once with ``--no-plan-cache``, in that order, each as a user runs it (a fresh process).

For each run: the command's wall, the sum of the per-graph build (``t_init`` in breakdown.csv), how many
sessions had their plan from the cache (run.json ``sessions.*.graphs.*.plan_source``) and why entries were
not used (``plan_cache_note``), and whether every (graph, config) has the first run's status and verdict.
Issue 36's goal on one H200 with cuDNN: the second run within 0.5x of the first's wall. The cache folder is
new for every invocation of this script (``--cache``, default a folder under ``--out``).

    python benchmarks/plan_cache_reuse.py -- graphs/perf --backend cudnn -i 100
    python benchmarks/plan_cache_reuse.py --out /tmp/pc -- graphs/ --backend reference   # the CPU path
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl

RUNS = (("first", []), ("second", []), ("no-cache", ["--no-plan-cache"]))


def sessions_by_source(record: dict[str, Any]) -> tuple[dict[str, int], list[str]]:
    """(how many graph sessions had their plan from where, the distinct notes of entries not used)."""
    sources: Counter[str] = Counter()
    notes: set[str] = set()
    for session in (record.get("sessions") or {}).values():
        for graph in (session.get("graphs") or {}).values():
            sources[str(graph.get("plan_source", "n/a"))] += 1
            if graph.get("plan_cache_note"):
                notes.add(str(graph["plan_cache_note"])[:160])
    return dict(sources), sorted(notes)


def run_one(label: str, flags: list[str], run_args: list[str], out: Path, cache: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "hipdnn_trace", "run", *run_args, "--plan-cache", str(cache), *flags,
            "--out", str(out), "--run-id", label, "-q"]
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    row: dict[str, Any] = {"run": label, "wall_s": time.perf_counter() - t0, "exit": done.returncode,
                           "tail": (done.stdout + done.stderr)[-600:]}
    folder = out / label
    if (folder / "breakdown.csv").exists():
        breakdown, summary = pl.read_csv(folder / "breakdown.csv"), pl.read_csv(folder / "summary.csv")
        record = json.loads((folder / "run.json").read_text())
        sources, notes = sessions_by_source(record)
        row.update(t_init_s=float(breakdown["t_init_ms"].sum()) / 1e3, plan_sources=sources, notes=notes,
                   verdicts={f"{g}|{c}": f"{s}/{v}" for g, c, s, v in
                             summary.select("graph", "config", "status", "validation").iter_rows()})
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("plan-cache-reuse"))
    parser.add_argument("--cache", type=Path, help="the cache folder (emptied first; default OUT/cache)")
    parser.add_argument("run_args", nargs=argparse.REMAINDER, help="-- then the arguments of hipdnn-trace run")
    args = parser.parse_args(argv)
    run_args = args.run_args[1:] if args.run_args[:1] == ["--"] else args.run_args
    cache = args.cache or args.out / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [run_one(label, flags, run_args, args.out, cache) for label, flags in RUNS]
    first = rows[0].get("verdicts")
    print(f"{'run':>9} {'exit':>4} {'wall s':>8} {'t_init s':>9} {'x first':>8}  same  plan sources")
    for row in rows:
        row["same_verdicts"] = row.get("verdicts") == first
        ratio = row["wall_s"] / rows[0]["wall_s"]
        print(f"{row['run']:>9} {row['exit']:>4} {row['wall_s']:>8.2f} {row.get('t_init_s', float('nan')):>9.2f} "
              f"{ratio:>8.3f}  {'yes' if row['same_verdicts'] else 'NO':>4}  {row.get('plan_sources')}")
        for note in row.get("notes", []):
            print(f"          note: {note}")
    (args.out / "plan_cache_reuse.json").write_text(json.dumps(rows, indent=1))
    return 0 if all(r["exit"] in (0, 2) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

"""A validated suite's pace: wall, per-stage breakdown, and how much of the wall the GPU does timed work.

Runs ``hipdnn-trace run SUITE`` once per (code tree, GPU setting) as a user would (a fresh process,
default validation), in the order given, and reads each run's ``breakdown.csv`` and ``summary.csv``:

* the wall of the whole command;
* the per-graph stages summed over the suite (process, load, inputs, reference, init, bind,
  warmup, timed, fetch, validate, write, other) and the host stages' share of the wall
  (inputs + reference + validate; on a GPU backend with the data on the device these mostly run
  on the GPU, so the share is an upper bound on the host's);
* the share of the wall in which the GPUs run timed work: sum of t_timed over graphs divided by
  wall x workers;
* whether every (graph, config) has the same status and validation verdict as the first run;
* with a one-worker and an all-GPU run of the same tree: each graph's wall under N workers against
  one (the contention check: within 10% is the goal) and the wall ratio.

Trees are folders holding a checkout (``before=/tmp/old``, ``after=.``); each runs with its own
package first on PYTHONPATH. Results go to ``throughput.json`` in $OUT (or ``--out``) as they finish.

    python benchmarks/suite_throughput.py --tree after=.@1,all --tree before=/tmp/base@1 \\
        -- graphs/perf --backend cudnn -i 100
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl

STAGES = ["t_process_ms", "t_load_ms", "t_inputs_ms", "t_reference_ms", "t_init_ms", "t_bind_ms", "t_warmup_ms",
          "t_timed_ms", "t_fetch_ms", "t_validate_ms", "t_queue_ms", "t_write_ms", "t_other_ms"]
HOST_STAGES = ["t_inputs_ms", "t_reference_ms", "t_validate_ms"]


def run_one(tree: Path, label: str, gpus: str, run_args: list[str], out: Path) -> dict[str, Any]:
    """One ``hipdnn-trace run`` of ``tree``'s code; its wall, stage sums, statuses and per-graph walls."""
    run_id = f"{label}-gpus{gpus}"
    argv = [sys.executable, "-m", "hipdnn_trace", "run", *run_args, "--out", str(out), "--run-id", run_id, "-q"]
    if gpus != "1":
        argv += ["--gpus", gpus]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    folder = out / run_id
    row: dict[str, Any] = {"tree": label, "gpus": gpus, "wall_s": wall, "exit": done.returncode,
                           "tail": (done.stdout + done.stderr)[-800:]}
    if not (folder / "breakdown.csv").exists():
        return row
    breakdown = pl.read_csv(folder / "breakdown.csv")
    summary = pl.read_csv(folder / "summary.csv")
    workers = len(json.loads((folder / "run.json").read_text()).get("gpus", {}).get("devices", [0]))
    sums = {c: float(breakdown[c].sum()) / 1e3 for c in STAGES if c in breakdown.columns}
    row.update({
        "workers": workers,
        "graphs": breakdown.height,
        "stages_s": sums,
        "per_graph_wall_s": float(breakdown["wall_ms"].sum()) / 1e3,
        "host_share_of_wall": sum(sums.get(c, 0.0) for c in HOST_STAGES) / (wall * workers),
        "gpu_timed_share": sums.get("t_timed_ms", 0.0) / (wall * workers),
        "verdicts": {f"{r['graph']}|{r['config']}": f"{r['status']}/{r.get('validation')}"
                     for r in summary.iter_rows(named=True)},
        "graph_wall_ms": {f"{r['graph']}|{r['config']}": r["wall_ms"] for r in breakdown.iter_rows(named=True)},
        # what the graph cost its worker: the wall less the wait for the one writer (--gpus only)
        "graph_own_ms": {f"{r['graph']}|{r['config']}": r["wall_ms"] - (r.get("t_queue_ms") or 0.0)
                         for r in breakdown.iter_rows(named=True)},
    })
    return row


def _ratios(one: dict[str, Any], many: dict[str, Any], key: str) -> list[float]:
    return sorted(many[key][k] / one[key][k] for k in many.get(key, {}) if k in one.get(key, {}) and one[key][k] > 0)


def contention(one: dict[str, Any], many: dict[str, Any]) -> dict[str, Any]:
    """Each graph's wall under N workers against one: median and worst ratio, share within 10%; the
    same for what each graph cost its worker (its wall less the wait for the run's one writer)."""
    ratios = _ratios(one, many, "graph_wall_ms")
    if not ratios:
        return {}
    own = _ratios(one, many, "graph_own_ms") or ratios
    return {"wall_ratio": many["wall_s"] / one["wall_s"], "graph_ratio_median": ratios[len(ratios) // 2],
            "graph_ratio_max": ratios[-1], "within_10pct": sum(r <= 1.10 for r in ratios) / len(ratios),
            "own_ratio_median": own[len(own) // 2], "own_ratio_max": own[-1],
            "own_within_10pct": sum(r <= 1.10 for r in own) / len(own)}


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'tree':>10} {'gpus':>5} {'wall s':>8} {'inputs':>8} {'ref':>8} {'valid':>8} {'init+':>8} "
          f"{'timed':>7} {'host%':>6} {'gpu%':>6} {'same':>5}")
    first = next((r for r in rows if "verdicts" in r), None)
    for r in rows:
        if "stages_s" not in r:
            print(f"{r['tree']:>10} {r['gpus']:>5} {r['wall_s']:8.1f}  no run folder (exit {r['exit']}): "
                  f"{r['tail'][-200:]}")
            continue
        s = r["stages_s"]
        init = s.get("t_init_ms", 0) + s.get("t_bind_ms", 0) + s.get("t_other_ms", 0)
        same = "yes" if first is not None and r["verdicts"] == first["verdicts"] else "NO"
        print(f"{r['tree']:>10} {r['gpus']:>5} {r['wall_s']:8.1f} {s.get('t_inputs_ms', 0):8.1f} "
              f"{s.get('t_reference_ms', 0):8.1f} {s.get('t_validate_ms', 0):8.1f} {init:8.1f} "
              f"{s.get('t_timed_ms', 0) + s.get('t_warmup_ms', 0):7.1f} {100 * r['host_share_of_wall']:5.1f}% "
              f"{100 * r['gpu_timed_share']:5.2f}% {same:>5}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", action="append", required=True,
                        help="LABEL=FOLDER[@GPUS,...] of a checkout (repeat); @ gives this tree its own --gpus list")
    parser.add_argument("--gpus", action="append", default=None, help="1 or a --gpus value (repeat; default 1)")
    parser.add_argument("--out", default=os.environ.get("OUT") or "throughput-runs")
    parser.add_argument("run_args", nargs=argparse.REMAINDER, help="-- then the arguments of hipdnn-trace run")
    args = parser.parse_args()
    run_args = [a for a in args.run_args if a != "--"]
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for spec in args.tree:
        label, _, folder = spec.partition("=")
        folder, _, only = folder.partition("@")     # LABEL=FOLDER@1,all: this tree's own GPU settings
        for gpus in (only.split(",") if only else args.gpus or ["1"]):
            rows.append(run_one(Path(folder).resolve(), label, gpus, run_args, out / "runs"))
            (out / "throughput.json").write_text(json.dumps(rows, indent=1, default=str))
            print_table(rows[-1:])
    print()
    print_table(rows)
    by = {(r["tree"], r["gpus"]): r for r in rows if "graph_wall_ms" in r}
    for (tree, gpus), r in by.items():
        if gpus != "1" and (tree, "1") in by:
            c = contention(by[(tree, "1")], r)
            r["contention"] = c
            print(f"{tree}: --gpus {gpus} against one GPU: wall x{c.get('wall_ratio', float('nan')):.3f}, "
                  f"per-graph wall median x{c.get('graph_ratio_median', float('nan')):.3f}, "
                  f"max x{c.get('graph_ratio_max', float('nan')):.3f}, "
                  f"within 10%: {100 * c.get('within_10pct', 0):.0f}%; less the writer wait: "
                  f"median x{c.get('own_ratio_median', float('nan')):.3f}, "
                  f"within 10%: {100 * c.get('own_within_10pct', 0):.0f}%")
    trees = [t for t in dict.fromkeys(r["tree"] for r in rows)]
    if len(trees) > 1 and (trees[0], "1") in by and (trees[-1], "1") in by:
        print(f"one GPU: {trees[-1]} wall / {trees[0]} wall = "
              f"{by[(trees[-1], '1')]['wall_s'] / by[(trees[0], '1')]['wall_s']:.3f}")
    (out / "throughput.json").write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

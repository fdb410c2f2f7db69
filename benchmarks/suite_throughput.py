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
* where each command's wall went outside the graphs (run.json ``phases_s``: before the plan, plan,
  set-up, graphs, close, and what is left: the final writes and the interpreter's exit);
* with a one-worker and an all-GPU run of the same tree: each graph's wall under N workers against
  one (the contention check: within 10% is the goal) and the wall ratio. A graph's ``wall_ms`` is its
  own work plus its share of the commit that wrote it (docs/frames.md); "own" leaves the share out.
  With ``--repeat N`` every setting runs N times, interleaved (round 1 of every setting, then round
  2, ...), each graph's wall is its median over the rounds, and the baseline's rounds against each
  other (an A/A) show how far one graph's wall moves by itself.

On a fresh machine, start with a throwaway run of the same suite (``--throwaway``: the first setting once,
recorded nowhere): the first run of a graph pays the CUDA driver's JIT cache for cuDNN's runtime-compiled
kernels (cuDNN's init 2-3x its later cost on an H200), which would bias whichever setting runs first.

Trees are folders holding a checkout (``before=/tmp/old``, ``after=.``); each runs with its own
package first on PYTHONPATH. Results go to ``throughput.json`` in $OUT (or ``--out``) as they finish.

    python benchmarks/suite_throughput.py --tree after=.@1,all --tree before=/tmp/base@1 \\
        -- graphs/perf --backend cudnn -i 100
    python benchmarks/suite_throughput.py --repeat 3 --baseline 0 --tree after=.@0,0,1 \\
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

STAGES = ["t_process_ms", "t_release_ms", "t_load_ms", "t_inputs_ms", "t_reference_ms", "t_init_ms", "t_bind_ms",
          "t_warmup_ms", "t_timed_ms", "t_fetch_ms", "t_kernel_clock_ms", "t_side_ms", "t_close_ms", "t_validate_ms",
          "t_queue_ms", "t_write_ms", "t_other_ms"]
HOST_STAGES = ["t_inputs_ms", "t_reference_ms", "t_validate_ms"]


def run_one(tree: Path, label: str, gpus: str, run_args: list[str], out: Path, round_: int = 0) -> dict[str, Any]:
    """One ``hipdnn-trace run`` of ``tree``'s code; its wall, stage sums, statuses and per-graph walls."""
    run_id = f"{label}-gpus{gpus.replace(',', '+')}" + (f"-r{round_}" if round_ else "")
    argv = [sys.executable, "-m", "hipdnn_trace", "run", *run_args, "--out", str(out), "--run-id", run_id, "-q"]
    if gpus != "1":
        argv += ["--gpus", gpus]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    folder = out / run_id
    row: dict[str, Any] = {"tree": label, "gpus": gpus, "round": round_, "wall_s": wall, "exit": done.returncode,
                           "tail": (done.stdout + done.stderr)[-800:], "folder": str(folder)}
    if not (folder / "breakdown.csv").exists():
        return row
    breakdown = pl.read_csv(folder / "breakdown.csv")
    summary = pl.read_csv(folder / "summary.csv")
    record = json.loads((folder / "run.json").read_text())
    workers = len((record.get("gpus") or {}).get("devices", [0]))
    phases = record.get("phases_s") or {}
    if phases:   # what the run's own phases leave of the command: writing the final tables, exiting
        phases = {**phases, "after_close": max(0.0, wall - sum(phases.values()))}
    sums = {c: float(breakdown[c].sum()) / 1e3 for c in STAGES if c in breakdown.columns}
    row.update({
        "workers": workers,
        "graphs": breakdown.height,
        "phases_s": phases,
        "set_up_s": (record.get("gpus") or {}).get("warm_up_s") or (record.get("isolation") or {}).get("warm_up_s"),
        "successor_set_up_s": ((record.get("gpus") or {}).get("successor_warm_up_s")
                               or (record.get("isolation") or {}).get("successor_warm_up_s")),
        "stages_s": sums,
        "per_graph_wall_s": float(breakdown["wall_ms"].sum()) / 1e3,
        "host_share_of_wall": sum(sums.get(c, 0.0) for c in HOST_STAGES) / (wall * workers),
        "gpu_timed_share": sums.get("t_timed_ms", 0.0) / (wall * workers),
        "verdicts": {f"{r['graph']}|{r['config']}": f"{r['status']}/{r.get('validation')}"
                     for r in summary.iter_rows(named=True)},
        "graph_wall_ms": {f"{r['graph']}|{r['config']}": r["wall_ms"] for r in breakdown.iter_rows(named=True)},
        # what the graph cost its worker: the wall less its share of the writer's commit
        "graph_own_ms": {f"{r['graph']}|{r['config']}": r["wall_ms"] - (r.get("t_write_ms") or 0.0)
                         for r in breakdown.iter_rows(named=True)},
    })
    return row


def _ratios(one: dict[str, Any], many: dict[str, Any], key: str) -> list[float]:
    return sorted(many[key][k] / one[key][k] for k in many.get(key, {}) if k in one.get(key, {}) and one[key][k] > 0)


def contention(one: dict[str, Any], many: dict[str, Any]) -> dict[str, Any]:
    """Each graph's wall under N workers against one: median and worst ratio, the share within 10%
    (not slower by more than 10%, and |ratio - 1| <= 10%); the same for each graph's own work."""
    ratios = _ratios(one, many, "graph_wall_ms")
    if not ratios:
        return {}
    own = _ratios(one, many, "graph_own_ms") or ratios
    return {"wall_ratio": many["wall_s"] / one["wall_s"], "graph_ratio_median": ratios[len(ratios) // 2],
            "graph_ratio_max": ratios[-1], "graph_ratio_min": ratios[0],
            "within_10pct": sum(r <= 1.10 for r in ratios) / len(ratios),
            "both_ways_10pct": sum(abs(r - 1) <= 0.10 for r in ratios) / len(ratios),
            "own_ratio_median": own[len(own) // 2], "own_ratio_max": own[-1],
            "own_within_10pct": sum(r <= 1.10 for r in own) / len(own),
            "outside_10pct": _slower(one["graph_wall_ms"], many["graph_wall_ms"], 1.10)}


def _slower(one: dict[str, float], many: dict[str, float], limit: float) -> dict[str, float]:
    """graph -> ratio, for the graphs whose wall under ``many`` is over ``limit`` times that under ``one``."""
    ratios = {k: many[k] / one[k] for k in many if one.get(k, 0) > 0}
    return {k: round(r, 3) for k, r in ratios.items() if r > limit}


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def combined(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """A setting's rounds as one: the median wall, and each graph's median wall and own work."""
    out: dict[str, Any] = {"wall_s": _median([r["wall_s"] for r in rounds]), "rounds": len(rounds)}
    for key in ("graph_wall_ms", "graph_own_ms"):
        graphs = set.intersection(*(set(r[key]) for r in rounds))
        out[key] = {g: _median([r[key][g] for r in rounds]) for g in graphs}
    return out


def matched_halves(grouped: dict[tuple[str, str], list[dict[str, Any]]], baseline: str) -> dict[str, Any]:
    """With 4+ rounds: like against like. Each graph's median over the odd rounds of the baseline against
    (a) its median over the even rounds of the baseline (the A/A: the measure's own spread) and (b) its
    median over the even rounds of each other setting; (a) and (b) compare medians of as many rounds,
    interleaved in time, so the share of graphs within 10% reads the same way in both."""
    report: dict[str, Any] = {}
    for (tree, gpus), rounds in grouped.items():
        base = grouped.get((tree, baseline), [])
        if gpus == baseline or len(base) < 4 or len(rounds) < 4:
            continue
        odd, aa, many = combined(base[1::2]), combined(base[0::2]), combined(rounds[0::2])
        for label, other in ((f"{tree} {baseline} A/A halves", aa), (f"{tree} {gpus} vs {baseline} halves", many)):
            c = contention(odd, other)
            report[label] = c
            _print_contention(tree, label.split()[1], f"{baseline} odd rounds ({label})", c)
    return report


def _print_contention(tree: str, gpus: str, baseline: str, c: dict[str, Any]) -> None:
    nan = float("nan")
    print(f"{tree}: --gpus {gpus} against {baseline}: wall x{c.get('wall_ratio', nan):.3f}, "
          f"per-graph wall median x{c.get('graph_ratio_median', nan):.3f}, "
          f"min x{c.get('graph_ratio_min', nan):.3f}, max x{c.get('graph_ratio_max', nan):.3f}, "
          f"not slower by >10%: {100 * c.get('within_10pct', 0):.0f}%, within +-10%: "
          f"{100 * c.get('both_ways_10pct', 0):.0f}%; own work (no write share): "
          f"median x{c.get('own_ratio_median', nan):.3f}, "
          f"not slower by >10%: {100 * c.get('own_within_10pct', 0):.0f}%")
    for graph, ratio in sorted(c.get("outside_10pct", {}).items(), key=lambda kv: -kv[1])[:10]:
        print(f"    x{ratio:.3f}  {graph}")


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


PHASES = ["before_plan", "plan", "set_up", "graphs", "close", "after_close"]


def print_phases(rows: list[dict[str, Any]]) -> None:
    """Where each command's wall went (run.json phases_s; after_close: the final writes and exit)."""
    print(f"{'tree':>10} {'gpus':>5} {'wall s':>8} " + " ".join(f"{p:>11}" for p in PHASES))
    for r in rows:
        phases = r.get("phases_s") or {}
        if phases:
            print(f"{r['tree']:>10} {r['gpus']:>5} {r['wall_s']:8.1f} "
                  + " ".join(f"{phases.get(p, float('nan')):11.2f}" for p in PHASES))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", action="append", required=True,
                        help="LABEL=FOLDER[@GPUS,...] of a checkout (repeat); @ gives this tree its own --gpus list")
    parser.add_argument("--gpus", action="append", default=None, help="1 or a --gpus value (repeat; default 1)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every setting, interleaved (default 1)")
    parser.add_argument("--baseline", default="1", help="the one-GPU setting the others are compared with "
                        "(default 1: no --gpus; 0: one --gpus worker, the same machinery as --gpus all)")
    parser.add_argument("--throwaway", action="store_true",
                        help="first run the first setting once and discard it (page cache, the driver's JIT cache)")
    parser.add_argument("--out", default=os.environ.get("OUT") or "throughput-runs")
    parser.add_argument("run_args", nargs=argparse.REMAINDER, help="-- then the arguments of hipdnn-trace run")
    args = parser.parse_args()
    run_args = [a for a in args.run_args if a != "--"]
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    settings: list[tuple[str, Path, str]] = []
    for spec in args.tree:
        label, _, folder = spec.partition("=")
        folder, _, only = folder.partition("@")     # LABEL=FOLDER@1,all: this tree's own GPU settings
        settings += [(label, Path(folder).resolve(), g) for g in (only.split(",") if only else args.gpus or ["1"])]
    rows: list[dict[str, Any]] = []
    if args.throwaway and settings:
        label, folder, gpus = settings[0]
        warm = run_one(folder, f"throwaway-{label}", gpus, run_args, out / "runs")
        print(f"throwaway run ({label}, gpus {gpus}): {warm['wall_s']:.1f} s, not counted")
    for round_ in range(args.repeat):
        for label, folder, gpus in settings:
            rows.append(run_one(folder, label, gpus, run_args, out / "runs", round_))
            (out / "throughput.json").write_text(json.dumps(rows, indent=1, default=str))
            print_table(rows[-1:])
    print()
    print_table(rows)
    print()
    print_phases(rows)
    report = summarize(rows, args.baseline)
    (out / "throughput.json").write_text(json.dumps({"runs": rows, "summary": report}, indent=1, default=str))
    return 0


def summarize(rows: list[dict[str, Any]], baseline: str) -> dict[str, Any]:
    """Per (tree, setting) the rounds combined; each setting against the tree's baseline; the baseline's
    first two rounds against each other (the measure's own spread); one GPU of the last tree vs the first."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if "graph_wall_ms" in r:
            grouped.setdefault((r["tree"], r["gpus"]), []).append(r)
    by = {key: combined(rounds) for key, rounds in grouped.items()}
    report: dict[str, Any] = {}
    for (tree, gpus), r in by.items():
        if gpus != baseline and (tree, baseline) in by:
            c = contention(by[(tree, baseline)], r)
            report[f"{tree} {gpus} vs {baseline}"] = c
            _print_contention(tree, gpus, f"{baseline} (median of {r['rounds']} rounds)", c)
    for (tree, gpus), rounds in grouped.items():
        if gpus == baseline and len(rounds) >= 2:
            c = contention(rounds[0], rounds[1])
            report[f"{tree} {gpus} A/A"] = c
            _print_contention(tree, gpus, f"{baseline} itself (round 2 against round 1: the spread)", c)
    report.update(matched_halves(grouped, baseline))
    trees = list(dict.fromkeys(tree for tree, _ in by))
    if len(trees) > 1 and (trees[0], baseline) in by and (trees[-1], baseline) in by:
        ratio = by[(trees[-1], baseline)]["wall_s"] / by[(trees[0], baseline)]["wall_s"]
        report["one_gpu_ratio"] = ratio
        print(f"one GPU: {trees[-1]} wall / {trees[0]} wall = {ratio:.3f}")
    return report


if __name__ == "__main__":
    sys.exit(main())

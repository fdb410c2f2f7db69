"""A suite's first run on a cold machine against the warm run after it, per code tree and run variant.

"Cold" is what a fresh machine has: an empty CUDA driver JIT cache (where cuDNN's runtime-compiled kernels go;
each cold run gets a new ``CUDA_CACHE_PATH``) and an empty plan cache (``--plan-cache``, a new folder). The
warm run right after it reuses both. For every round, tree and variant (extra ``run`` flags, e.g.
``--build-workers 0``) this runs cold then warm, each as a user runs it (``benchmarks/suite_throughput.py``
``run_one``: a fresh process, the tree's package first on PYTHONPATH), and reports the command's wall, its
``phases_s``, the per-graph stage sums of breakdown.csv, run.json's ``plan_builders``, where each session's
plan came from, and whether every (graph, config) has the first run's status and verdict. Issue 36 asks,
on one GPU: cold within 1.3x of warm, and a second run with the plan cache at most 0.5x of a first without
builders.

Python's bytecode must already be compiled for every tree (the device's ``PYTHONDONTWRITEBYTECODE=1`` made
every process compile its imports; docs/benchmarks.md, seventh session): compile it first, else the first run
pays for it.

    python benchmarks/cold_warm.py --tree after=. --tree before=/tmp/base \\
        --variant builders= --variant serial=--build-workers,0 -- graphs/perf --backend cudnn -i 100
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _sibling(name: str) -> Any:
    """Another script of benchmarks/ as a module (they are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pair(measure: Any, reuse: Any, tree: Path, label: str, flags: list[str], run_args: list[str], out: Path,
         round_: int) -> list[dict[str, Any]]:
    """Cold then warm for one tree and variant; the two rows."""
    jit = Path(tempfile.mkdtemp(prefix="jit-", dir=out))
    plans = Path(tempfile.mkdtemp(prefix="plans-", dir=out))
    os.environ["CUDA_CACHE_PATH"] = str(jit)
    rows = []
    for state in ("cold", "warm"):
        row = measure.run_one(tree, f"{label}-{state}", "1", [*run_args, "--plan-cache", str(plans), *flags], out,
                              round_)
        record_path = Path(row["folder"]) / "run.json"
        record = json.loads(record_path.read_text()) if record_path.is_file() else {}
        row.update(state=state, variant=label, flags=flags, plan_sources=reuse.sessions_by_source(record)[0],
                   plan_builders=record.get("plan_builders"))
        row.pop("graph_wall_ms", None)
        row.pop("graph_own_ms", None)
        rows.append(row)
        print(f"{label:>24} {state:>4} r{round_} exit {row['exit']} wall {row['wall_s']:7.2f} s  "
              f"phases {row.get('phases_s')}  plans {row['plan_sources']}  builders {row['plan_builders']}",
              flush=True)
    shutil.rmtree(jit, ignore_errors=True)
    shutil.rmtree(plans, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH of a checkout (repeat)")
    parser.add_argument("--variant", action="append", default=None,
                        help="NAME=FLAG,FLAG... extra run flags (repeat; default one variant with none)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of every tree and variant, interleaved")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "cold-warm"))
    parser.add_argument("run_args", nargs=argparse.REMAINDER, help="-- then the arguments of hipdnn-trace run")
    args = parser.parse_args(argv)
    run_args = args.run_args[1:] if args.run_args[:1] == ["--"] else args.run_args
    trees = [(name, Path(path).resolve()) for name, path in (t.split("=", 1) for t in args.tree)]
    variants = [(name, [f for f in flags.split(",") if f]) for name, flags in
                (v.split("=", 1) for v in (args.variant or ["default="]))]
    args.out.mkdir(parents=True, exist_ok=True)
    measure, reuse = _sibling("suite_throughput"), _sibling("plan_cache_reuse")
    rows: list[dict[str, Any]] = []
    for round_ in range(1, args.rounds + 1):
        for tree_name, tree in trees:
            for variant, flags in variants:
                rows.extend(pair(measure, reuse, tree, f"{tree_name}-{variant}", flags, run_args, args.out, round_))
                (args.out / "cold_warm.json").write_text(json.dumps(rows, indent=1))
    first = rows[0].get("verdicts")
    print(f"\n{'variant':>24} {'round':>5} {'cold s':>8} {'warm s':>8} {'cold/warm':>9} {'warm/cold':>9}  "
          "same verdicts")
    for cold, warm in zip(rows[::2], rows[1::2]):
        same = cold.get("verdicts") == first and warm.get("verdicts") == first
        print(f"{cold['variant']:>24} {cold['round']:>5} {cold['wall_s']:>8.2f} {warm['wall_s']:>8.2f} "
              f"{cold['wall_s'] / warm['wall_s']:>9.3f} {warm['wall_s'] / cold['wall_s']:>9.3f}  "
              f"{'yes' if same else 'NO'}")
    return 0 if all(r["exit"] in (0, 2) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

"""The float64 reference on the GPU against the CPU's, on every bundled graph: error and time.

For each bundled graph: the largest relative difference of any produced tensor between the CPU
(numpy) and GPU (torch float64) references (goal <= 1e-12, issue 17), whether the non-finite
values agree, how many stored (rounded) bytes differ, and CPU vs GPU seconds.

The CPU references of the largest graphs take minutes each and most of their time is in
single-threaded numpy element-wise work, so they run in parallel worker processes (a few BLAS
threads each), admitted while the sum of their memory estimates
(``backends/reference/memory.needed_memory_bytes``, times two for the GPU result brought back
beside the CPU one) fits in the memory budget; the GPU step of each worker runs under one lock so
the device holds one float64 evaluation at a time. Needs torch with CUDA (not a project
dependency). Writes ``devcheck.json`` into $OUT (or the working folder); rows are written as
they finish, so a run cut short keeps what it compared.

    python benchmarks/reference_device.py [--budget S] [--largest N] [--workers W] [--memory-gib G]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOAL = 1e-12

_gpu_lock: Any = None


def _init(lock: Any) -> None:
    global _gpu_lock
    _gpu_lock = lock
    sys.path.insert(0, str(ROOT))


def _compare(a: Any, b: Any) -> tuple[float, bool, int]:
    """(worst relative difference, non-finite values identical, stored bytes differing)."""
    import numpy as np

    rel, nonfinite_same, stored_diff = 0.0, True, 0
    for uid, x in a.exact.items():
        y = b.exact[uid]
        finite = np.isfinite(x)
        nonfinite_same &= bool(np.array_equal(np.isfinite(y), finite)
                               and np.array_equal(x[~finite], y[~finite], equal_nan=True))
        scale = max(float(np.abs(x[finite]).max(initial=0)), 1e-300)
        rel = max(rel, float(np.abs(x[finite] - y[finite]).max(initial=0)) / scale)
        stored_diff += int(np.count_nonzero(a.stored[uid].view(np.uint8) != b.stored[uid].view(np.uint8)))
    return rel, nonfinite_same, stored_diff


def check_one(relative: str, device: str) -> dict[str, Any]:
    """CPU and ``device`` reference of one graph (in a worker process), compared."""
    from hipdnn_trace.backends.reference import executor
    from hipdnn_trace.bench.inputs import make_inputs
    from hipdnn_trace.graph.load import load_bytes

    path = ROOT / relative
    graph = load_bytes(path.read_bytes(), str(path))
    inputs = make_inputs(graph, 0)
    t0 = time.perf_counter()
    cpu = executor.evaluate(graph, inputs)
    t_cpu = time.perf_counter() - t0
    with _gpu_lock:
        try:
            t0 = time.perf_counter()
            gpu = executor.evaluate(graph, inputs, device=device)
            t_gpu = time.perf_counter() - t0   # results are numpy arrays: the device work has finished
        finally:
            if device == "cuda":
                import torch

                torch.cuda.empty_cache()
    rel, nonfinite_same, stored_diff = _compare(cpu, gpu)
    return {"graph": relative, "rel": rel, "nonfinite_same": nonfinite_same, "stored_bytes_differing": stored_diff,
            "t_cpu_s": round(t_cpu, 3), "t_gpu_s": round(t_gpu, 3), "placement": sorted(set(gpu.placement.values()))}


def _catalogue() -> list[dict[str, Any]]:
    """Every bundled graph with its FLOPs, memory estimate and refusal (smallest FLOPs first)."""
    from hipdnn_trace.backends.reference import executor
    from hipdnn_trace.backends.reference.memory import memory_refusal, needed_memory_bytes
    from hipdnn_trace.graph.load import load_bytes
    from hipdnn_trace.graph.ops import graph_flops

    items = []
    for path in sorted((ROOT / "graphs").rglob("*.json")):
        try:
            graph = load_bytes(path.read_bytes(), str(path))
        except Exception:   # not a graph (e.g. a manifest)
            continue
        skip = executor.check(graph) or memory_refusal(graph)
        if not skip and not any(node.type in executor.DEVICE_OPS for node in graph.nodes):
            skip = "no node runs on the device: --reference-device cuda runs the CPU code for it"
        items.append({"graph": str(path.relative_to(ROOT)), "flops": graph_flops(graph),
                      "memory": 2 * needed_memory_bytes(graph), "skip": skip})
    return sorted(items, key=lambda item: item["flops"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=540.0, help="stop admitting graphs after this many seconds")
    parser.add_argument("--largest", type=int, default=0, help="only the N largest graphs by FLOPs (0: all)")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    parser.add_argument("--device", default="cuda", help="the reference device compared with the CPU "
                        "(cpu: a dry run of this script without a GPU)")
    parser.add_argument("--threads", type=int, default=2, help="BLAS threads per worker")
    parser.add_argument("--memory-gib", type=float, default=0.0,
                        help="memory the workers' estimates may sum to (default: 70%% of available)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from hipdnn_trace.backends.reference.memory import available_memory_bytes

    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(args.threads)   # inherited by the spawned workers
    budget_bytes = int(args.memory_gib * 2**30) if args.memory_gib else int(0.7 * (available_memory_bytes() or 0))
    items = _catalogue()
    if args.largest:
        items = items[-args.largest:]
    queue = [i for i in reversed(items) if not i["skip"]]   # largest first: the long ones start early
    rows: list[dict[str, Any]] = [dict(i) for i in items if i["skip"]]
    out = Path(os.environ.get("OUT", ".")) / "devcheck.json"
    start = time.time()
    running: dict[Future, dict[str, Any]] = {}
    context = mp.get_context("spawn")
    with ProcessPoolExecutor(args.workers, mp_context=context, initializer=_init,
                             initargs=(context.Lock(),)) as pool:
        while queue or running:
            in_use = sum(i["memory"] for i in running.values())
            admitted = True
            while admitted and queue and len(running) < args.workers and time.time() - start < args.budget:
                admitted = False
                for item in queue:
                    if not running or in_use + item["memory"] <= budget_bytes:
                        queue.remove(item)
                        running[pool.submit(check_one, item["graph"], args.device)] = item
                        in_use += item["memory"]
                        admitted = True
                        break
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                item = running.pop(future)
                try:
                    row = {**future.result(), "flops": item["flops"]}
                except Exception as exc:   # one graph's failure is its row
                    row = {"graph": item["graph"], "error": f"{type(exc).__name__}: {exc}"[:300]}
                rows.append(row)
                print(json.dumps(row), flush=True)
                out.write_text(json.dumps({"rows": rows}, indent=1))
        rows.extend({**i, "skip": "time budget"} for i in queue)
    compared = [r for r in rows if "rel" in r]
    host_only = [r["graph"] for r in rows if str(r.get("skip", "")).startswith("no node runs")]
    if args.device == "cuda":
        import torch

        device = f"{torch.cuda.get_device_name()}, torch {torch.__version__}"
    else:
        device = args.device
    summary = {"compared": len(compared), "of": len(items),
               "worst_rel": max((r["rel"] for r in compared), default=None),
               f"over_{GOAL:g}": [r["graph"] for r in compared if r["rel"] > GOAL],
               "nonfinite_mismatch": [r["graph"] for r in compared if not r["nonfinite_same"]],
               "errors": [r for r in rows if "error" in r], "host_only": host_only,
               "skipped": [r["graph"] for r in rows if "skip" in r and r["graph"] not in host_only],
               "wall_s": round(time.time() - start, 1), "workers": args.workers, "threads": args.threads,
               "device": device}
    out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    print(json.dumps({k: len(v) if k in ("skipped", "host_only") else v for k, v in summary.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

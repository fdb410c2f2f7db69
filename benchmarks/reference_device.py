"""The float64 reference on the GPU against the CPU's, on every bundled graph: error and time.

For each bundled graph the CPU reference computes (smallest FLOPs first, until a wall-time budget
is spent): the largest relative difference of any produced tensor (goal <= 1e-12), whether the
non-finite values agree, how many stored (rounded) bytes differ, and CPU vs GPU seconds. Needs
torch with CUDA (not a project dependency). Writes devcheck.json into $OUT (or here).

    python benchmarks/reference_device.py [BUDGET_S]
"""
import json, os, sys, time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # run from a checkout
from hipdnn_trace.backends.reference import executor
from hipdnn_trace.backends.reference.memory import memory_refusal
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.ops import graph_flops
import torch

budget = float(sys.argv[1]) if len(sys.argv) > 1 else 450.0
start = time.time()
items = []
for path in sorted((ROOT / "graphs").rglob("*.json")):
    try:
        g = load_bytes(path.read_bytes(), str(path))
    except Exception:
        continue
    why = executor.check(g) or memory_refusal(g)
    items.append((graph_flops(g), str(path.relative_to(ROOT)), g, why))
items.sort(key=lambda t: t[0])
rows, worst = [], 0.0
for flops, name, g, why in items:
    if why:
        rows.append({"graph": name, "skip": why}); continue
    if time.time() - start > budget:
        rows.append({"graph": name, "skip": "time budget", "flops": flops}); continue
    ins = make_inputs(g, 0)
    t0 = time.perf_counter(); a = executor.evaluate(g, ins); t_cpu = time.perf_counter() - t0
    try:
        t0 = time.perf_counter(); b = executor.evaluate(g, ins, device="cuda"); torch.cuda.synchronize(); t_gpu = time.perf_counter() - t0
    except Exception as e:
        rows.append({"graph": name, "error": f"{type(e).__name__}: {e}"[:300]}); print(name, "ERROR", e, flush=True); continue
    rel, stored_diff, nonfinite_ok = 0.0, 0, True
    for u in a.exact:
        x, y = a.exact[u], b.exact[u]
        fin = np.isfinite(x)
        nonfinite_ok &= bool(np.array_equal(np.isfinite(y), fin) and np.array_equal(x[~fin], y[~fin], equal_nan=True))
        d = float(np.abs(x[fin] - y[fin]).max(initial=0)) / max(float(np.abs(x[fin]).max(initial=0)), 1e-300)
        rel = max(rel, d)
        stored_diff += int(np.count_nonzero(a.stored[u].view(np.uint8) != b.stored[u].view(np.uint8)))
    worst = max(worst, rel)
    where = sorted(set(b.placement.values()))
    rows.append({"graph": name, "flops": flops, "rel": rel, "nonfinite_same": nonfinite_ok, "stored_bytes_differing": stored_diff,
                 "t_cpu_s": round(t_cpu, 4), "t_gpu_s": round(t_gpu, 4), "placement": where})
    print(f"{name} rel={rel:.2e} cpu={t_cpu:.3f}s gpu={t_gpu:.3f}s {where}", flush=True)
ok = [r for r in rows if "rel" in r]
summary = {"compared": len(ok), "worst_rel": worst, "over_1e-12": [r["graph"] for r in ok if r["rel"] > 1e-12],
           "nonfinite_mismatch": [r["graph"] for r in ok if not r["nonfinite_same"]],
           "errors": [r for r in rows if "error" in r], "skipped": len([r for r in rows if "skip" in r]),
           "device": torch.cuda.get_device_name(), "torch": torch.__version__}
print(json.dumps(summary, indent=1))
Path(os.environ.get("OUT", "."), "devcheck.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))

"""Peak memory of the float64 reference against its estimate, per attention graph.

For each graph (default: every attention graph under graphs/perf), a fresh child process loads
it, makes its inputs (``bench/inputs.py``, as ``run`` does), resets its peak RSS
(``/proc/self/clear_refs`` = 5) and evaluates the graph once on the float64 reference
(``executor.evaluate``); the peak it reports is VmHWM less the resident set before the
evaluation (the inputs in their own types, the interpreter, numpy). The estimate is
``needed_memory_bytes`` (``backends/reference/memory.py``), which ``run`` and ``inspect`` refuse
with; ``ratio`` = estimate / peak must lie in [1, 1.5]. ``maxrss`` is the child's whole
high-water mark (``ru_maxrss``: imports, inputs and the evaluation).

    python benchmarks/reference_memory.py [GRAPH_OR_DIR ...] [--budget-mib N] [--timeout S]
    python benchmarks/reference_memory.py --write-paged-prefill /tmp/paged_prefill.json

``--write-paged-prefill`` writes, with graphs/generate.py's ``sdpa`` recipe, the shape of upstream
dnn-benchmarking's ``common_llm_workloads/paged_kv_vllm_prefill_bf16_b4_s4096_d128_gqa4_block16.json``
(GQA, B 4, Hq 32, Hkv 8, S 4096, d 128, causal, bf16, paged K/V in pages of 16 tokens, 1024 pages).
The child warms BLAS (one small product) before the peak is reset: its per-thread buffers are the
process's, not the graph's.

``--budget-mib`` sets the tile budget (``ops/sdpa.py`` ``SCORE_BLOCK_BYTES``) in the child and for
the estimate. Prints a Markdown table (docs/benchmarks.md keeps one).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))   # run from a checkout

CHILD = r"""
import gc, resource, sys, time
sys.path.insert(0, sys.argv[1])
from hipdnn_trace.backends.reference.ops import sdpa
if int(sys.argv[3]):
    sdpa.SCORE_BLOCK_BYTES = int(sys.argv[3])
from hipdnn_trace.backends.reference import executor, needed_memory_bytes
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.graph.load import load_file

def status(field):
    return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(field + ":"))

import numpy as np
graph = load_file(sys.argv[2])
inputs = make_inputs(graph, 0)
np.ones((64, 64)) @ np.ones((64, 64)); np.einsum("grc,grd->cd", np.ones((2, 8, 8)), np.ones((2, 8, 8)))
gc.collect()
base = status("VmRSS")
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")
t0 = time.perf_counter()
result = executor.evaluate(graph, inputs)
seconds = time.perf_counter() - t0
peak = status("VmHWM") - base
print(peak, needed_memory_bytes(graph), seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def attention_graphs(paths: list[str]) -> list[Path]:
    """Graph files under ``paths`` with an Sdpa or SdpaBackward node."""
    files: list[Path] = []
    for p in map(Path, paths):
        files += sorted(p.rglob("*.json")) if p.is_dir() else [p]
    return [f for f in files if any(n.get("type", "").startswith("Sdpa")
                                    for n in json.loads(f.read_text()).get("nodes", []))]


def measure(path: Path, budget: int, timeout: float) -> dict[str, float] | str:
    """One graph in a fresh child: peak beyond the inputs, estimate, seconds, whole max RSS; or why not."""
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, str(REPO), str(path), str(budget)], capture_output=True,
                             text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return f"over {timeout:g} s"
    if out.returncode:
        return (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]
    peak, estimate, seconds, maxrss = (float(x) for x in out.stdout.split())
    return {"peak": peak, "estimate": estimate, "seconds": seconds, "maxrss": maxrss}


def write_paged_prefill(path: Path) -> None:
    """The upstream vLLM paged prefill's shape, built with graphs/generate.py's recipe."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("generate", REPO / "graphs/generate.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    b = gen._b("vllm_paged_prefill_b4_s4096_d128_gqa4_block16_bf16", "bf16")
    gen.sdpa(4, 32, 8, 4096, 4096, 128, causal=True, pages=(16, 4 * 4096 // 16))(b)
    path.write_text(gen.render(b.build()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("graphs", nargs="*", default=[str(REPO / "graphs/perf")])
    ap.add_argument("--budget-mib", type=int, default=0, help="tile budget in MiB (0: the default)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per graph")
    ap.add_argument("--write-paged-prefill", type=Path, metavar="FILE", help="write the paged S4096 prefill and stop")
    args = ap.parse_args(argv)
    if args.write_paged_prefill:
        write_paged_prefill(args.write_paged_prefill)
        return 0
    print(f"<!-- {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
          f"{platform.processor() or platform.machine()}, python {platform.python_version()} -->")
    print("| graph | peak beyond inputs (MiB) | estimate (MiB) | estimate / peak | evaluate (s) | max RSS (MiB) |")
    print("|---|---:|---:|---:|---:|---:|")
    bad = 0
    for path in attention_graphs(args.graphs):
        row = measure(path, args.budget_mib << 20, args.timeout)
        name = path.stem
        if isinstance(row, str):
            print(f"| {name} | not measured: {row} | | | | |", flush=True)
            continue
        ratio = row["estimate"] / max(row["peak"], 1.0)
        bad += not 1.0 <= ratio <= 1.5
        print(f"| {name} | {row['peak'] / 2**20:.0f} | {row['estimate'] / 2**20:.0f} | {ratio:.2f} | "
              f"{row['seconds']:.1f} | {row['maxrss'] / 2**20:.0f} |", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

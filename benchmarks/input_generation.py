"""How long seeded inputs take on the CPU, against numpy drawing as many float32 uniforms.

``make_inputs`` (the counter-based generator, ``bench/counter_rng.py``) is timed on bundled perf
graphs and on a built fp32 GEMM (the wide path), best of ``--repeats`` runs, against
``np.random.default_rng(0).random(n, dtype=np.float32)`` for the same element count ``n`` (one
core: numpy's generator has no threads). The goal: gemm_4096x4096x4096_fp16 within 3x of that
draw. The old recipe (PCG64 in float64, scaled, rounded with ``round_to``) is timed too, as the
code before the counter generator made these tensors.

    python benchmarks/input_generation.py [--repeats 5] [--threads N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import platform
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # run from a checkout

# E402 below: the package comes from the checkout put on sys.path above
from hipdnn_trace.backends.reference.ops.rounding import round_to  # noqa: E402
from hipdnn_trace.bench import counter_rng, inputs as inputs_module  # noqa: E402
from hipdnn_trace.graph.build import GraphBuilder  # noqa: E402
from hipdnn_trace.graph.load import load_file  # noqa: E402
from hipdnn_trace.graph.model import Graph  # noqa: E402

PERF = ROOT / "graphs" / "perf"
GRAPHS = ["matmul/gemm_4096x4096x4096_fp16.json", "matmul/gemm_4096x4096x4096_bf16.json",
          "matmul/attention_qkt_b4h32s2048d128_fp16.json", "norm/llm_rmsnorm_8x2048x4096_fp16.json"]


def _fp32_gemm() -> Graph:
    b = GraphBuilder("gemm_4096x4096x4096_fp32 (built)", io="float", compute="float")
    b.matmul(b.tensor("a", [4096, 4096]), b.tensor("b", [4096, 4096]), out="c")
    return b.build()


def _best(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _old_recipe(graph: Graph, seed: int) -> dict[int, np.ndarray]:
    """The generator before counter_rng: a PCG64 stream per tensor, float64, rounded once."""
    out = {}
    for t in graph.input_tensors:
        rng = inputs_module._seed_for(seed, graph.graph_id, t.uid)
        base = rng.standard_normal(tuple(t.dims)) * np.exp2(rng.uniform(-2.0, 2.0, size=tuple(t.dims)))
        out[t.uid] = round_to(base, t.data_type)
    return out


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="worker threads (default: the cores we may use)")
    parser.add_argument("--no-old", action="store_true", help="skip the old recipe (slow)")
    args = parser.parse_args()
    if args.threads:
        counter_rng.cores = lambda: args.threads          # type: ignore[assignment]
    print(f"device: {_cpu()}, {counter_rng.cores()} core(s) usable; numpy {np.__version__}; "
          f"{dt.date.today().isoformat()}; {counter_rng.GENERATOR}")
    print(f"command: python {shlex.join(sys.argv)}\n")
    print("| graph | elements | numpy f32 uniform s | make_inputs s | ratio | old recipe s |")
    print("|---|---:|---:|---:|---:|---:|")
    cases = [(p, load_file(PERF / p)) for p in GRAPHS] + [("gemm 4096^3 fp32 (built)", _fp32_gemm())]
    counter_rng.table("any", "half")   # tables are made once per process: not part of a run
    for name, graph in cases:
        n = sum(math.prod(t.dims) for t in graph.input_tensors)
        uniform = _best(lambda n=n: np.random.default_rng(0).random(n, dtype=np.float32), args.repeats)
        ours = _best(lambda graph=graph: inputs_module.make_inputs(graph, 0), args.repeats)
        old = (float("nan") if args.no_old
               else _best(lambda graph=graph: _old_recipe(graph, 0), max(1, args.repeats // 2)))
        print(f"| {Path(name).stem} | {n / 1e6:.1f}M | {uniform:.3f} | {ours:.3f} | {ours / uniform:.2f} | {old:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Host cost of validating gemm_4096x4096x4096_fp16's output against one numpy tolerance pass.

Issue 23's bar: ``compare_tensor`` on the host may cost at most 3x one plain numpy pass of
hipDNN's tolerance test over the output,
``(np.abs(a.astype(np.float64) - e) <= atol + rtol * np.abs(e)).all()``, which says only
pass/fail and nothing about where or by how much. Both see the same output (the graph's output
shape and type; tolerances as ``bench/graph_run.py`` derives them: ``tolerance_for`` +
``scaled_atol``). The expected values are

* ``synthetic`` (default): a float64 array of the output's shape (standard normal x 64, the spread
  of a K=4096 dot of unit normals), the actual output its rounding to the output type after a
  relative perturbation of 2^-12 (every element passes, as on a healthy GPU run);
* ``reference``: the float64 reference backend on the graph's seeded inputs (``make_inputs``), the
  actual output the reference's own rounded result (minutes of CPU for the 4096^3 GEMM).

Timings are the best of ``--repeat`` runs, methods interleaved so load from other processes hits
all alike. ``--chunks``/``--threads`` sweep compare_tensor's settings; ``--oracle`` adds the
comparison as it was before (tests/support/chunked_compare_oracle.py).

    python benchmarks/validation_cost.py [--source synthetic|reference] [--repeat 7] [--oracle]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))   # run from a checkout

# E402 below: the package comes from the checkout put on sys.path above
from hipdnn_trace.graph.load import load_file  # noqa: E402
from hipdnn_trace.validate.compare import compare_tensor  # noqa: E402
from hipdnn_trace.validate.tolerances import scaled_atol, tolerance_for  # noqa: E402

GRAPH = REPO / "graphs" / "perf" / "matmul" / "gemm_4096x4096x4096_fp16.json"


def outputs(source: str, seed: int) -> tuple[np.ndarray, np.ndarray, float, float, str]:
    """(actual, float64 expected, atol, rtol, hipDNN type) of the graph's output."""
    from hipdnn_trace.backends.reference.ops import round_to

    graph = load_file(GRAPH)
    tensor = graph.output_tensors[0]
    if source == "reference":
        from hipdnn_trace.backends.reference.executor import evaluate
        from hipdnn_trace.bench.inputs import make_inputs

        result = evaluate(graph, make_inputs(graph, seed))
        expected, actual = result.exact[tensor.uid], result.stored[tensor.uid]
    else:
        rng = np.random.default_rng(seed)
        expected = rng.standard_normal(tuple(tensor.dims)) * 64.0
        actual = round_to(expected * (1.0 + rng.uniform(-1, 1, expected.shape) * 2.0**-12), tensor.data_type)
    atol, rtol = tolerance_for(graph, tensor.uid)
    return actual, expected, scaled_atol(atol, expected), rtol, tensor.data_type


def best_of(functions: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    best = {name: float("inf") for name in functions}
    for _ in range(repeat):
        for name, fn in functions.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=("synthetic", "reference"), default="synthetic")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--chunks", default="", help="comma-separated chunk sizes to sweep (default: the default)")
    parser.add_argument("--threads", default="", help="comma-separated thread counts to sweep (default: the default)")
    parser.add_argument("--oracle", action="store_true", help="also time the comparison as it was before")
    parser.add_argument("--torch", action="store_true",
                        help="also time the device path on torch CPU tensors (the GPU's code, not its speed)")
    args = parser.parse_args()
    actual, expected, atol, rtol, dtype = outputs(args.source, args.seed)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"# {dt.date.today()}, {cpu_model()}, {cpus} CPUs usable, numpy {np.__version__}, Python "
          f"{platform.python_version()}; python benchmarks/validation_cost.py {shlex.join(sys.argv[1:])}".rstrip())
    print(f"# {GRAPH.name}: output {list(actual.shape)} {dtype}, {args.source} expected, atol {atol:.3g} rtol {rtol:g}")

    def one_pass() -> bool:
        return bool((np.abs(actual.astype(np.float64) - expected) <= atol + rtol * np.abs(expected)).all())

    assert one_pass(), "the output must pass for this comparison"
    functions: dict[str, Callable[[], object]] = {"numpy tolerance pass": one_pass}
    chunks = [int(c) for c in args.chunks.split(",") if c] or [None]
    threads = [int(t) for t in args.threads.split(",") if t] or [None]
    for chunk in chunks:
        for n in threads:
            label = f"compare_tensor (chunk {chunk or 'default'}, threads {n or 'default'})"
            functions[label] = lambda c=chunk, t=n: compare_tensor(actual, expected, atol=atol, rtol=rtol,
                                                                   reference=expected, dtype=dtype,
                                                                   chunk_elements=c, threads=t)
    if args.oracle:
        sys.path.insert(0, str(REPO / "tests" / "support"))
        from chunked_compare_oracle import compare_chunked

        functions["before (chunked_compare_oracle)"] = lambda: compare_chunked(
            actual, expected, atol=atol, rtol=rtol, reference=expected, dtype=dtype)
    if args.torch:
        import torch

        on_torch = torch.from_numpy(actual.copy()), torch.from_numpy(expected)
        functions["device path on torch CPU tensors"] = lambda: compare_tensor(
            *on_torch, atol=atol, rtol=rtol, reference=expected, dtype=dtype)
    functions["scaled_atol (graph_run's other pass, not in the bar)"] = lambda: scaled_atol(1e-3, expected)
    result = compare_tensor(actual, expected, atol=atol, rtol=rtol, reference=expected, dtype=dtype)
    assert result.passed, result.message()
    times = best_of(functions, args.repeat)
    base = times["numpy tolerance pass"]
    print("| method | best of %d (ms) | / numpy pass |" % args.repeat)
    print("|---|---|---|")
    for name, seconds in times.items():
        print(f"| {name} | {seconds * 1e3:.1f} | {seconds / base:.2f}x |")


if __name__ == "__main__":
    main()

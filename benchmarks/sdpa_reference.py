"""Time and peak memory of the float64 SDPA reference on an LLM prefill, through the real path.

The reference is the oracle every attention graph on a GPU is validated against, so it
has to finish a real prefill on a small machine. This builds the llama3-8B prefill
graph (b1, Hq 32, Hkv 8, s 4096, d 128, causal, bf16: the file
graphs/perf/attention/llama3_8b_prefill_s4096_bf16.json), makes its seeded inputs as
``run`` does, and evaluates it with the reference executor once, measuring wall time
and the process's peak resident set (``ru_maxrss``, which includes numpy's buffers and
the BLAS threads' scratch, unlike tracemalloc). Goal (issue 12): under 60 s and 4 GB
on the 2-core development machine.

    python benchmarks/sdpa_reference.py [--graph FILE] [--block-mib N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import resource
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))   # run from a checkout

# E402 below: the package comes from the checkout put on sys.path above
from hipdnn_trace.backends.reference import executor  # noqa: E402
from hipdnn_trace.backends.reference.ops import sdpa as sdpa_ops  # noqa: E402
from hipdnn_trace.bench.inputs import make_inputs  # noqa: E402
from hipdnn_trace.graph.load import load_file  # noqa: E402
from hipdnn_trace.graph.ops import graph_flops  # noqa: E402

DEFAULT = ROOT / "graphs/perf/attention/llama3_8b_prefill_s4096_bf16.json"


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # Linux reports KiB


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graph", type=Path, default=DEFAULT, help="attention graph (default: llama3-8B prefill)")
    parser.add_argument("--block-mib", type=int, default=None, help="score block cap in MiB (default: the module's)")
    args = parser.parse_args(argv)
    if args.block_mib:
        sdpa_ops.SCORE_BLOCK_BYTES = args.block_mib << 20
    graph = load_file(args.graph)
    before = peak_rss_bytes()
    t0 = time.perf_counter()
    inputs = make_inputs(graph, seed=0)
    t_inputs = time.perf_counter() - t0
    t1 = time.perf_counter()
    result = executor.evaluate(graph, inputs)
    t_ref = time.perf_counter() - t1
    peak = peak_rss_bytes()
    tensor_bytes = sum(a.nbytes for a in inputs.values()) + sum(a.nbytes for a in result.exact.values())
    flops = graph_flops(graph, inputs)
    print(f"# {args.graph.name} on {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"{dt.date.today()}, python {platform.python_version()}")
    print(f"# command: python {shlex.join(['benchmarks/sdpa_reference.py', *(argv or sys.argv[1:])])}")
    print(f"# score block cap: {sdpa_ops.SCORE_BLOCK_BYTES >> 20} MiB")
    print(f"inputs (incl. nothing else): {t_inputs:.1f} s")
    print(f"reference evaluate: {t_ref:.1f} s  ({flops / t_ref / 1e9:.2f} GFLOP/s float64, {flops:.3g} FLOP)")
    print(f"peak RSS: {peak / 2**30:.2f} GiB (before inputs {before / 2**30:.2f} GiB; inputs+outputs "
          f"{tensor_bytes / 2**30:.2f} GiB)")
    ok = t_ref < 60 and peak < 4 * 2**30
    print(f"goal (< 60 s, < 4 GB): {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

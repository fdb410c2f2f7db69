"""Peak memory of validating the largest bundled attention output, before and after chunking.

Validation compares a backend's output (in its own type) with the float64 reference. This
script needs no GPU: for the largest output of the graphs in graphs/perf/attention it builds a
float64 "reference" of that shape and the "actual" output as the reference rounded to the
output's type, then, in a fresh child process per method, measures what one validation
(``scaled_atol`` + ``compare_tensor``, as ``bench/graph_run.py`` calls them) adds to the peak
RSS once both arrays exist (VmHWM after resetting it through /proc/self/clear_refs):

* ``whole``: the comparison as it was before chunking (kept as the tests' oracle in
  tests/support/unchunked_compare.py) with the whole-array RMS of ``scaled_atol``;
* ``chunked``: today's ``compare_tensor`` (its defaults: ``HOST_CHUNK_ELEMENTS`` per thread) and ``scaled_atol``;
* ``one chunk``: today's code with the chunk as large as the output (what chunking buys).

    python benchmarks/validation_memory.py [--graphs graphs/perf/attention] [--methods whole,chunked]
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))   # run from a checkout

CHILD = r"""
import gc, sys, time
import numpy as np
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests/support"]
from hipdnn_trace.backends.reference.ops import round_to
from hipdnn_trace.validate import compare, tolerances

method, shape, dtype = sys.argv[2], tuple(int(d) for d in sys.argv[3].split(",")), sys.argv[4]

def status(field):
    return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(field + ":"))

reference = np.random.default_rng(0).standard_normal(shape)
actual = round_to(reference, dtype)
gc.collect()
base = status("VmRSS")
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")
t0 = time.perf_counter()
if method == "whole":
    from unchunked_compare import compare_whole
    finite = reference[np.isfinite(reference)]
    atol = 1e-2 * max(1.0, float(np.sqrt(np.mean(np.square(finite)))))
    del finite
    result = compare_whole(actual, reference, atol=atol, rtol=1e-2, reference=reference, dtype=dtype)
else:
    chunk = reference.size if method == "one chunk" else None
    atol = tolerances.scaled_atol(1e-2, reference)
    result = compare.compare_tensor(actual, reference, atol=atol, rtol=1e-2, reference=reference, dtype=dtype,
                                    chunk_elements=chunk)
seconds = time.perf_counter() - t0
assert result.passed, result.message()
print(base, status("VmHWM"), seconds)
"""


def largest_output(folder: Path) -> tuple[str, str, tuple[int, ...], str]:
    """(graph file, output name, dims, hipDNN type) of the output with the most elements."""
    from hipdnn_trace.graph.load import load_file

    best = None
    for path in sorted(folder.glob("*.json")):
        for t in load_file(path).output_tensors:
            if best is None or t.numel > best[0]:
                best = (t.numel, path.name, t.name, tuple(t.dims), t.data_type)
    if best is None:
        raise SystemExit(f"{folder}: no graphs")
    return best[1:]


def measure(method: str, dims: tuple[int, ...], dtype: str) -> tuple[int, int, float]:
    done = subprocess.run([sys.executable, "-c", CHILD, str(REPO), method, ",".join(map(str, dims)), dtype],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{method}: {done.stderr.strip().splitlines()[-1] if done.stderr else done.returncode}")
    base, peak, seconds = done.stdout.split()
    return int(base), int(peak), float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", type=Path, default=REPO / "graphs" / "perf" / "attention")
    parser.add_argument("--methods", default="whole,one chunk,chunked")
    args = parser.parse_args()
    source, name, dims, dtype = largest_output(args.graphs)
    numel = 1
    for d in dims:
        numel *= d
    f64 = 8 * numel
    print(f"{dt.date.today()} {platform.node()} {platform.processor() or platform.machine()}; "
          f"python benchmarks/validation_memory.py {shlex.join(sys.argv[1:])}".rstrip())
    print(f"output {name!r} of {source}: {list(dims)} {dtype}, {numel / 2**20:.0f} Mi elements, "
          f"float64 copy {f64 / 2**20:.0f} MiB")
    print("| method | before (arrays exist) MiB | peak MiB | added by validation MiB | added / float64 copy "
          "| peak / float64 copy | seconds |")
    print("|---|---|---|---|---|---|---|")
    for method in [m.strip() for m in args.methods.split(",") if m.strip()]:
        base, peak, seconds = measure(method, dims, dtype)
        print(f"| {method} | {base / 2**20:.0f} | {peak / 2**20:.0f} | {(peak - base) / 2**20:.0f} | "
              f"{(peak - base) / f64:.2f} | {peak / f64:.2f} | {seconds:.1f} |")


if __name__ == "__main__":
    main()

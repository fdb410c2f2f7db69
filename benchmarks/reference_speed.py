"""Speed and memory of the float64 reference ops against PyTorch on the CPU.

The reference backend is the oracle every GPU run is validated against, so it must
stay usable on real layer sizes. This compares conv fprop / dgrad / wgrad and matmul
with PyTorch CPU (float64, the like-for-like number, and float32 for scale) and
records the reference's peak Python-heap use (tracemalloc) against the bytes of the
op's tensors in float64. Goals: torch64_time / ours >= 0.5, peak < 3x.

PyTorch is not a project dependency: install it only to run this script.

    python benchmarks/reference_speed.py [--repeats 5] [--quick]
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import shlex
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout

from hipdnn_trace.backends.reference.ops import conv_dgrad, conv_fwd, conv_wgrad, matmul

try:
    import torch
except ImportError:  # pragma: no cover - optional
    torch = None


@dataclass(frozen=True)
class ConvCase:
    name: str
    x: tuple[int, ...]
    w: tuple[int, ...]
    pad: int
    stride: int

    def options(self) -> dict:
        return dict(pre_padding=[self.pad] * 2, post_padding=[self.pad] * 2,
                    stride=[self.stride] * 2, dilation=[1, 1])


CONV_CASES = [
    ConvCase("3x3 N8 C64 56x56 K64", (8, 64, 56, 56), (64, 64, 3, 3), 1, 1),
    ConvCase("1x1 N8 C256 56x56 K64", (8, 256, 56, 56), (64, 256, 1, 1), 0, 1),
    ConvCase("3x3/2 N8 C128 28x28 K256", (8, 128, 28, 28), (256, 128, 3, 3), 1, 2),
    ConvCase("3x3 N32 C512 7x7 K512", (32, 512, 7, 7), (512, 512, 3, 3), 1, 1),
]
GEMM_CASES = [("GEMM 1024^3", (1024, 1024), (1024, 1024)),
              ("batched GEMM 16x256x512x256", (16, 256, 512), (16, 512, 256))]
QUICK_CONV = CONV_CASES[:2]
QUICK_GEMM = GEMM_CASES[:1]


def best_times(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Best wall time of each function over ``repeats`` rounds after one warm-up.

    The functions take turns within each round, so a burst of load from elsewhere on
    the machine hits ours and torch's alike instead of skewing the ratio.
    """
    for fn in fns.values():
        fn()
    best = {name: float("inf") for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def peak_bytes(fn: Callable[[], object]) -> int:
    """Peak bytes allocated (numpy reports to tracemalloc) while ``fn`` runs."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    result = fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    return peak


@dataclass
class Row:
    op: str
    shape: str
    ours_s: float
    torch64_s: float | None
    torch32_s: float | None
    peak: int
    tensor_bytes: int

    def cells(self) -> list[str]:
        def ms(v: float | None) -> str:
            return "n/a" if v is None else f"{v * 1e3:.1f}"

        ratio = "n/a" if self.torch64_s is None else f"{self.torch64_s / self.ours_s:.2f}"
        return [self.op, self.shape, ms(self.ours_s), ms(self.torch64_s), ratio, ms(self.torch32_s),
                f"{self.peak / self.tensor_bytes:.2f}x"]


def conv_rows(case: ConvCase, repeats: int) -> list[Row]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(case.x)
    w = rng.standard_normal(case.w)
    opts = case.options()
    y = conv_fwd(x, w, **opts)
    dy = rng.standard_normal(y.shape)
    nbytes = x.nbytes + w.nbytes + y.nbytes
    ours = {
        "conv fprop": lambda: conv_fwd(x, w, **opts),
        "conv dgrad": lambda: conv_dgrad(dy, w, x_shape=x.shape, **opts),
        "conv wgrad": lambda: conv_wgrad(x, dy, w_shape=w.shape, **opts),
    }
    theirs: dict[str, dict[str, Callable[[], object]]] = {}
    if torch is not None:
        for label, dtype in (("64", torch.float64), ("32", torch.float32)):
            xt, wt, dyt = (torch.from_numpy(a).to(dtype) for a in (x, w, dy))
            kw = dict(stride=case.stride, padding=case.pad)
            theirs[label] = {
                "conv fprop": lambda xt=xt, wt=wt, kw=kw: torch.nn.functional.conv2d(xt, wt, **kw),
                "conv dgrad": lambda wt=wt, dyt=dyt, kw=kw: torch.nn.grad.conv2d_input(case.x, wt, dyt, **kw),
                "conv wgrad": lambda xt=xt, dyt=dyt, kw=kw: torch.nn.grad.conv2d_weight(xt, case.w, dyt, **kw),
            }
    rows = []
    for op, fn in ours.items():
        impls = {"ours": fn, **{f"torch{label}": table[op] for label, table in theirs.items()}}
        t = best_times(impls, repeats)
        rows.append(Row(op, case.name, t["ours"], t.get("torch64"), t.get("torch32"), peak_bytes(fn), nbytes))
    return rows


def gemm_row(name: str, a_shape: tuple[int, ...], b_shape: tuple[int, ...], repeats: int) -> Row:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    nbytes = a.nbytes + b.nbytes + np.matmul(a, b).nbytes
    fn = lambda: matmul(a, b)
    impls: dict[str, Callable[[], object]] = {"ours": fn}
    if torch is not None:
        a64, b64 = torch.from_numpy(a), torch.from_numpy(b)
        a32, b32 = a64.float(), b64.float()
        impls["torch64"] = lambda: torch.matmul(a64, b64)
        impls["torch32"] = lambda: torch.matmul(a32, b32)
    t = best_times(impls, repeats)
    return Row("matmul", name, t["ours"], t.get("torch64"), t.get("torch32"), peak_bytes(fn), nbytes)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per op (best is kept)")
    parser.add_argument("--quick", action="store_true", help="two conv shapes and one GEMM only")
    args = parser.parse_args(argv)

    import os

    rows: list[Row] = []
    for case in QUICK_CONV if args.quick else CONV_CASES:
        rows.extend(conv_rows(case, args.repeats))
    for name, a_shape, b_shape in QUICK_GEMM if args.quick else GEMM_CASES:
        rows.append(gemm_row(name, a_shape, b_shape, args.repeats))

    command = "python " + " ".join(shlex.quote(a) for a in ["benchmarks/reference_speed.py", *(argv or sys.argv[1:])])
    print(f"- device: {cpu_model()}, {os.cpu_count()} logical CPUs"
          + (f", torch threads {torch.get_num_threads()}" if torch is not None else ""))
    print(f"- date: {dt.date.today().isoformat()}")
    print(f"- command: `{command}`")
    print(f"- numpy {np.__version__}, torch {torch.__version__ if torch is not None else 'not installed'}, "
          f"Python {platform.python_version()}")
    print("- times: best of the timed rounds (implementations alternate within a round), ms; "
          "ratio = torch float64 time / ours (goal >= 0.5); "
          "peak = tracemalloc peak / bytes of the op's float64 tensors (goal < 3x)")
    print()
    header = ["op", "shape", "ours f64 ms", "torch f64 ms", "ratio", "torch f32 ms", "peak mem"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row.cells()) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Is ``kernel_ms`` the GPU's own kernel time? Five clocks side by side on one session per graph.

For each graph (1 us pointwise to ~2 ms attention; cuDNN, plus eager torch graphs that launch
several kernels), on the same built session:

* **harness kernel_ms**: ``run_loop`` with the kernel clock, exactly as ``hipdnn-trace run``
  times by default (median of the timed iterations), with its ``latency_ms`` and ``span_ms``;
* **CUPTI (independent)**: a second subscriber of its own during that same ``run_loop``; its
  records are grouped per iteration by count (no host windows, no clock offset: none of the
  harness's attribution code), hold kernels excluded, median of the timed iterations' sums --
  the same iterations, so clock drift between measurements cannot hide or fake a difference;
* **staged span**: ``run_loop`` without the kernel clock (the old default);
* **triton do_bench** (median; it clears the L2 before every call, so it reads cold);
* **torch.cuda.Event** pair around each execute on the session's stream, the way ROCm's
  dnn-benchmarking times on CUDA (median).

Goal (issue 16): single-kernel graphs within max(1%, 0.1 us) of CUPTI; multi-kernel graphs
equal to the CUPTI kernel sum (same tolerance).

Run on the GPU machine: ``python benchmarks/kernel_time_truth.py [--out DIR]`` (Markdown table
last, ``kernel_time_truth.csv`` written as rows finish).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

import numpy as np

from hipdnn_trace import backends
from hipdnn_trace.backends.base import RunOptions
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.bench.loop import LoopSettings, run_loop
from hipdnn_trace.device import cupti_activity
from hipdnn_trace.device.kernel_clock import MACHINERY_KERNELS, KernelClock
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.markers import select

REPO = Path(__file__).resolve().parents[1]
JOBS = [("cudnn", "pointwise/relu_clip_fp16.json"), ("cudnn", "pointwise/bias_add_broadcast_nhwc_fp16.json"),
        ("cudnn", "norm/layernorm_bf16.json"), ("cudnn", "matmul/matmul_batched_fp16.json"),
        ("cudnn", "conv/conv_fwd_nhwc_stride2_fp16.json"), ("cudnn", "fused/conv_bias_relu_nhwc_fp16.json"),
        ("cudnn", "perf/norm/qwen3_qk_rmsnorm_per_head_131072x128_bf16.json"),
        ("cudnn", "perf/conv/resnet50_res4_3x3_256_fwd_fp16.json"),
        ("cudnn", "perf/conv/resnet50_res2_3x3_64_wgrad_fp16.json"),
        ("cudnn", "perf/norm/llm_layernorm_8x2048x4096_fp16.json"),
        ("cudnn", "perf/norm/llm_rmsnorm_backward_8x2048x4096_bf16.json"),
        ("cudnn", "perf/matmul/gemm_4096x4096x4096_fp16.json"),
        ("cudnn", "perf/attention/llama3_8b_decode_b16_kv4096_bf16.json"),
        ("cudnn", "perf/attention/llama3_8b_prefill_s4096_bf16.json"),
        ("torch", "fused/matmul_bias_gelu_fp16.json"), ("torch", "norm/layernorm_backward_fp16.json"),
        ("torch", "perf/fused/resnet50_conv_bias_relu_3x3_64_fp16.json")]
LOOP = LoopSettings(warmup=20, iters=200)


def _independent_sums_us(records: list, iterations: int) -> tuple[np.ndarray, int]:
    """Per-iteration kernel sums (us) from records grouped by count, and kernels per iteration:
    every iteration of a measurement launches the same kernels, one iteration at a time."""
    records = sorted((r for r in records if r[0] not in MACHINERY_KERNELS), key=lambda r: r[1])
    per = len(records) // iterations
    if per == 0 or len(records) % iterations:
        raise RuntimeError(f"{len(records)} kernel records for {iterations} iterations: not a whole number each")
    durations = np.array([r[2] - r[1] for r in records], dtype=np.float64).reshape(iterations, per)
    return durations.sum(axis=1) / 1e3, per


def _torch_events_us(session, n: int) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    handle = session.stream.handle if hasattr(session.stream, "handle") else session.stream.cuda_stream
    stream = torch.cuda.ExternalStream(int(handle))
    out = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(n):
        start.record(stream)
        session.execute()
        end.record(stream)
        end.synchronize()
        out.append(start.elapsed_time(end) * 1e3)
    return float(np.median(out))


def _do_bench_us(session) -> float | None:
    try:
        import torch
        from triton.testing import do_bench
    except ImportError:
        return None
    handle = session.stream.handle if hasattr(session.stream, "handle") else session.stream.cuda_stream
    with torch.cuda.stream(torch.cuda.ExternalStream(int(handle))):
        return float(do_bench(session.execute, warmup=25, rep=100, return_mode="median")) * 1e3


def _median_us(values) -> float:
    arr = np.array([v for v in values if v is not None], dtype=np.float64)
    return float(np.median(arr)) * 1e3 if arr.size else float("nan")


def measure(backend: str, relative: str, markers) -> dict:
    path = REPO / "graphs" / relative
    graph = load_bytes(path.read_bytes(), str(path))
    session = backends.get(backend).prepare(graph, None, RunOptions(timing="staged"))
    try:
        session.bind(make_inputs(graph, 0))
        # an independent subscriber sees the very iterations the harness times
        independent = cupti_activity.Subscriber()
        cupti_activity.SINK.subscribe(independent)
        try:
            independent.drain()
            kernel, _ = run_loop(session, LOOP, markers, kernel_clock=KernelClock())
            records = independent.drain()
        finally:
            cupti_activity.SINK.unsubscribe(independent)
        staged, _ = run_loop(session, LOOP, markers)
        torch_us = _torch_events_us(session, LOOP.iters)
        bench_us = _do_bench_us(session)
    finally:
        session.close()
    timed = [k for k, p in enumerate(kernel.phase) if p == "timed"]
    sums_us, per_iter = _independent_sums_us(records, len(kernel))
    cupti_us = float(np.median(sums_us[timed]))
    kernel_us = _median_us(kernel.kernel_ms[k] for k in timed)
    latency_us = _median_us(kernel.extra["latency_ms"][k] for k in timed)
    span_us = _median_us(v for v in kernel.extra.get("span_ms", []) if v is not None)
    staged_us = _median_us(staged.timed_kernel_ms())
    diff = kernel_us - cupti_us
    return {"graph": path.stem, "backend": backend, "kernels_per_iter": per_iter, "cupti_us": cupti_us,
            "kernel_ms_us": kernel_us, "kernel_minus_cupti_us": diff,
            "goal_met": abs(diff) <= max(0.01 * cupti_us, 0.1), "kernel_source": kernel.timing.get("kernel_ms"),
            "staged_us": staged_us, "span_side_us": span_us, "latency_us": latency_us, "torch_events_us": torch_us,
            "do_bench_us": bench_us}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("."), help="folder for kernel_time_truth.csv")
    args = parser.parse_args(argv)
    import polars as pl

    from hipdnn_trace.device.nvml import gpu_info

    markers = select("nvtx", vendor="nvidia")
    rows = []
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    for backend, relative in JOBS:
        try:
            rows.append(measure(backend, relative, markers))
        except Exception as exc:  # one graph must not end the benchmark
            print(f"skip {backend} {relative}: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}",
                  file=sys.stderr)
            continue
        print(rows[-1], flush=True)
        pl.DataFrame(rows).write_csv(args.out / "kernel_time_truth.csv")
    gpu = (gpu_info(0) or {}).get("name", "?")
    print(f"\nKernel time truth, {gpu}, {datetime.date.today().isoformat()}, `python benchmarks/kernel_time_truth.py` "
          f"(warmup {LOOP.warmup}, {LOOP.iters} iterations, medians in us; {time.monotonic() - t0:.0f} s)\n")
    print("| graph | backend | kernels/iter | CUPTI (independent) | harness kernel_ms | diff | goal | staged span | "
          "torch.cuda.Event | do_bench (cold) | latency_ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    fmt = lambda v: "-" if v is None or v != v else f"{v:.2f}"
    for r in rows:
        print(f"| {r['graph']} | {r['backend']} | {r['kernels_per_iter']} | {r['cupti_us']:.2f} | "
              f"{r['kernel_ms_us']:.2f} | {r['kernel_minus_cupti_us']:+.3f} | {'yes' if r['goal_met'] else 'NO'} | "
              f"{r['staged_us']:.2f} | {fmt(r['torch_events_us'])} | {fmt(r['do_bench_us'])} | {r['latency_us']:.2f} |")
    if rows:
        print(f"\ngoal met for {sum(r['goal_met'] for r in rows)}/{len(rows)} graphs")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Column schemas of every frame hipdnn-trace writes.

These are the contract between the stages: bench fills ``iterations`` and
``summary``, validate fills ``validation``, profilers fill ``kernels`` and
``counters``. docs/frames.md documents each column; tests check files against these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import polars as pl

Schema = dict[str, pl.DataType]

# Columns that identify which measurement a row belongs to. Profiler parsers that
# run outside a harness run (``ingest``) leave them null.
KEY: Schema = {
    "run_id": pl.String(),
    "graph": pl.String(),
    "graph_id": pl.String(),
    "config": pl.String(),
}

ITERATIONS: Schema = {
    **KEY,
    "source": pl.String(),          # graph file
    "backend": pl.String(),
    "engine": pl.String(),
    "iteration": pl.Int64(),        # 0-based within its phase
    "phase": pl.String(),           # "warmup" | "timed" | "span" | "latency" (side blocks, docs/timing.md)
    "kernel_ms": pl.Float64(),      # device time: kernel sum (CUPTI) or event span; host clock on CPU backends
    "span_ms": pl.Float64(),        # staged event span (start event after the enqueue)
    "latency_ms": pl.Float64(),     # unstaged event span around the whole enqueue
    "host_ms": pl.Float64(),        # enqueue + sync wall time
    "kernel_sum_ms": pl.Float64(),  # sum of profiler kernel durations (null without one)
    "start_ns": pl.Int64(),         # CLOCK_BOOTTIME at iteration start (the trace clock)
    "sm_clock_mhz": pl.Float64(),   # lowest NVML reading during the iteration (docs/timing.md "Clocks")
    "mem_clock_mhz": pl.Float64(),
    "clock_flag": pl.Boolean(),     # SM clock below 90% of the run's max
    "throttled": pl.Boolean(),      # SM clock < --throttle-threshold x reference clock (nvbench's rule)
    "cycles": pl.Float64(),         # kernel_ms x sm_clock_mhz x 1e3: GPU cycles, for compare --cycles
    "block": pl.Int64(),            # interleaved A/B: the block (0, 1, ... in ABBA order over both configs)
}

SUMMARY: Schema = {
    **KEY,
    "source": pl.String(),
    "backend": pl.String(),
    "engine": pl.String(),
    "dtype": pl.String(),
    "n": pl.Int64(),
    "n_throttled": pl.Int64(),      # timed samples flagged throttled (left out of n unless --keep-throttled)
    "mean": pl.Float64(),
    "std": pl.Float64(),
    "min": pl.Float64(),
    "p5": pl.Float64(),
    "p25": pl.Float64(),
    "median": pl.Float64(),
    "p75": pl.Float64(),
    "p95": pl.Float64(),
    "p99": pl.Float64(),
    "max": pl.Float64(),
    "iqr": pl.Float64(),
    "cv": pl.Float64(),
    "median_ci_low": pl.Float64(),
    "median_ci_high": pl.Float64(),
    "host_median": pl.Float64(),
    "span_ms": pl.Float64(),        # median staged event span
    "latency_ms": pl.Float64(),     # median unstaged event span: what a framework user waits
    "kernel_source": pl.String(),   # what kernel_ms is: cupti-activity | cuda-event-staged | cuda-event | host ...
    "first_call_ms": pl.Float64(),  # host wall time of the first execute + sync (cold: plan caches, lazy loads)
    "init_ms": pl.Float64(),
    "e2e_ms": pl.Float64(),
    "flops": pl.Float64(),
    "bytes": pl.Float64(),
    "tflops": pl.Float64(),
    "gbps": pl.Float64(),
    "umd_flops": pl.Float64(),      # hipDNN's own FLOP model (the nodes' umd_flops, RFC 0019); null: not carried
    "umd_bytes": pl.Float64(),      # hipDNN's own byte model (umd_bytes)
    "umd_flag": pl.String(),        # set when hipDNN's and our FLOPs/bytes differ by >1%: both numbers
    "status": pl.String(),          # ok | failed | unsupported | error
    "validation": pl.String(),      # passed | failed | skipped
    "golden": pl.String(),          # integration-test bundle golden data: used | dvc-only | unusable | none
    "error": pl.String(),
    "warnings": pl.String(),        # dnn-benchmarking's row warnings, "; "-joined: noisy: .., outlier: .., throttled
    # from profilers: the dominant limiter (ncu; docs/nvidia.md "Why"), or compute-/memory-/latency-bound (AMD)
    "bottleneck": pl.String(),
    "sol_ms": pl.Float64(),         # speed of light: the lower-bound time on the run's GPU peaks
    "sol_bound": pl.String(),       # what sets it: compute | memory
    "sol_share": pl.Float64(),      # sol_ms / median: the achieved share of speed of light
}

KERNELS: Schema = {
    **KEY,
    "iteration": pl.Int64(),        # timed iteration the kernel ran in (null: outside)
    "name": pl.String(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "duration_ns": pl.Int64(),
    "grid_x": pl.Int64(),
    "grid_y": pl.Int64(),
    "grid_z": pl.Int64(),
    "block_x": pl.Int64(),
    "block_y": pl.Int64(),
    "block_z": pl.Int64(),
    "stream": pl.Int64(),
    "device": pl.Int64(),
    "correlation_id": pl.Int64(),
    "source": pl.String(),          # rocprofv3 | rocprof | rocpd | cupti | ncu
    "mangled_name": pl.String(),    # the name as the profiler gave it; ``name`` is demangled (results/kernel_names.py)
}

COUNTERS: Schema = {
    **KEY,
    "iteration": pl.Int64(),
    "kernel": pl.String(),
    "correlation_id": pl.Int64(),   # dispatch id / ncu launch id: joins to kernels
    "counter": pl.String(),
    "value": pl.Float64(),
    "unit": pl.String(),
    "source": pl.String(),
}

VALIDATION: Schema = {
    **KEY,
    "source": pl.String(),          # graph file: tells apart identical graphs in two files
    "output_uid": pl.Int64(),
    "output": pl.String(),          # tensor name
    "against": pl.String(),         # reference | golden | config name of B
    "dtype": pl.String(),
    "rtol": pl.Float64(),
    "atol": pl.Float64(),
    "max_abs": pl.Float64(),
    "max_rel": pl.Float64(),
    "mismatches": pl.Int64(),
    "nonfinite": pl.Int64(),
    "total": pl.Int64(),
    "worst_index": pl.String(),
    "passed": pl.Boolean(),
    "message": pl.String(),
}

MISMATCHES: Schema = {
    **KEY,
    "source": pl.String(),          # graph file: tells apart identical graphs in two files
    "output": pl.String(),
    "against": pl.String(),
    "rank": pl.Int64(),             # 0 = the worst element (largest error / allowed error)
    "index": pl.String(),           # logical index, e.g. "[0, 3, 1, 2]"
    "actual": pl.Float64(),
    "expected": pl.Float64(),
    "reference": pl.Float64(),      # float64 oracle value (A/B and golden comparisons too)
    "abs_err": pl.Float64(),
    "rel_err": pl.Float64(),
}

#: Where one graph's wall time went (results/breakdown.py): one row per graph x config. The
#: graph's columns (process, load, inputs, reference, validate, write, other, wall) repeat on each
#: of its rows; the configuration's columns (init .. fetch) are that row's own. 0: did not happen.
BREAKDOWN: Schema = {
    **KEY,
    "source": pl.String(),
    "backend": pl.String(),
    "t_process_ms": pl.Float64(),   # isolated child: fork request until its first message
    "t_release_ms": pl.Float64(),   # resident child: still freeing the previous graph's memory after the hand-out
    "t_load_ms": pl.Float64(),
    "t_inputs_ms": pl.Float64(),
    "t_reference_ms": pl.Float64(),
    "t_init_ms": pl.Float64(),      # plan build (backend.prepare)
    "t_bind_ms": pl.Float64(),
    "t_warmup_ms": pl.Float64(),
    "t_timed_ms": pl.Float64(),
    "t_fetch_ms": pl.Float64(),
    "t_kernel_clock_ms": pl.Float64(),   # CUPTI's records flushed and matched to the iterations (bench/loop.py)
    "t_side_ms": pl.Float64(),      # latency/span side blocks after the timed loop (or a re-timing)
    "t_close_ms": pl.Float64(),     # the session closed: plan, workspace and buffers freed
    "t_validate_ms": pl.Float64(),
    "t_queue_ms": pl.Float64(),     # its record waiting for the run's one writer (not in wall_ms: others ran meanwhile)
    "t_write_ms": pl.Float64(),     # its share of the commit that wrote it (tables and trace; 1/k for k graphs)
    "t_other_ms": pl.Float64(),     # wall minus every column above but t_queue_ms (all of the graph's configs)
    "wall_ms": pl.Float64(),        # the suite handing the graph over until its result was ready, + t_write_ms
}

#: run --oracle: a graph's out-of-the-box plan against its tuned plan (results/oracle.py, docs/frames.md)
ORACLE: Schema = {
    **KEY,                          # config: the out-of-the-box configuration (NAME#ootb)
    "source": pl.String(),
    "backend": pl.String(),
    "ootb_engine": pl.String(),
    "tuned_config": pl.String(),
    "tuned_engine": pl.String(),
    "tuning": pl.String(),          # how the tuned plan was had: autotune candidates, knob, switches
    "tuning_available": pl.Boolean(),   # false: nothing to tune here, the tuned run re-measured the ootb plan
    "ootb_ms": pl.Float64(),        # summary median of each
    "tuned_ms": pl.Float64(),
    "regret": pl.Float64(),         # ootb_ms / tuned_ms; null unless both ran and neither failed validation
    "ootb_validation": pl.String(),
    "tuned_validation": pl.String(),
    "flag": pl.String(),            # "" | faster-but-wrong | tuned-wrong | ootb-wrong | both-wrong | not-compared
}

#: An interleaved A/B's outcome per graph (bench/ab.py, docs/compare.md): ``config`` is A, ``config_b`` B.
AB: Schema = {
    **KEY,
    "source": pl.String(),
    "config_b": pl.String(),
    "ratio": pl.Float64(),          # B/A time (>1: B slower): exp(mean log ratio of the ABBA rounds)
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "confidence": pl.Float64(),     # the interval's level (0.95 over the planned looks, Bonferroni)
    "verdict": pl.String(),         # FASTER | SLOWER | SAME | UNDECIDED
    "band": pl.Float64(),           # SAME: the interval inside [1/(1+band), 1+band]
    "rounds": pl.Int64(),           # ABBA rounds run
    "blocks": pl.Int64(),           # blocks run (4 per round, both configs)
    "block_iters": pl.Int64(),      # timed iterations per block
    "recreated": pl.Int64(),        # times both sessions were closed, prepared and bound again (placement)
    "stop": pl.String(),            # why it stopped: decided, or which cap
    "method": pl.String(),
}

FRAMES: dict[str, Schema] = {
    "iterations": ITERATIONS,
    "summary": SUMMARY,
    "kernels": KERNELS,
    "counters": COUNTERS,
    "validation": VALIDATION,
    "mismatches": MISMATCHES,
    "breakdown": BREAKDOWN,
    "oracle": ORACLE,
    "ab": AB,
}


_EMPTY: dict[tuple[tuple[str, str], ...], pl.DataFrame] = {}


def empty(schema: Schema) -> pl.DataFrame:
    """A frame with no rows and ``schema``'s columns (built once per schema: callers ask often)."""
    key = tuple((name, repr(dtype)) for name, dtype in schema.items())
    if key not in _EMPTY:
        _EMPTY[key] = pl.DataFrame(schema=schema)
    return _EMPTY[key].clone()


def frame(rows: Iterable[Mapping[str, Any]], schema: Schema) -> pl.DataFrame:
    """Rows (dicts, possibly missing columns) -> a frame with exactly ``schema``."""
    rows = list(rows)
    if not rows:
        return empty(schema)
    cols = {name: [r.get(name) for r in rows] for name in schema}
    return pl.DataFrame(cols, schema=schema)


def conform(df: pl.DataFrame, schema: Schema) -> pl.DataFrame:
    """Add missing columns as nulls, cast, and order as ``schema``; extra columns go last."""
    exprs = [
        (pl.col(n).cast(t, strict=False) if n in df.columns else pl.lit(None, dtype=t)).alias(n)
        for n, t in schema.items()
    ]
    extra = [c for c in df.columns if c not in schema]
    return df.select(exprs + extra)

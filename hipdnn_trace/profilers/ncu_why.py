"""ncu raw-page metrics -> the per-kernel "why" columns (docs/nvidia.md, "Why").

Each column is the raw metric behind the value Nsight Compute prints on its details page,
checked kernel by kernel against the details page of the same report
(tests/data/ncu/, H200, ncu 2025.3.1; tests/profilers/test_ncu_why.py). The section and row
each comes from (ncu ``sections/*.section``; ProfilingGuide "Speed Of Light", "Compute
Workload Analysis", "Launch Statistics", "Occupancy", "Scheduler Statistics", "Warp State
Statistics") is named beside each column in ``SOL``.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from hipdnn_trace.profilers import ncu_csv
from hipdnn_trace.profilers.harness_kernels import drop_harness
from hipdnn_trace.profilers.ncu_csv import RawTable, number, unit_scale
from hipdnn_trace.profilers.why import with_limiters

#: column -> (raw metric, details-page section, details-page row)
SOL = {
    "duration_ns": ("gpu__time_duration.sum", "GPU Speed Of Light Throughput", "Duration"),
    "sm_throughput_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "GPU Speed Of Light Throughput",
                          "Compute (SM) Throughput"),
    "memory_throughput_pct": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                              "GPU Speed Of Light Throughput", "Memory Throughput"),
    "dram_throughput_pct": ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                            "GPU Speed Of Light Throughput", "DRAM Throughput"),
    "l1_throughput_pct": ("l1tex__throughput.avg.pct_of_peak_sustained_active", "GPU Speed Of Light Throughput",
                          "L1/TEX Cache Throughput"),
    "l2_throughput_pct": ("lts__throughput.avg.pct_of_peak_sustained_elapsed", "GPU Speed Of Light Throughput",
                          "L2 Cache Throughput"),
    "issue_active_pct": ("sm__inst_issued.avg.pct_of_peak_sustained_elapsed", "Compute Workload Analysis",
                         "Issue Slots Busy"),
    "sm_busy_pct": ("sm__instruction_throughput.avg.pct_of_peak_sustained_elapsed", "Compute Workload Analysis",
                    "SM Busy"),
    "achieved_occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active", "Occupancy",
                               "Achieved Occupancy"),
    "theoretical_occupancy_pct": ("sm__maximum_warps_per_active_cycle_pct", "Occupancy", "Theoretical Occupancy"),
    "eligible_pct": ("smsp__issue_active.avg.pct_of_peak_sustained_active", "Scheduler Statistics",
                     "One or More Eligible"),
    "grid_size": ("launch__grid_size", "Launch Statistics", "Grid Size"),
    "block_size": ("launch__block_size", "Launch Statistics", "Block Size"),
    "sm_count": ("launch__sm_count", "Launch Statistics", "# SMs"),
    "registers_per_thread": ("launch__registers_per_thread", "Launch Statistics", "Registers Per Thread"),
    "shared_memory_per_block": ("launch__shared_mem_per_block", "Launch Statistics", "Shared Memory Per Block"),
    "waves_per_sm": ("launch__waves_per_multiprocessor", "Launch Statistics", "Waves Per SM"),
}
INT_COLUMNS = ("grid_size", "block_size", "sm_count", "registers_per_thread", "shared_memory_per_block")

#: Occupancy section's "Block Limit ..." rows: the limiter with the fewest blocks per SM wins.
OCCUPANCY_LIMITS = {
    "registers": "launch__occupancy_limit_registers", "shared_memory": "launch__occupancy_limit_shared_mem",
    "warps": "launch__occupancy_limit_warps", "blocks": "launch__occupancy_limit_blocks",
    "barriers": "launch__occupancy_limit_barriers",
}

#: Compute Workload Analysis's pipe utilisation, % of peak over elapsed cycles: the numbers its
#: HighPipeUtilization rule prints ("ALU is the highest-utilized pipeline (78.4%) based on elapsed
#: cycles"). Tensor first: on a tie with the shared pipe it names the work. ``tma`` from sm_90 on.
_ELAPSED = ".avg.pct_of_peak_sustained_elapsed"
PIPES = {"tensor": f"sm__pipe_tensor_cycles_active{_ELAPSED}", "fma": f"sm__pipe_fma_cycles_active{_ELAPSED}",
         "fp64": f"sm__pipe_fp64_cycles_active{_ELAPSED}",
         **{p: f"sm__inst_executed_pipe_{p}{_ELAPSED}" for p in ("alu", "lsu", "xu", "adu", "cbu", "tex", "uniform")}}
PIPES_SM90 = {**PIPES, "tma": f"sm__inst_executed_pipe_tma{_ELAPSED}"}
#: the matrix pipe's share as the SOL chart's breakdown shows it (elapsed cycles)
TENSOR = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"

#: Warp State Statistics: cycles per issued instruction, in total and by stall reason.
WARP_LATENCY = "smsp__average_warp_latency_per_inst_issued.ratio"
STALLS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
          "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected", "selected",
          "short_scoreboard", "sleeping", "tex_throttle", "wait")
STALLS_SM90 = (*STALLS, "gmma")


def stall_metric(reason: str) -> str:
    return f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"


def metrics(arch: str = "sm_90") -> list[str]:
    """Every raw metric the why columns read, for ``ncu --metrics`` (the ``why`` preset)."""
    sm90 = arch >= "sm_90"
    names = [m for m, _, _ in SOL.values()] + list(OCCUPANCY_LIMITS.values())
    names += list((PIPES_SM90 if sm90 else PIPES).values()) + [TENSOR, WARP_LATENCY]
    names += [stall_metric(r) for r in (STALLS_SM90 if sm90 else STALLS)]
    return list(dict.fromkeys(names))


def _value(get: dict[str, str], table: RawTable, metric: str) -> float | None:
    raw = number(get.get(metric, ""))
    return None if raw is None else raw * unit_scale(table.units.get(metric, ""))[0]


def occupancy_limiter(limits: dict[str, float | None]) -> tuple[str | None, float | None]:
    """(limiter names comma-joined on ties, blocks per SM) from the Block Limit rows."""
    known = {k: v for k, v in limits.items() if v is not None}
    if not known:
        return None, None
    least = min(known.values())
    return ",".join(k for k, v in known.items() if v == least), least


def top_stalls(values: dict[str, float | None], total: float | None, n: int = 3) -> str | None:
    """``"long_scoreboard 91%, wait 4%, ..."``: the top stall reasons (``selected``, the cycle a
    warp issues, is no stall) as shares of all warp cycles per issued instruction."""
    known = {k: v for k, v in values.items() if v is not None}
    whole = total if total else sum(known.values())
    if not known or not whole:
        return None
    ranked = sorted(((k, v) for k, v in known.items() if k != "selected" and v > 0), key=lambda kv: -kv[1])
    return ", ".join(f"{k} {100 * v / whole:.0f}%" for k, v in ranked[:n]) or None


def why_row(get: dict[str, str], table: RawTable) -> dict[str, object]:
    """One kernel's why columns from its raw-page cells (None where not collected)."""
    out: dict[str, object] = {col: _value(get, table, m) for col, (m, _, _) in SOL.items()}
    limiter, blocks = occupancy_limiter({k: _value(get, table, m) for k, m in OCCUPANCY_LIMITS.items()})
    out["occupancy_limiter"] = limiter
    out["lds_throughput_pct"] = None   # AMD's LDS; NVIDIA's shared memory is inside L1/TEX
    grid, sms = out["grid_size"], out["sm_count"]
    if blocks and grid is not None and sms:   # more digits than the page's rounded "0.03"
        out["waves_per_sm"] = float(grid) / (blocks * float(sms))
    pipes = {p: _value(get, table, m) for p, m in PIPES_SM90.items()}
    pipes = {p: v for p, v in pipes.items() if v is not None}
    out["top_pipe"] = max(pipes, key=lambda p: pipes[p]) if pipes else None
    out["top_pipe_pct"] = pipes[out["top_pipe"]] if pipes else None
    out["tensor_pipe_pct"] = _value(get, table, TENSOR)
    out["top_stalls"] = top_stalls({r: _value(get, table, stall_metric(r)) for r in STALLS_SM90},
                                   _value(get, table, WARP_LATENCY))
    for col in INT_COLUMNS:
        out[col] = None if out[col] is None else int(round(float(out[col])))
    if out["duration_ns"] is not None:
        out["duration_ns"] = float(out["duration_ns"])
    return out


SCHEMA = {**{c: pl.Float64 for c in SOL}, **{c: pl.Int64 for c in INT_COLUMNS},
          "occupancy_limiter": pl.String, "lds_throughput_pct": pl.Float64, "top_pipe": pl.String,
          "top_pipe_pct": pl.Float64, "tensor_pipe_pct": pl.Float64, "top_stalls": pl.String}


#: the ``why`` rows one ncu capture adds to ingest (labels, why columns, limiter)
WHY = {"graph_id": pl.String, "config": pl.String, "phase": pl.String, "iteration": pl.Int64, "device": pl.Int64,
       "dispatch_id": pl.Int64, "ncu_id": pl.Int64, "kernel": pl.String, **SCHEMA, "limiter": pl.String,
       "why": pl.String, "est_speedup_pct": pl.Float64}


def why_frame(table: RawTable) -> pl.DataFrame:
    """One row per profiled kernel: ``ncu_id`` (the raw page's ID) and the why columns."""
    rows = []
    for row in table.rows:
        get = {c: (row[i] if i < len(row) else "") for i, c in enumerate(table.columns)}
        ident = number(get.get("ID", ""))
        if ident is None:
            continue
        rows.append({"ncu_id": int(ident), **why_row(get, table)})
    return pl.DataFrame(rows, schema={"ncu_id": pl.Int64, **SCHEMA})


def kernel_metrics(table: RawTable) -> tuple[pl.DataFrame, int]:
    """(the ``kernel_metrics`` frame of a raw page, harness kernels dropped): labels, the why
    columns, ``limiter`` / ``why`` / ``est_speedup_pct``. Derived counter metrics (FLOPs...)
    are joined on by the caller where a profile computes them."""
    kernels, _ = ncu_csv.frames(table, [c for c in ("gpu__time_duration.sum",) if c in table.columns])
    labels = kernels.select("graph_id", "config", "phase", "iteration", "device", "dispatch_id",
                            pl.col("correlation_id").alias("ncu_id"), pl.col("name").alias("kernel"))
    frame = labels.join(why_frame(table), on="ncu_id", how="left")
    frame, dropped = drop_harness(frame, "kernel")
    return with_limiters(frame), dropped


def export_report(path: Path) -> str:
    """An ``.ncu-rep`` as its raw page, through ncu itself (the same export ``run`` uses);
    a one-line error when ncu is not on PATH or fails."""
    import subprocess

    from hipdnn_trace.errors import UserError
    from hipdnn_trace.profilers.ncu_tool import export_command, find_ncu

    try:
        done = subprocess.run(export_command(find_ncu(), path), capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"{path}: ncu could not export it: {exc}") from None
    if done.returncode != 0 or not ncu_csv.looks_like_ncu_raw(done.stdout[:200_000]):
        raise UserError(f"{path}: ncu could not export it: {' '.join(done.stderr.split())[:300]}")
    return done.stdout


def ingest_frames(path: Path, text: str | None = None) -> dict[str, pl.DataFrame]:
    """What ``hipdnn-trace ingest`` reads from an ncu raw CSV (or a report's exported ``text``):
    kernels, counters, agents, the why rows."""
    table = ncu_csv.read_raw_csv(path, text)
    kernels, counters = ncu_csv.frames(table)
    why, _ = kernel_metrics(table)
    return {"kernels": kernels, "counters": counters, "agents": ncu_csv.agents(table), "why": why}

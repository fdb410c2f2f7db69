"""GraphRun -> rows of the iterations, summary, validation, mismatches and ab frames."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from hipdnn_trace.bench.loop import Samples
from hipdnn_trace.bench.records import GraphRun
from hipdnn_trace.bench.stats import WARNING_SEPARATOR, cycles, row_warnings, timing_stats
from hipdnn_trace.device.peaks import Peaks
from hipdnn_trace.graph import umd
from hipdnn_trace.graph.ops import graph_bytes
from hipdnn_trace.results import schemas
from hipdnn_trace.results.speed_of_light import speed_of_light

#: Iterations whose SM clock is below this share of the measurement's max are flagged.
CLOCK_FLAG_RATIO = 0.9


def _key(run_id: str, g: GraphRun, config: str | None) -> dict[str, Any]:
    """The columns every frame starts with (schemas.KEY)."""
    return {"run_id": run_id, "graph": g.name, "graph_id": g.graph_id, "config": config}


def iterations_frame(run_id: str, g: GraphRun) -> pl.DataFrame:
    frames = []
    for c in g.configs:
        s = c.samples
        if s is None or not len(s):
            continue
        n = len(s)
        cols: dict[str, Any] = {
            "run_id": [run_id] * n, "graph": [g.name] * n, "graph_id": [g.graph_id] * n,
            "config": [c.config.name] * n, "source": [g.source] * n,
            "backend": [c.config.backend] * n, "engine": [c.engine] * n,
            "iteration": s.iteration, "phase": s.phase, "kernel_ms": s.kernel_ms, "host_ms": s.host_ms,
            "start_ns": s.start_ns,
        }
        for key, values in s.extra.items():
            cols[key] = values + [None] * (n - len(values))
        sm = cols.get("sm_clock_mhz")
        if sm is not None:
            arr = np.array([np.nan if v is None else v for v in sm], dtype=np.float64)
            peak = np.nanmax(arr) if np.isfinite(arr).any() else np.nan
            cols["clock_flag"] = [bool(v < CLOCK_FLAG_RATIO * peak) if np.isfinite(v) else None for v in arr]
            cols["cycles"] = [cycles(ms, mhz) for ms, mhz in zip(s.kernel_ms, sm)]
        frames.append(schemas.conform(pl.DataFrame(cols, strict=False), schemas.ITERATIONS))
    if not frames:
        return schemas.empty(schemas.ITERATIONS)
    return pl.concat(frames, how="vertical_relaxed")


def _dtype(g: GraphRun) -> str | None:
    if g.graph is None:
        return None
    outs = {t.data_type for t in g.graph.output_tensors}
    return ",".join(sorted(outs)) or g.graph.io_data_type


def first_call_ms(samples: Samples) -> float | None:
    """The cold first execution: host wall time (execute + synchronize) of the first iteration
    the loop ran: the first warmup one (or the first timed one with --warmup 0), found by its
    start time so the order samples are stored in does not matter."""
    if not len(samples):
        return None
    first = min(range(len(samples)), key=samples.start_ns.__getitem__)
    return float(samples.host_ms[first])


def summary_rows(run_id: str, g: GraphRun, peaks: Peaks | None = None) -> list[dict[str, Any]]:
    """One row per configuration; with ``peaks``, each also gets the graph's speed of light."""
    if g.unrunnable:
        return [{**_key(run_id, g, None), "source": g.source, "status": g.status, "error": g.error,
                 "validation": "skipped", "golden": g.golden}]
    flops, nbytes = g.graph_flops(), graph_bytes(g.graph)
    sol = speed_of_light(g.graph, peaks, flops, nbytes) if peaks is not None and g.graph is not None else None
    hipdnn = umd_columns(g, flops, nbytes)
    rows = []
    for c in g.configs:
        row: dict[str, Any] = {**_key(run_id, g, c.config.name), "source": g.source,
                               "backend": c.config.backend, "engine": c.engine, "dtype": _dtype(g),
                               "init_ms": c.init_ms, "e2e_ms": c.e2e_ms, "flops": flops, "bytes": nbytes,
                               "status": c.status, "validation": c.validation, "error": c.error,
                               "golden": g.golden, **hipdnn}
        if c.samples is not None:
            timed = c.samples.statistic_kernel_ms()
            row.update(timing_stats(timed))
            n_throttled = sum(c.samples.throttled_timed())
            row["n_throttled"] = n_throttled
            row["warnings"] = WARNING_SEPARATOR.join(row_warnings(timed, n_throttled)) or None
            host = [h for p, h in zip(c.samples.phase, c.samples.host_ms) if p == "timed"]
            row["host_median"] = float(np.median(host)) if host else None
            for key in ("span_ms", "latency_ms"):
                values = [v for v in c.samples.extra.get(key, []) if v is not None and np.isfinite(v)]
                row[key] = float(np.median(values)) if values else None
            row["kernel_source"] = getattr(c.samples, "timing", {}).get("kernel_ms")
            row["first_call_ms"] = first_call_ms(c.samples)
            median = row.get("median")
            if median:
                row["tflops"] = flops / (median * 1e-3) / 1e12 if flops else None
                row["gbps"] = nbytes / (median * 1e-3) / 1e9 if nbytes else None
        if sol is not None:
            row["sol_ms"], row["sol_bound"] = sol.ms, sol.bound
            median = row.get("median")
            row["sol_share"] = sol.ms / median if median and sol.ms else None
        rows.append(row)
    return rows


def umd_columns(g: GraphRun, flops: float, nbytes: float) -> dict[str, Any]:
    """hipDNN's own FLOP/byte model beside ours (summary columns umd_flops, umd_bytes, umd_flag)."""
    model = umd.graph_model(g.graph) if g.graph is not None else None
    if model is None:
        return {}
    flags = model.flags(flops, nbytes)
    return {"umd_flops": model.flops, "umd_bytes": model.bytes, "umd_flag": "; ".join(flags) or None}


def validation_rows(run_id: str, g: GraphRun) -> list[dict[str, Any]]:
    out = []
    for v in g.validation:
        out.append({**_key(run_id, g, v.config), "source": g.source, "output_uid": v.output_uid, "output": v.output,
                    "against": v.against, "dtype": v.dtype, "rtol": v.rtol, "atol": v.atol,
                    "max_abs": v.max_abs, "max_rel": v.max_rel, "mismatches": v.mismatches,
                    "nonfinite": v.nonfinite, "total": v.total, "worst_index": v.worst_index,
                    "passed": v.passed, "message": v.message})
    return out


def mismatch_rows(run_id: str, g: GraphRun) -> list[dict[str, Any]]:
    """The worst elements of every failing comparison: what a person reads first."""
    out = []
    for v in g.validation:
        if v.passed:
            continue
        for rank, e in enumerate(v.worst):
            out.append({**_key(run_id, g, v.config), "source": g.source, "output": v.output, "against": v.against,
                        "rank": rank, "index": str(list(e["index"])), "actual": e["actual"],
                        "expected": e["expected"], "reference": e["reference"],
                        "abs_err": e["abs_err"], "rel_err": e["rel_err"]})
    return out


def ab_rows(run_id: str, g: GraphRun) -> list[dict[str, Any]]:
    """The interleaved A/B's verdict: one row per graph that ran one (none otherwise)."""
    r = g.ab
    if r is None:
        return []
    return [{**_key(run_id, g, r.config_a), "source": g.source, "config_b": r.config_b, "ratio": r.ratio,
             "ci_low": r.ci_low, "ci_high": r.ci_high, "confidence": r.confidence, "verdict": r.verdict,
             "band": r.band, "rounds": r.rounds, "blocks": r.blocks, "block_iters": r.block_iters,
             "recreated": r.recreated, "stop": r.stop, "method": r.method}]

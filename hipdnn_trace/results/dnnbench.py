"""A run as ROCm dnn-benchmarking's result file (schema version 2), so dashboards and CI gates built on
that tool keep working.

Schema: ROCm/dnn-benchmarking ``docs/results-schema.md`` (every key present, ``null`` when it does not
apply; strict JSON; times in ms; ``median_ms`` the upper median ``sorted(samples)[n // 2]``; ``graph_id``
the first 12 hex digits of SHA-256 over the graph JSON with sorted keys and no spaces). What this tool
does not measure is ``null``, never invented: ``host`` percentiles, VRAM, clocks
objects, oracle, engine plugin versions. Rows map as: provider = our backend name, role ``engine``,
status ok/failed -> ``success``, unsupported -> ``skipped``, error -> ``error``; verdict from the
validation (passed, failed, or ``unchecked`` when none ran). ``first_call_ms`` is the summary's
(host wall time of the first execute + synchronize, as dnn-benchmarking's priming call).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

SCHEMA_VERSION = 2
FILE_NAME = "results.dnnbench.json"

_STATUS = {"ok": "success", "failed": "success", "unsupported": "skipped", "error": "error"}


def dnnbench_graph_id(source: str) -> str | None:
    """dnn-benchmarking's join key for a graph file (None when it cannot be read as JSON)."""
    try:
        graph = json.loads(Path(source).read_bytes())
    except (OSError, ValueError):
        return None
    canonical = json.dumps(graph, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def _f(value: Any) -> Any:
    """Strict JSON: NaN and infinities become null; numpy scalars plain Python."""
    if value is None:
        return None
    if isinstance(value, (np.floating, float)):
        return None if not math.isfinite(float(value)) else float(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


def kernel_stats(samples: list[float]) -> dict[str, Any] | None:
    """The ``stats`` object of dnn-benchmarking from timed samples (ms)."""
    if not samples:
        return None
    arr = np.sort(np.asarray(samples, dtype=np.float64))
    n = len(arr)
    mean = float(arr.mean())
    std = float(arr.std(ddof=1)) if n > 1 else 0.0
    p25, p75 = (float(np.percentile(arr, q)) for q in (25, 75))
    return {"n": n, "mean_ms": mean, "std_ms": std, "cv": _f(std / mean) if mean else None,
            "min_ms": float(arr[0]), "p25_ms": p25, "median_ms": float(arr[n // 2]), "p75_ms": p75,
            "p95_ms": float(np.percentile(arr, 95)) if n >= 20 else None, "max_ms": float(arr[-1]),
            "iqr_ms": p75 - p25}


def _correctness(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not rows:
        return None
    # a maximum is NaN where no element had finite values to measure (validate/compare.py): no number
    measured = lambda key: [r[key] for r in rows if _f(r[key]) is not None]   # noqa: E731
    worst = max(rows, key=lambda r: _f(r["max_rel"]) if _f(r["max_rel"]) is not None else -1.0)
    return {"match": all(bool(r["passed"]) for r in rows), "rtol": _f(worst["rtol"]), "atol": _f(worst["atol"]),
            "max_abs_diff": _f(max(measured("max_abs"))) if measured("max_abs") else None,
            "max_rel_diff": _f(max(measured("max_rel"))) if measured("max_rel") else None,
            "n_mismatch": int(sum(r["mismatches"] or 0 for r in rows)),
            "n_total": int(sum(r["total"] or 0 for r in rows)), "worst_output_uid": _f(worst["output_uid"]),
            "message": next((r["message"] for r in rows if not r["passed"] and r["message"]), None)}


def _verdict(status: str, validation: str | None) -> str:
    if status == "error":
        return "error"
    if status == "unsupported":
        return "skipped"
    return {"passed": "passed", "failed": "failed"}.get(validation or "", "unchecked")


def _row(s: dict[str, Any], samples: list[float], checks: list[dict[str, Any]], meta: dict[str, Any]) -> dict:
    timing = meta.get("timing") or {}
    kernel = kernel_stats(samples)
    median = kernel["median_ms"] if kernel else None
    flops, nbytes = s.get("flops"), s.get("bytes")
    return {
        "provider": s.get("backend"), "role": "engine",
        "engine": {"id": None, "name": s.get("engine") or s.get("config"), "version": "unavailable",
                   "plugin_path": None},
        "status": _STATUS.get(s.get("status") or "", "error"),
        "verdict": _verdict(s.get("status") or "", s.get("validation")),
        "message": s.get("error"), "started_at": None,
        "elapsed_s": _f((s.get("e2e_ms") or 0.0) / 1e3) if s.get("e2e_ms") is not None else None,
        "build_ms": _f(s.get("init_ms")),
        "timing": None if kernel is None else {
            "mode": "staged" if timing.get("staged") else ("host" if timing.get("timer") == "host" else "events"),
            "backend": s.get("backend"), "cache_mode": timing.get("cache"),
            "warmup_iters": timing.get("warmup"), "first_call_ms": _f(s.get("first_call_ms")), "capped": False,
            "fallback_reason": None, "timing_block": 1},
        "kernel": kernel,
        "host": None if s.get("host_median") is None else {
            "n": kernel["n"] if kernel else None, "mean_ms": None, "std_ms": None, "cv": None, "min_ms": None,
            "p25_ms": None, "median_ms": _f(s.get("host_median")), "p75_ms": None, "p95_ms": None,
            "max_ms": None, "iqr_ms": None},
        "metrics": {"flops": int(flops) if flops else None, "flops_partial": False,
                    "io_bytes": int(nbytes) if nbytes else None,
                    "tflops": _f(flops / median / 1e9) if flops and median else None,
                    "gbps": _f(nbytes / median / 1e6) if nbytes and median else None,
                    "workspace_bytes": None, "vram_mb": None, "clocks_before": None, "clocks_after": None},
        "correctness": _correctness(checks),
        "warnings": [], "oracle": None, "extra_metrics": None,
    }


def _environment(meta: dict[str, Any]) -> dict[str, Any]:
    versions = meta.get("versions") or {}
    gpu = meta.get("gpu") or {}
    return {"hostname": socket.gethostname(), "cpu_model": platform.processor() or None,
            "cpu_count": os.cpu_count(), "numa_nodes": None, "total_ram_gb": None,
            "kernel_version": platform.release(), "gpu_model": gpu.get("name") if isinstance(gpu, dict) else None,
            "gpu_arch": "unknown", "gpu_compute_units": None, "gpu_hbm_gb": None, "gpu_pcie_link": None,
            "amdgpu_driver_version": None, "gpu_power_cap_w": None, "gpu_max_sclk_mhz": None,
            "gpu_compute_partition": None, "rocm_version": versions.get("torch_hip"),
            "cuda_version": versions.get("torch_cuda"), "cudnn_version": versions.get("cudnn"),
            "hipdnn_version": versions.get("hipdnn_frontend"), "python_version": platform.python_version(),
            "torch_version": versions.get("torch"), "amdsmi_available": False, "selection_env": None,
            "end_of_run": {"host_rss_mb": None, "host_ram_available_mb": None, "vram_used_mb": None,
                           "vram_total_mb": None}}


def to_dnnbench(meta: dict[str, Any], summary: pl.DataFrame, iterations: pl.DataFrame,
                validation: pl.DataFrame) -> dict[str, Any]:
    """The schema-v2 result object of a run directory's frames and run.json."""
    from hipdnn_trace import __version__

    timed = iterations.filter(pl.col("phase") == "timed") if iterations.height else iterations
    samples: dict[tuple, list[float]] = {}
    for r in timed.select("graph_id", "config", "kernel_ms").iter_rows():
        if r[2] is not None:
            samples.setdefault((r[0], r[1]), []).append(float(r[2]))
    checks: dict[tuple, list[dict]] = {}
    for r in validation.iter_rows(named=True):
        if r["against"] == "reference" or r["against"] == "golden":
            checks.setdefault((r["graph_id"], r["config"]), []).append(r)
    graphs: list[dict[str, Any]] = []
    by_graph: dict[str, dict[str, Any]] = {}
    for s in summary.iter_rows(named=True):
        key = s["graph_id"] or s["source"]
        if key not in by_graph:
            status = "error" if s["status"] == "error" and not s["config"] else "ok"
            by_graph[key] = {"graph_id": dnnbench_graph_id(s["source"]) if s["source"] else None,
                             "graph_name": s["graph"], "graph_path": s["source"], "status": status,
                             "error": s["error"] if status == "error" else None, "message": None, "results": []}
            graphs.append(by_graph[key])
        if s["config"]:
            by_graph[key]["results"].append(_row(s, samples.get((s["graph_id"], s["config"]), []),
                                                 checks.get((s["graph_id"], s["config"]), []), meta))
    rows = [r for g in graphs for r in g["results"]]
    count = lambda v: sum(r["verdict"] == v for r in rows)   # noqa: E731
    complete = meta.get("status") == "complete"
    timing = meta.get("timing") or {}
    validation_cfg = meta.get("validation") or {}
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "hipdnn-trace", "version": __version__},
        "run": {"started_at": meta.get("created"),
                "finished_at": datetime.now(UTC).isoformat(timespec="seconds") if complete else None,
                "complete": complete, "argv": meta.get("argv") or [],
                "config": {"backend": ",".join(c.get("backend", "") for c in meta.get("configs") or []),
                           "engine_filter": None, "plugin_paths": None, "warmup_iters": timing.get("warmup"),
                           "iters": timing.get("iters"), "min_time_ms": timing.get("min_time_ms"),
                           "cache_mode": timing.get("cache"), "timing_block": 1, "seed": meta.get("seed"),
                           "validate": "float64" if validation_cfg.get("against") == "reference" else None,
                           "rtol": validation_cfg.get("rtol"), "atol": validation_cfg.get("atol"),
                           "oracle_mode": "off", "autotune": False, "cache_dir": None,
                           "pytorch_sdpa_backend": None, "pytorch_rocm_fa_library": None, "metrics_tier": "basic",
                           "profiling": {"pmc": None, "emit_trace": None, "perf": False, "roofline": False}}},
        "environment": _environment(meta),
        "summary": {"graphs": len(graphs), "rows": len(rows), "passed": count("passed"),
                    "unchecked": count("unchecked"), "failed": count("failed"), "skipped": count("skipped"),
                    "errors": count("error"), "graph_errors": sum(g["status"] == "error" for g in graphs),
                    "no_engine_graphs": 0},
        "graphs": graphs,
    }

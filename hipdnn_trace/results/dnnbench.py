"""A run as ROCm dnn-benchmarking's result file (schema version 2), so dashboards and CI gates built on
that tool keep working.

Layout: ROCm/dnn-benchmarking @ 03382e30, ``src/dnn_benchmarking/reporting/suite_results.py`` (its key
tuples ``RUN_CONFIG_KEYS``, ``PROFILING_KEYS``, ``ENVIRONMENT_KEYS``, ``ROW_COLUMNS`` and the row's
``to_dict``) and ``docs/usage.md``. Every key present, ``null`` when it does not apply; strict JSON; every
float rounded to 6 significant digits (its ``FLOAT_DIGITS``); times in ms; ``median_ms`` the upper median
``sorted(samples)[n // 2]``; ``graph_id`` the first 12 hex digits of SHA-256 over the graph JSON with
sorted keys and no spaces. A row has ``runtime`` (our backend), ``role`` ``engine``, ``verdict``,
``warnings``, ``metrics`` (``flops`` null when any node has no FLOP formula, so a partial count is never
reported) and the plan in ``ootb`` (``build_ms``, ``timing``, ``kernel``, ``host``, ``tflops``, ``gbps``,
``correctness``; null unless the row ran), with ``oracle`` and ``oracle_error`` beside it: null, except in
a ``run --oracle`` run, where the tuned twin's row (``NAME#tuned``) is not a row of its own but its ootb
row's ``oracle`` (the same plan object plus ``tuning_available``; upstream ``OracleResult.to_dict``,
``suite_results.py`` @ 03382e30) or, when it did not run, ``oracle_error``. ``warnings`` holds upstream's
words (``noisy: IQR 6.2% of median``, ``outlier: max 2.3x median``, ``throttled``; its
``reporting/statistics.py`` ``noise_warnings`` and ``execution/suite_runner.py`` ``_measure_row``), from the
summary's ``warnings``; ``kernel``/``host`` leave out the samples flagged throttled as the summary does;
``metrics.clocks_after`` holds the last timed sample's SM and memory clock (``sclk_mhz``, ``mclk_mhz``) where
clocks were sampled. What this tool does not measure is ``null``, never invented: power, temperature, the
SMU's throttle status, VRAM, engine ids and plugin versions.
``results.dnnbench.csv`` holds one line per row with upstream's ``ROW_COLUMNS``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import platform
import socket
from datetime import UTC, datetime
from typing import Any

import numpy as np
import polars as pl

from hipdnn_trace import read_gate
from hipdnn_trace.bench.stats import WARNING_SEPARATOR
from hipdnn_trace.graph import ops
from hipdnn_trace.results import schemas
from hipdnn_trace.results.metadata import cpu_model
from hipdnn_trace.results.oracle import pairs_of

SCHEMA_VERSION = 2
FILE_NAME = "results.dnnbench.json"
CSV_NAME = "results.dnnbench.csv"
#: significant digits of every float in the file (upstream FLOAT_DIGITS)
FLOAT_DIGITS = 6

RUN_CONFIG_KEYS = ("runtime", "engine_filter", "plugin_paths", "warmup_iters", "iters", "min_time_ms",
                   "cache_mode", "timing_block", "seed", "validate", "rtol", "atol", "oracle", "autotune",
                   "hipdnn_cache_dir", "pytorch_sdpa_backend", "pytorch_rocm_fa_library", "metrics", "profiling")
ENVIRONMENT_KEYS = ("hostname", "cpu_model", "cpu_count", "numa_nodes", "total_ram_gb", "kernel_version",
                    "gpu_model", "gpu_arch", "gpu_compute_units", "gpu_hbm_gb", "gpu_pcie_link",
                    "amdgpu_driver_version", "gpu_power_cap_w", "gpu_max_sclk_mhz", "gpu_compute_partition",
                    "rocm_version", "cuda_version", "cudnn_version", "hipdnn_version", "python_version",
                    "torch_version", "amdsmi_available", "selection_env")
ROW_COLUMNS = ("gpu_arch", "graph_name", "graph_id", "runtime", "role", "engine_id", "engine_name", "status",
               "verdict", "kernel_median_ms", "kernel_iqr_pct", "host_median_ms", "samples", "timing_mode",
               "cache_mode", "timing_block", "seed", "tflops", "gbps", "workspace_bytes", "max_abs_diff",
               "message")

_STATUS = {"ok": "success", "failed": "success", "unsupported": "skipped", "error": "error"}


def _graph_json(source: str) -> Any:
    try:
        return json.loads(read_gate.read_bytes(source, read_gate.GRAPH))
    except (read_gate.ReadRefused, ValueError, RecursionError):
        return None


def dnnbench_graph_id(source: str) -> str | None:
    """dnn-benchmarking's join key for a graph file (None when it cannot be read as JSON)."""
    graph = _graph_json(source)
    if graph is None:
        return None
    canonical = json.dumps(graph, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def every_node_counted(source: str) -> bool:
    """Whether each node of the graph file has a FLOP formula: upstream reports no FLOP count
    rather than a partial one. A file that cannot be read counts as not known."""
    graph = _graph_json(source)
    nodes = graph.get("nodes") if isinstance(graph, dict) else None
    if not isinstance(nodes, list) or not nodes:
        return False
    return all(isinstance(n, dict) and ops.has_flop_formula(str(n.get("type"))) for n in nodes)


def rounded(value: Any) -> Any:
    """Strict JSON with upstream's precision: floats to 6 significant digits, NaN and infinities
    null, numpy scalars plain Python, recursively through dicts and lists."""
    if isinstance(value, (float, np.floating)):
        return float(f"{float(value):.{FLOAT_DIGITS}g}") if math.isfinite(float(value)) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v) for v in value]
    return value


def kernel_stats(samples: list[float]) -> dict[str, Any] | None:
    """The ``kernel``/``host`` stats object of dnn-benchmarking from timed samples (ms)."""
    if not samples:
        return None
    arr = np.sort(np.asarray(samples, dtype=np.float64))
    n = len(arr)
    p25, p75, p95 = (float(v) for v in np.percentile(arr, [25, 75, 95]))
    return {"n": n, "mean_ms": float(arr.mean()), "std_ms": float(arr.std(ddof=1)) if n > 1 else 0.0,
            "min_ms": float(arr[0]), "p25_ms": p25, "median_ms": float(arr[n // 2]), "p75_ms": p75,
            "p95_ms": p95 if n >= 20 else None, "max_ms": float(arr[-1])}


def _f(value: Any) -> float | None:
    """A finite float, else None (a maximum over no finite element is NaN: no number to write)."""
    if value is None or not math.isfinite(float(value)):
        return None
    return float(value)


def _correctness(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not rows:
        return None
    # a maximum is NaN where no element had finite values to measure (validate/compare.py): no number
    measured = lambda key: [r[key] for r in rows if _f(r[key]) is not None]
    worst = max(rows, key=lambda r: _f(r["max_rel"]) if _f(r["max_rel"]) is not None else -1.0)
    return {"match": all(bool(r["passed"]) for r in rows), "rtol": _f(worst["rtol"]), "atol": _f(worst["atol"]),
            "max_abs_diff": _f(max(measured("max_abs"))) if measured("max_abs") else None,
            "max_rel_diff": _f(max(measured("max_rel"))) if measured("max_rel") else None,
            "n_mismatch": int(sum(r["mismatches"] or 0 for r in rows)),
            "n_total": int(sum(r["total"] or 0 for r in rows)), "worst_output_uid": worst["output_uid"],
            "message": next((r["message"] for r in rows if not r["passed"] and r["message"]), None)}


def _verdict(status: str, validation: str | None) -> str:
    if status == "error":
        return "error"
    if status == "unsupported":
        return "skipped"
    return {"passed": "passed", "failed": "failed"}.get(validation or "", "unchecked")


def _session(meta: dict[str, Any], config: str | None, graph: str | None) -> dict[str, Any]:
    """What run.json's "sessions" recorded for this configuration on this graph (timer, workspace)."""
    entry = (meta.get("sessions") or {}).get(config) or {}
    return {**(entry.get("method") or {}), **((entry.get("graphs") or {}).get(graph) or {})}


def _timing(s: dict[str, Any], meta: dict[str, Any], kernel: dict[str, Any]) -> dict[str, Any]:
    timing = meta.get("timing") or {}
    session = _session(meta, s.get("config"), s.get("graph"))
    timer = session.get("timer") or timing.get("timer")
    mode = "host" if timer == "host" else ("staged" if timing.get("staged") else "events")
    return {"mode": mode, "timer": timer, "warmup_iters": timing.get("warmup"),
            "first_call_ms": s.get("first_call_ms"), "capped": False,
            "fallback_reason": session.get("timing_fallback"), "samples": kernel["n"]}


def _plan(s: dict[str, Any], flops: float | None, samples: dict[str, Any],
          checks: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    """The ``ootb`` object: how the row's one plan was built, timed and checked."""
    kernel = kernel_stats(samples.get("kernel_ms", []))
    median = kernel["median_ms"] if kernel else None
    nbytes = s.get("bytes")
    return {"build_ms": s.get("init_ms"),
            "timing": None if kernel is None else _timing(s, meta, kernel),
            "kernel": kernel, "host": kernel_stats(samples.get("host_ms", [])),
            "workspace_bytes": _session(meta, s.get("config"), s.get("graph")).get("workspace_bytes"),
            "tflops": flops / median / 1e9 if flops and median else None,
            "gbps": nbytes / median / 1e6 if nbytes and median else None,
            "correctness": _correctness(checks)}


def _row(s: dict[str, Any], flops: float | None, samples: dict[str, Any],
         checks: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    """One row; ``flops`` is None when the graph has a node without a FLOP formula."""
    status = _STATUS.get(s.get("status") or "", "error")
    return {
        "runtime": s.get("backend"), "role": "engine",
        "engine": {"id": None, "name": s.get("engine") or s.get("config"), "version": "unavailable"},
        "status": status, "verdict": _verdict(s.get("status") or "", s.get("validation")),
        "message": s.get("error"), "started_at": None,
        "elapsed_s": s["e2e_ms"] / 1e3 if s.get("e2e_ms") is not None else None,
        "metrics": {"flops": int(flops) if flops else None,
                    "io_bytes": int(s["bytes"]) if s.get("bytes") else None, "clocks_after": _clocks_after(samples)},
        "ootb": _plan(s, flops, samples, checks, meta) if status == "success" else None,
        "oracle": None, "oracle_error": None,
        "warnings": s["warnings"].split(WARNING_SEPARATOR) if s.get("warnings") else [], "extra_metrics": None,
    }


def _clocks_after(samples: dict[str, Any]) -> dict[str, Any] | None:
    """Upstream's ``clocks_after`` (amd-smi after the timed loop) from the last timed sample's clocks; null
    where none were sampled. Power, temperature and the SMU's throttle status are not read here."""
    last = samples.get("clocks_after")
    if not last or last[0] is None:
        return None
    return {"sclk_mhz": last[0], "mclk_mhz": last[1], "power_w": None, "temp_hotspot_c": None,
            "throttle_status": None}


def _environment(meta: dict[str, Any]) -> dict[str, Any]:
    versions = meta.get("versions") or {}
    gpu = meta.get("gpu") if isinstance(meta.get("gpu"), dict) else {}
    machine = meta.get("machine") or {}
    found = {"hostname": machine.get("host") or socket.gethostname(),
             "cpu_model": machine.get("cpu") or cpu_model(),   # /proc/cpuinfo "model name", as upstream
             "cpu_count": machine.get("cpus") or os.cpu_count(), "kernel_version": platform.release(),
             "gpu_model": gpu.get("name"), "gpu_arch": "unknown", "rocm_version": versions.get("torch_hip"),
             "cuda_version": versions.get("torch_cuda"), "cudnn_version": versions.get("cudnn"),
             "hipdnn_version": versions.get("hipdnn_frontend"),
             "python_version": versions.get("python") or platform.python_version(),
             "torch_version": versions.get("torch"), "amdsmi_available": False}
    return {**dict.fromkeys(ENVIRONMENT_KEYS), **found}


def _run_config(meta: dict[str, Any]) -> dict[str, Any]:
    timing = meta.get("timing") or {}
    validation = meta.get("validation") or {}
    found = {"runtime": ",".join(sorted({c.get("backend", "") for c in meta.get("configs") or []})) or None,
             "warmup_iters": timing.get("warmup"), "iters": timing.get("iters"),
             "min_time_ms": timing.get("min_time_ms"), "cache_mode": timing.get("cache"), "timing_block": 1,
             "seed": meta.get("seed"),
             "validate": "float64" if validation.get("against") == "reference" else None,
             "rtol": validation.get("rtol"), "atol": validation.get("atol"), "oracle": bool(pairs_of(meta)),
             "autotune": False,
             "metrics": True,   # FLOPs, bytes and rates are always computed here
             "profiling": {"pmc": None, "trace": False, "perf": False, "roofline": False}}
    return {**dict.fromkeys(RUN_CONFIG_KEYS), **found}


def _samples(iterations: pl.DataFrame, keep_throttled: bool) -> dict[tuple[Any, Any], dict[str, Any]]:
    """Timed kernel and host samples per (graph_id, config), throttled ones left out as the summary's
    statistic leaves them (``bench.loop.Samples.statistic_kernel_ms``), and the last sample's clocks."""
    out: dict[tuple[Any, Any], dict[str, Any]] = {}
    if not iterations.height:
        return out
    timed = (schemas.conform(iterations, schemas.ITERATIONS).filter(pl.col("phase") == "timed")
             .with_columns(pl.col("throttled").fill_null(False)))
    grouped: dict[tuple[Any, Any], list[tuple[Any, ...]]] = {}
    for row in timed.select("graph_id", "config", "kernel_ms", "host_ms", "throttled", "sm_clock_mhz",
                            "mem_clock_mhz").iter_rows():
        grouped.setdefault((row[0], row[1]), []).append(row[2:])
    for key, rows in grouped.items():
        flagged = [r[2] for r in rows]
        if any(flagged) and not all(flagged) and not keep_throttled:
            rows = [r for r in rows if not r[2]]
        out[key] = {"kernel_ms": [float(r[0]) for r in rows if r[0] is not None],
                    "host_ms": [float(r[1]) for r in rows if r[1] is not None],
                    "clocks_after": (rows[-1][3], rows[-1][4])}
    return out


def _checks(validation: pl.DataFrame) -> dict[tuple[Any, Any], list[dict[str, Any]]]:
    out: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for r in validation.iter_rows(named=True):
        if r["against"] in ("reference", "golden"):
            out.setdefault((r["graph_id"], r["config"]), []).append(r)
    return out


def _available(oracle: pl.DataFrame | None) -> dict[tuple[Any, Any], Any]:
    """(graph_id, tuned config) -> whether there was anything to tune (the oracle frame's column)."""
    if oracle is None or not oracle.height:
        return {}
    columns = oracle.select("graph_id", "tuned_config", "tuning_available")
    return {(gid, cfg): ok for gid, cfg, ok in columns.iter_rows()}


def _attach_oracle(row: dict[str, Any], tuned: dict[str, Any], available: bool | None) -> None:
    """The tuned twin's plan as the ootb row's ``oracle`` object (upstream ``OracleResult.to_dict``:
    the plan object plus ``tuning_available``), or why there is none as ``oracle_error``."""
    if tuned["ootb"] is not None:
        row["oracle"] = {**tuned["ootb"], "tuning_available": True if available is None else bool(available)}
    else:
        row["oracle_error"] = tuned["message"] or f"tuned plan {tuned['status']}"


def _graphs(meta: dict[str, Any], summary: pl.DataFrame, iterations: pl.DataFrame,
            validation: pl.DataFrame, oracle: pl.DataFrame | None = None) -> list[dict[str, Any]]:
    keep = bool(((meta.get("clocks") or {}).get("throttle") or {}).get("keep"))
    samples, checks = _samples(iterations, keep), _checks(validation)
    graphs: list[dict[str, Any]] = []
    by_graph: dict[str, dict[str, Any]] = {}
    counted: dict[str, bool] = {}
    ootb_of = {tuned: ootb for ootb, tuned in pairs_of(meta)}   # --oracle: a tuned row is its ootb row's oracle
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    twins: list[tuple[str, str, Any, dict[str, Any]]] = []
    for s in summary.iter_rows(named=True):
        key = s["graph_id"] or s["source"]
        if key not in by_graph:
            status = "error" if s["status"] == "error" and not s["config"] else "ok"
            by_graph[key] = {"graph_id": dnnbench_graph_id(s["source"]) if s["source"] else None,
                             "graph_name": s["graph"], "graph_path": s["source"], "status": status,
                             "error": s["error"] if status == "error" else None, "message": None, "results": []}
            counted[key] = bool(s["source"]) and every_node_counted(s["source"])
            graphs.append(by_graph[key])
        if s["config"]:
            flops = s.get("flops") if counted[key] else None
            row = _row(s, flops, samples.get((s["graph_id"], s["config"]), {}),
                       checks.get((s["graph_id"], s["config"]), []), meta)
            if s["config"] in ootb_of:
                twins.append((key, s["config"], s["graph_id"], row))
                continue
            rows[(key, s["config"])] = row
            by_graph[key]["results"].append(row)
    available = _available(oracle)
    for key, name, graph_id, tuned in twins:
        if (key, ootb_of[name]) in rows:
            _attach_oracle(rows[(key, ootb_of[name])], tuned, available.get((graph_id, name)))
    return graphs


def to_dnnbench(meta: dict[str, Any], summary: pl.DataFrame, iterations: pl.DataFrame,
                validation: pl.DataFrame, oracle: pl.DataFrame | None = None) -> dict[str, Any]:
    """The schema-v2 result object of a run directory's frames and run.json, rounded as upstream."""
    from hipdnn_trace import __version__

    graphs = _graphs(meta, summary, iterations, validation, oracle)
    rows = [r for g in graphs for r in g["results"]]
    count = lambda v: sum(r["verdict"] == v for r in rows)
    complete = meta.get("status") == "complete"
    return rounded({
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "hipdnn-trace", "version": __version__},
        "run": {"started_at": meta.get("created"),
                "finished_at": datetime.now(UTC).isoformat(timespec="seconds") if complete else None,
                "complete": complete, "argv": meta.get("argv") or [], "config": _run_config(meta)},
        "environment": _environment(meta),
        "summary": {"graphs": len(graphs), "rows": len(rows), "passed": count("passed"),
                    "unchecked": count("unchecked"), "failed": count("failed"), "skipped": count("skipped"),
                    "errors": count("error"), "graph_errors": sum(g["status"] == "error" for g in graphs),
                    "no_engine_graphs": 0},
        "graphs": graphs,
    })


def _iqr_pct(kernel: dict[str, Any]) -> float | None:
    """CSV ``kernel_iqr_pct``: the IQR as a percentage of the median."""
    p25, median, p75 = kernel.get("p25_ms"), kernel.get("median_ms"), kernel.get("p75_ms")
    if p25 is None or p75 is None or not median:
        return None
    return rounded((p75 - p25) / median * 100.0)


def csv_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One dict per row with upstream's ``ROW_COLUMNS``; a graph without rows gives one line."""
    config = doc["run"]["config"]
    rows: list[dict[str, Any]] = []
    for g in doc["graphs"]:
        base = {**dict.fromkeys(ROW_COLUMNS), "gpu_arch": doc["environment"]["gpu_arch"],
                "graph_name": g["graph_name"], "graph_id": g["graph_id"], "seed": config["seed"],
                "cache_mode": config["cache_mode"], "timing_block": config["timing_block"]}
        if not g["results"]:
            rows.append({**base, "status": g["status"], "message": g["error"] or g["message"]})
        for r in g["results"]:
            ootb = r["ootb"] or {}
            kernel, host, timing = ootb.get("kernel") or {}, ootb.get("host") or {}, ootb.get("timing") or {}
            rows.append({**base, "runtime": r["runtime"], "role": r["role"], "engine_id": r["engine"]["id"],
                         "engine_name": r["engine"]["name"], "status": r["status"], "verdict": r["verdict"],
                         "kernel_median_ms": kernel.get("median_ms"), "kernel_iqr_pct": _iqr_pct(kernel),
                         "host_median_ms": host.get("median_ms"), "samples": timing.get("samples"),
                         "timing_mode": timing.get("mode"), "tflops": ootb.get("tflops"), "gbps": ootb.get("gbps"),
                         "workspace_bytes": ootb.get("workspace_bytes"),
                         "max_abs_diff": (ootb.get("correctness") or {}).get("max_abs_diff"),
                         "message": r["message"]})
    return rows


def to_csv(doc: dict[str, Any]) -> str:
    """The CSV twin of the JSON file (upstream ``-o results.csv``): empty cells for null."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=ROW_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_rows(doc))
    return buffer.getvalue()

"""Synthetic run directories in the harness's documented format (run.json, summary.csv,
summary.json, iterations.parquet, validation.csv), so compare/report tests need no
harness run. Samples are drawn from a seeded generator given per graph."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from hipdnn_trace.results import schemas

TIMING = {
    "timer": "host",
    "cache": "warm",
    "warmup": 3,
    "iters": 50,
    "min_time_ms": 0.0,
    "max_rel_ci": None,
    "staged": False,
    "cuda_graph": False,
    "clock_control": None,
}


def graph_id(name: str) -> str:
    return f"id-{name}"


def write_run(
    root: Path,
    run_id: str,
    samples: Mapping[str | tuple[str, str, str], Sequence[float] | None],
    *,
    warmup: Mapping[str, Sequence[float]] | None = None,
    timing: Mapping[str, Any] | None = None,
    validation: Sequence[Mapping[str, Any]] = (),
    status: str = "complete",
    clock_flags: Mapping[str, Sequence[bool]] | None = None,
    flops: float | None = 2.0e9,
    bytes_moved: float | None = 1.0e8,
) -> Path:
    """Write one run directory; ``samples`` keys are a graph name (config "cpu",
    engine "default") or (graph, config, engine); ``None`` samples = a failed graph."""
    path = root / run_id
    path.mkdir(parents=True)
    meta = {
        "run_id": run_id,
        "created": "2025-01-01T00:00:00+00:00",
        "status": status,
        "argv": ["run", "graphs/"],
        "versions": {"hipdnn_trace": "0.1.0", "python": "3.11", "numpy": np.__version__,
                     "polars": pl.__version__},
        "machine": {"host": "testhost", "cpu": "test cpu", "os": "Linux"},
        "gpu": None,
        "timing": {**TIMING, **(timing or {})},
        "seed": 0,
        "configs": [],
    }
    iterations: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    configs: dict[str, str] = {}
    clock = 0
    for key, values in samples.items():
        graph, config, engine = (key, "cpu", "default") if isinstance(key, str) else key
        configs[config] = engine
        base = {"run_id": run_id, "graph": graph, "graph_id": graph_id(graph), "config": config,
                "source": f"graphs/{graph}.json", "backend": "reference", "engine": engine}
        if values is None:
            summary.append({**base, "n": 0, "status": "failed", "error": "boom",
                            "validation": "skipped"})
            continue
        flags = list((clock_flags or {}).get(graph, []))
        for phase, seq in (("warmup", (warmup or {}).get(graph, [])), ("timed", values)):
            for i, v in enumerate(seq):
                clock += int(v * 1e6) + 1000
                iterations.append({**base, "iteration": i, "phase": phase, "kernel_ms": float(v),
                                   "host_ms": float(v) * 1.05, "start_ns": clock,
                                   "clock_flag": flags[i] if phase == "timed" and i < len(flags)
                                   else False})
        arr = np.asarray(values, dtype=float)
        med = float(np.median(arr))
        summary.append({
            **base, "dtype": "float32", "n": len(arr), "mean": float(arr.mean()),
            "std": float(arr.std()), "min": float(arr.min()), "p5": float(np.percentile(arr, 5)),
            "p25": float(np.percentile(arr, 25)), "median": med,
            "p75": float(np.percentile(arr, 75)), "p95": float(np.percentile(arr, 95)),
            "p99": float(np.percentile(arr, 99)), "max": float(arr.max()),
            "iqr": float(np.percentile(arr, 75) - np.percentile(arr, 25)),
            "cv": float(arr.std() / arr.mean()), "flops": flops, "bytes": bytes_moved,
            "tflops": None if flops is None else flops / (med * 1e-3) / 1e12,
            "gbps": None if bytes_moved is None else bytes_moved / (med * 1e-3) / 1e9,
            "status": "ok", "validation": "passed",
        })
    meta["configs"] = [{"name": c, "backend": "reference", "engine": e, "plugin_path": None}
                       for c, e in configs.items()]
    (path / "run.json").write_text(json.dumps(meta, indent=2))
    summary_df = schemas.frame(summary, schemas.SUMMARY)
    summary_df.write_csv(path / "summary.csv")
    (path / "summary.json").write_text(json.dumps(summary_df.to_dicts(), indent=1))
    schemas.frame(iterations, schemas.ITERATIONS).write_parquet(path / "iterations.parquet")
    rows = [{"run_id": run_id, "graph_id": graph_id(v["graph"]), "config": "cpu",
             "against": "reference", "output_uid": 1, "output": "y", "total": 100, **v}
            for v in validation]
    schemas.frame(rows, schemas.VALIDATION).write_csv(path / "validation.csv")
    return path


def lognormal(rng: np.random.Generator, median: float, cv: float, n: int) -> np.ndarray:
    """Timing-like samples: log-normal around ``median`` with coefficient of variation ~cv."""
    return median * np.exp(rng.normal(0.0, cv, n))


@pytest.fixture
def make_run(tmp_path: Path) -> Callable[..., Path]:
    return lambda run_id, samples, **kw: write_run(tmp_path, run_id, samples, **kw)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture
def timings(rng: np.random.Generator) -> Callable[[float, float, int], np.ndarray]:
    """``timings(median, cv, n)``: seeded log-normal timing samples."""
    return lambda median, cv, n: lognormal(rng, median, cv, n)

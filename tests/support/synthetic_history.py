"""A synthetic nightly history: N runs of G graphs written as real run folders (run.json + summary.csv in
the run writer's schema), with the noise this repository measured and a few injected steps.

Noise (docs/benchmarks.md, "What no peer does", interleaved A/A of graphs/perf on cuDNN with sessions
kept, i.e. two separate sessions like two nights): |log B/A| median 0.18%, 90th percentile 0.86%. A ratio
of two runs has sqrt(2) times one run's noise, so one run's log median scatters with a per-graph sigma drawn
log-normally (median 0.19%, 90th percentile ~0.6%), with Student-t (5 degrees of freedom) tails; each run
claims a median CI half the width that scatter gives (runs are more sure of themselves than night to night).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from hipdnn_trace.results import schemas


@dataclass(frozen=True)
class Injected:
    graph: int        # index of the graph
    night: int        # first run after the step
    ratio: float      # after / before


#: three steps, 2%, 5% and 20%, each on a few graphs (one of the 20% an improvement)
DEFAULT_STEPS = (Injected(3, 20, 1.02), Injected(41, 20, 1.02), Injected(77, 20, 1.02),
                 Injected(12, 35, 1.05), Injected(118, 35, 1.05),
                 Injected(150, 48, 1.20), Injected(190, 48, 1 / 1.2))


def graph_name(g: int) -> str:
    return f"synthetic_graph_{g:03d}"


def graph_id(g: int) -> str:
    return f"{g:04d}5eed00c0ffee"[:16]


def write_history(folder: Path, nights: int = 60, graphs: int = 200, steps=DEFAULT_STEPS,
                  seed: int = 20261128) -> list[Path]:
    """Write ``nights`` run folders under ``folder``; the library version moves at each step's night."""
    rng = np.random.default_rng(seed)
    sigma = np.exp(rng.normal(np.log(0.0019), 0.9, graphs))
    base = np.exp(rng.uniform(np.log(0.02), np.log(5.0), graphs))
    logs = np.log(base)[None, :] + rng.standard_t(5, (nights, graphs)) * sigma / np.sqrt(5 / 3)
    for s in steps:
        logs[s.night:, s.graph] += np.log(s.ratio)
    step_nights = sorted({s.night for s in steps})
    start = datetime(2026, 9, 1, 2, 0, 0)
    paths = []
    for n in range(nights):
        minor = sum(1 for at in step_nights if n >= at)
        run_id = f"nightly-{n:03d}"
        path = folder / run_id
        path.mkdir(parents=True)
        medians = np.exp(logs[n])
        half = 1.96 * 0.5 * sigma * medians
        meta = {"run_id": run_id, "created": (start + timedelta(days=n)).isoformat(), "status": "complete",
                "versions": {"hipdnn_trace": "0.1.0", "cudnn": f"9.{18 + minor}.0", "torch": "2.11.0"},
                "machine": {"host": "gpu-node-1", "cpu": "x86_64", "cpus": 64},
                "gpu": {"name": "NVIDIA H200", "driver": "580.159.04", "max_sm_clock_mhz": 1980}}
        (path / "run.json").write_text(json.dumps(meta))
        summary = pl.DataFrame({
            "run_id": [run_id] * graphs, "graph": [graph_name(g) for g in range(graphs)],
            "graph_id": [graph_id(g) for g in range(graphs)], "config": ["cudnn"] * graphs,
            "backend": ["cudnn"] * graphs, "engine": ["eng0"] * graphs, "dtype": ["bfloat16"] * graphs,
            "n": [200] * graphs, "median": medians, "median_ci_low": medians - half,
            "median_ci_high": medians + half, "mean": medians, "std": sigma * medians,
            "status": ["ok"] * graphs, "validation": ["passed"] * graphs})
        full = schemas.empty(schemas.SUMMARY).vstack(
            summary.select([pl.col(c).cast(t) if c in summary.columns else pl.lit(None, dtype=t).alias(c)
                            for c, t in schemas.SUMMARY.items()]))
        full.write_csv(path / "summary.csv")
        paths.append(path)
    return paths

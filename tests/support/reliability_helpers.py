"""Helpers of the reliability tests: small graph files and CLI subprocesses that know
the faulty test backend (``faulty_backend.py``, via ``HIPDNN_TRACE_EXTRA_BACKENDS``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.write import graph_to_json
from hipdnn_trace.results.rundir import load_run
from hipdnn_trace.trace import read_trace

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FAULTY_SPEC = "faulty_backend:FaultyBackend"

#: Columns that are the same in every run of the same graphs (everything but timings and run_id).
SUMMARY_KEYS = ["graph", "graph_id", "config", "source", "backend", "engine", "dtype", "n", "flops",
                "bytes", "status", "validation", "error"]
ITERATION_KEYS = ["graph", "graph_id", "config", "source", "backend", "engine", "iteration", "phase"]


def graph_json(name: str, dims: Sequence[int] = (2, 3, 4, 5), dtype: str = "float", mode: str = "add") -> dict:
    """A two-input pointwise graph (cheap on the reference) named ``name``."""
    b = GraphBuilder(name, io=dtype)
    x = b.tensor("x", dims)
    y = b.tensor("y", [1, dims[1], 1, 1])
    b.pointwise(mode, x, y, out="z")
    return graph_to_json(b.build())


def write_graphs(folder: Path, names: Sequence[str], **kw) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, name in enumerate(names):
        path = folder / f"{name}.json"
        # distinct sizes: distinct graph_ids even when names repeat a mode
        path.write_text(json.dumps(graph_json(name, dims=(2, 3 + i % 5, 4, 5 + i), **kw), indent=1))
        paths.append(path)
    return paths


def cli_env(**extra: str) -> dict[str, str]:
    """Environment of a ``python -m hipdnn_trace`` subprocess that knows the faulty backend."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["HIPDNN_TRACE_EXTRA_BACKENDS"] = f"faulty={FAULTY_SPEC}"
    # a commit per graph, as these tests' kill, lock and resume points expect (runs/measure.py COMMIT_EVERY_S)
    env["HIPDNN_TRACE_COMMIT_EVERY_S"] = "0"
    env.update(extra)
    return env


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None, **popen) -> subprocess.Popen:
    """Start ``hipdnn-trace`` as a subprocess (its own process group, so tests can signal it)."""
    return subprocess.Popen([sys.executable, "-m", "hipdnn_trace", *args], cwd=cwd, env=env or cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **popen)


def assert_same_results(a: Path, b: Path, *, trace: bool = True) -> None:
    """Two run directories hold the same rows, validation and trace graphs, timings aside."""
    ra, rb = load_run(a), load_run(b)
    assert ra.summary.select(SUMMARY_KEYS).equals(rb.summary.select(SUMMARY_KEYS))
    assert ra.iterations.select(ITERATION_KEYS).equals(rb.iterations.select(ITERATION_KEYS))
    for name in ("validation", "mismatches"):
        fa, fb = getattr(ra, name).drop("run_id"), getattr(rb, name).drop("run_id")
        assert fa.equals(fb), name
    if not trace:
        return
    ta, tb = read_trace(a / "trace.pftrace"), read_trace(b / "trace.pftrace")
    assert not ta.truncated and not tb.truncated
    graph_slices = [sorted(t.slices.filter(pl.col("name").str.starts_with("graph ")).get_column("name").to_list())
                    for t in (ta, tb)]
    assert graph_slices[0] == graph_slices[1]

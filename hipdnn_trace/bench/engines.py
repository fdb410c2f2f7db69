"""Choosing engines: by index or name, all of them, or the fastest (autotune).

Backends list what they can do; picking among those and timing candidates is
measurement, so it lives here and not in the backends.
"""

from __future__ import annotations

from hipdnn_trace.backends.base import Backend, Engine, RunOptions
from hipdnn_trace.bench.loop import LoopSettings, run_loop
from hipdnn_trace.errors import UserError
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.markers import Markers

AUTOTUNE_LOOP = LoopSettings(warmup=3, iters=10)


def select(backend: Backend, graph: Graph, selector: str, options: RunOptions) -> Engine:
    """The engine ``selector`` names: its index, its name, or whatever the backend resolves."""
    resolve = getattr(backend, "resolve_engine", None)
    if resolve is not None:
        engine = resolve(graph, selector, options)
        if engine is not None:
            return engine
    engines = backend.engines(graph, options)
    if not engines:
        raise UserError(f"backend {backend.name} has no engines to select (--engine {selector})")
    for e in engines:
        if str(e.index) == selector or e.name.lower() == selector.lower():
            return e
    names = ", ".join(f"{e.index}:{e.name}" for e in engines[:12])
    raise UserError(f"--engine {selector}: no such engine for this graph (have {names})")


def autotune(
    backend: Backend,
    graph: Graph,
    options: RunOptions,
    inputs: dict,
    markers: Markers,
) -> tuple[Engine | None, list[tuple[Engine, float | None, str]]]:
    """Time every engine briefly; return the fastest and each candidate's median (ms)."""
    candidates = backend.engines(graph, options)
    results: list[tuple[Engine, float | None, str]] = []
    best: tuple[float, Engine] | None = None
    for engine in candidates:
        try:
            session = backend.prepare(graph, engine, options)
        except Exception as exc:  # a plan that fails to build is just not a candidate
            results.append((engine, None, f"build failed: {exc}"))
            continue
        try:
            session.bind(inputs)
            samples, _ = run_loop(session, AUTOTUNE_LOOP, markers)
            timed = sorted(samples.timed_kernel_ms())
            median = float(timed[len(timed) // 2])
            results.append((engine, median, ""))
            if best is None or median < best[0]:
                best = (median, engine)
        except Exception as exc:
            results.append((engine, None, f"run failed: {exc}"))
        finally:
            session.close()
    return (best[1] if best else None), results

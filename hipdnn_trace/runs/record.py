"""The run.json a planned run starts with, built from its plan (results/metadata.py lays out the
common part), and the blocks the plan's resume and estimate add."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from hipdnn_trace import backends
from hipdnn_trace.bench import gpus as gpu_pool
from hipdnn_trace.bench.counter_rng import GENERATOR
from hipdnn_trace.bench.estimate import GraphEstimate
from hipdnn_trace.results.metadata import run_metadata
from hipdnn_trace.runs.estimates import suite_rates

if TYPE_CHECKING:
    from hipdnn_trace.runs.plan import GpuPins, RunPlan


def gpus_block(pins: GpuPins) -> dict[str, Any]:
    """run.json's ``gpus``: the GPUs, how each worker is pinned, and (filled as graphs finish) where
    each graph ran."""
    return {"devices": pins.devices, "variable": pins.variable,
            "visible": {str(p.index): p.visible for p in pins.pins},
            "cpus": {str(p.index): list(p.cpus) for p in pins.pins},
            "order": f"longest first: max(FLOPs / {gpu_pool.NOMINAL_FLOPS_PER_S:g}/s, "
                     f"bytes / {gpu_pool.NOMINAL_BYTES_PER_S:g}/s)",
            "graphs": {}}


def _timing(plan: RunPlan) -> dict[str, Any]:
    request, timing = plan.request, plan.timing
    return {"timer": timing.timer, "cache": request.cache,
            "warmup": request.warmup, "iters": request.iters, "min_time_ms": request.min_time_ms,
            "max_rel_ci": request.max_rel_ci, "staged": timing.options.timing == "staged",
            "timing": request.timing, "kernel_clock": timing.kernel_clock_note,
            "cuda_graph": request.cuda_graph, "clock_control": None, "markers": timing.markers.kind,
            # what --clocks asked; run.json's clocks: what held
            "clock_lock": None if request.clocks == "off" else request.clocks,
            "profiler": plan.profiler,
            "clocks": timing.clocks}


def _extra(plan: RunPlan) -> dict[str, Any]:
    request, cache = plan.request, plan.settings.reference_cache
    return {"graphs": [s.name for s in plan.sources], "shard": plan.shard,
            # --shard auto: the scheduler's variables it came from (not compared by --resume)
            "shard_from": dict(request.shard.variables) if request.shard and request.shard.variables else None,
            "validation": {"against": request.validate,
                           "golden": None if request.golden is None else str(request.golden),
                           "atol": request.atol, "rtol": request.rtol},
            "isolation": {"enabled": plan.timeout is not None, "graph_timeout_s": plan.timeout or None,
                          "child": "fresh per graph" if request.fresh_child else "resident",
                          **({"split": plan.split} if plan.split is not None else {})},
            **({"gpus": gpus_block(plan.gpus)} if plan.gpus is not None else {}),
            "max_reference_seconds": request.max_reference_seconds or None,
            "reference_cache": None if cache is None else {
                "folder": str(cache.folder), "max_bytes": cache.max_bytes, "graphs": {}},
            "reference_device": {"asked": request.reference_device, "used": plan.reference_device},
            "inputs": {"generator": GENERATOR}}   # --resume refuses another generator


def initial_meta(plan: RunPlan) -> dict[str, Any]:
    """run.json as the run starts: how the numbers will be made (the run's own command line, also
    when it came from hipdnn_trace.run() inside a script), the backends' versions and the GPU."""
    meta = run_metadata(run_id=plan.run_id, argv=["hipdnn-trace", "run", *plan.request.argv],
                        timing=_timing(plan), seed=plan.request.seed,
                        configs=[{"name": c.name, "backend": c.backend, "engine": c.engine,
                                  "plugin_path": c.plugin_path} for c in plan.configs],
                        extra=_extra(plan))
    for name in {c.backend for c in plan.configs}:
        try:
            meta["versions"].update(backends.get(name).versions())
            gpu_info = getattr(backends.get(name), "gpu_info", None)
            if meta.get("gpu") is None and gpu_info is not None:
                meta["gpu"] = gpu_info(plan.request.device)
        except Exception:   # a version probe never stops a run
            pass
    return meta


def resumed_meta(previous: dict[str, Any], meta: dict[str, Any], gpus: bool) -> dict[str, Any]:
    """``meta`` (already checked against ``previous`` by check_resumable) keeping where the graphs
    of the earlier part ran."""
    if gpus:
        meta["gpus"]["graphs"] = {**((previous.get("gpus") or {}).get("graphs") or {}), **meta["gpus"]["graphs"]}
    elif previous.get("gpus"):   # resumed on one GPU: run.json still says where the earlier part ran
        meta["gpus"] = previous["gpus"]
    return meta


def add_estimate(meta: dict[str, Any], estimates: list[GraphEstimate]) -> None:
    """run.json's ``estimate``: what was expected, beside what happened (breakdown.csv wall_ms)."""
    meta["estimate"] = {"seconds": round(sum(e.seconds for e in estimates), 3),
                        "graphs": {e.source: round(e.seconds, 3) for e in estimates},
                        "rates": asdict(suite_rates())}

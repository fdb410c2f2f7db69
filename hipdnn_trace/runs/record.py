"""The run.json record a planned run starts with (results/run_record.py's types), filled from its
plan, and what the plan's resume and estimate add."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from hipdnn_trace import backends
from hipdnn_trace.bench import gpus as gpu_pool
from hipdnn_trace.bench.counter_rng import GENERATOR
from hipdnn_trace.bench.estimate import GraphEstimate
from hipdnn_trace.bench.oracle import oracle_meta
from hipdnn_trace.results.run_record import (
    Estimate,
    Gpus,
    Inputs,
    Isolation,
    Oracle,
    ReferenceCache,
    ReferenceDevice,
    RunRecord,
    Timing,
    Validation,
)
from hipdnn_trace.runs.estimates import suite_rates

if TYPE_CHECKING:
    from hipdnn_trace.bench.pins import GpuPins
    from hipdnn_trace.runs.plan import RunPlan


def gpus_block(pins: GpuPins) -> Gpus:
    """run.json's ``gpus``: the GPUs, how each worker is pinned, and (filled as graphs finish) where
    each graph ran."""
    return Gpus(devices=pins.devices, variable=pins.variable,
                visible={str(p.index): p.visible for p in pins.pins},
                cpus={str(p.index): list(p.cpus) for p in pins.pins},
                order=f"longest first: max(FLOPs / {gpu_pool.NOMINAL_FLOPS_PER_S:g}/s, "
                      f"bytes / {gpu_pool.NOMINAL_BYTES_PER_S:g}/s)")


def _timing(plan: RunPlan) -> Timing:
    request, timing = plan.request, plan.timing
    return Timing(timer=timing.timer, cache=request.cache, warmup=request.warmup, iters=request.iters,
                  min_time_ms=request.min_time_ms, max_rel_ci=request.max_rel_ci,
                  staged=timing.options.timing == "staged", timing=request.timing,
                  kernel_clock=timing.kernel_clock_note, cuda_graph=request.cuda_graph, clock_control=None,
                  markers=timing.markers.kind, clock_lock=None if request.clocks == "off" else request.clocks,
                  profiler=plan.profiler, clocks=timing.clocks,
                  ab=None if plan.settings.ab_plan is None else asdict(plan.settings.ab_plan))


def initial_record(plan: RunPlan) -> RunRecord:
    """run.json as the run starts: how the numbers will be made (the run's own command line, also
    when it came from hipdnn_trace.run() inside a script), the backends' versions and the GPU."""
    request, cache = plan.request, plan.settings.reference_cache
    record = RunRecord.start(
        run_id=plan.run_id, argv=["hipdnn-trace", "run", *request.argv], timing=_timing(plan), seed=request.seed,
        configs=[{"name": c.name, "backend": c.backend, "engine": c.engine, "plugin_path": c.plugin_path}
                 for c in plan.configs],
        graphs=[s.name for s in plan.sources], shard=plan.shard,
        # --shard auto: the scheduler's variables it came from (not compared by --resume)
        shard_from=dict(request.shard.variables) if request.shard and request.shard.variables else None,
        validation=Validation(against=request.validate, golden=None if request.golden is None else str(request.golden),
                              atol=request.atol, rtol=request.rtol,
                              test_config=None if request.test_config is None else str(request.test_config)),
        isolation=Isolation(enabled=plan.timeout is not None, graph_timeout_s=plan.timeout or None,
                            child="fresh per graph" if request.fresh_child else "resident", split=plan.split),
        gpus=None if plan.gpus is None else gpus_block(plan.gpus),
        max_reference_seconds=request.max_reference_seconds or None,
        reference_cache=None if cache is None else ReferenceCache(folder=str(cache.folder), max_bytes=cache.max_bytes),
        reference_device=ReferenceDevice(asked=request.reference_device, used=plan.reference_device),
        inputs=Inputs(generator=GENERATOR),
        speed_of_light={"asked": request.peaks},   # RunWriter resolves the peaks and records them
        oracle=Oracle(**oracle_meta(plan.configs)) if request.oracle else None)
    isolated = plan.timeout is not None   # children import the libraries; each reports them as loaded
    for name in {c.backend for c in plan.configs}:
        try:
            backend = backends.get(name)
            light = getattr(backend, "package_versions", None) if isolated else None
            record.versions.update(light() if light is not None else backend.versions())
            gpu_info = getattr(backend, "gpu_info", None)
            if record.gpu is None and gpu_info is not None:
                record.gpu = gpu_info(request.device)
        except Exception:   # a version probe never stops a run
            pass
    return record


def resumed_record(previous: dict, record: RunRecord) -> RunRecord:
    """``record`` (already checked against ``previous`` by check_resumable) keeping where the graphs
    of the earlier part ran."""
    before = previous.get("gpus")
    if record.gpus is not None:
        record.gpus.graphs = {**((before or {}).get("graphs") or {}), **record.gpus.graphs}
    elif before:   # resumed on one GPU: run.json still says where the earlier part ran
        record.gpus = Gpus.from_json(before) if isinstance(before, dict) else before
    return record


def estimate_block(estimates: list[GraphEstimate]) -> Estimate:
    """run.json's ``estimate``: what was expected, beside what happened (breakdown.csv wall_ms)."""
    return Estimate(seconds=round(sum(e.seconds for e in estimates), 3),
                    graphs={e.source: round(e.seconds, 3) for e in estimates}, rates=asdict(suite_rates()))

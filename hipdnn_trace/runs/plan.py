"""``plan_run``: every decision of one ``run``, and every refusal, before any work or run folder.

A request becomes a ``RunPlan`` (the configurations, the graph sources left after --shard and --resume,
the settings, isolation, GPU pins, the resolved reference device, one timing decision, the run.json it
starts with), or one of the two runs that are not a suite: an ``ExternalProfile`` (the run re-runs
itself under ncu / rocprofv3 / rocprof) or an ``EngineListing`` (--engine list). ``measure.measure``
executes a plan; nothing there refuses a flag.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hipdnn_trace import backends
from hipdnn_trace.backends.base import RunOptions
from hipdnn_trace.backends.plan_cache import (
    OFF_OPTION as PLAN_CACHE_OFF,
    OPTION as PLAN_CACHE_OPTION,
    PlanCache,
    auto_folder as plan_cache_folder,
)
from hipdnn_trace.bench import shard as sharding
from hipdnn_trace.bench.config import ENGINE_LIST, Config, build_configs
from hipdnn_trace.bench.engine_config import load_engine_config
from hipdnn_trace.bench.estimate import GraphEstimate
from hipdnn_trace.bench.isolation import DEFAULT_TIMEOUT_S
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.bench.oracle import oracle_configs
from hipdnn_trace.bench.paired import ABPlan
from hipdnn_trace.bench.pins import GpuPins, pin_gpus
from hipdnn_trace.bench.reference_cache import ReferenceCache, auto_folder
from hipdnn_trace.bench.run_settings import RunSettings
from hipdnn_trace.bench.sampling import INTERVAL_S
from hipdnn_trace.bench.split import groups, needs_split
from hipdnn_trace.bench.verdict import reference_device
from hipdnn_trace.commands.argtypes import MAX_ATOL, MAX_RTOL
from hipdnn_trace.device.kernel_clock import KernelClock
from hipdnn_trace.errors import UserError
from hipdnn_trace.graph.sources import GraphSource, expand_counting_skipped
from hipdnn_trace.markers import select as select_markers
from hipdnn_trace.profilers.base import load as load_profiler
from hipdnn_trace.results.metadata import new_run_id
from hipdnn_trace.results.run_record import RunRecord
from hipdnn_trace.results.rundir import check_resumable, is_stranded, load_run
from hipdnn_trace.results.runlock import lock_run_dir
from hipdnn_trace.runs import record
from hipdnn_trace.runs.estimates import suite_estimates
from hipdnn_trace.runs.request import ResolvedDevice, RunRequest

#: profilers that collect hardware counters (the ones --profile-set chooses for)
COUNTER_PROFILERS = ("ncu", "rocprofv3", "rocprof")


@dataclass(frozen=True)
class ExternalProfile:
    """``--profile ncu|rocprofv3|rocprof``: the run re-runs itself as a child under the tool."""

    profiler: Any
    request: RunRequest


@dataclass(frozen=True)
class EngineListing:
    """``--engine list``: print each graph's engines, run nothing."""

    request: RunRequest
    sources: list[GraphSource]


@dataclass(frozen=True)
class TimingPlan:
    """How every configuration is timed: one decision for the timer, the event mode, the CUPTI
    kernel clock, the clock samplers and the markers."""

    timer: str                          # "host" (CPU reference) | "device-events"
    options: RunOptions                 # what each backend's prepare() gets
    kernel_clock: KernelClock | None
    kernel_clock_note: str              # run.json timing.kernel_clock: what happened and why
    samplers: tuple = ()                # NVML clock sampling (NVIDIA)
    clocks: dict[str, Any] | None = None   # run.json timing.clocks: the samplers' description
    markers: Any = None                 # the phase markers (markers.select)


@dataclass(frozen=True)
class RunPlan:
    """Everything ``measure`` needs, decided; see the module docstring."""

    request: RunRequest
    configs: list[Config]
    sources: list[GraphSource]          # left to run after --shard and --resume
    suite_size: int                     # graphs before --shard
    skipped_perf: int                   # graphs in 'perf' folders left out on the CPU reference
    shard: dict[str, Any] | None        # run.json's "shard" block
    folder: Path
    run_id: str
    resuming: bool
    stranded: bool                      # the folder --resume names holds nothing: start it afresh
    done: int                           # graphs already recorded in the resumed run
    vendor: str | None                  # the first configuration's GPU vendor that has one
    timing: TimingPlan
    settings: RunSettings
    timeout: float | None               # None: in process; else the per-graph timeout (0: none)
    split: list[list[str]] | None       # configurations that need processes of their own, by group
    gpus: GpuPins | None
    reference_device: ResolvedDevice
    profiler: str | None                # --profile / --profile-child: the profiler this process hosts
    estimates: list[GraphEstimate] | None = None
    record: RunRecord = field(default_factory=RunRecord)   # run.json as the run starts


def plan_run(request: RunRequest) -> RunPlan | ExternalProfile | EngineListing:
    """Decide everything about ``request``, refusing (UserError) before any work or run folder."""
    _refuse_flags(request)
    engine_config = None if request.test_config is None else load_engine_config(request.test_config)
    hooks: list = []
    wanted = request.profile_child or (request.profile if request.profile != "none" else None)
    if wanted is not None:
        profiler, kind = load_profiler(wanted)
        if kind == "external" and not request.profile_child:
            return ExternalProfile(profiler, request)
        if kind == "in-process":
            check_tool = getattr(profiler, "check_tool", None)
            if check_tool is not None:
                check_tool()   # a missing profiler library is one line before any work
            hooks.append(profiler)
    configs = build_configs(backend=request.backend, engine=request.engine, autotune=request.autotune,
                            a=request.a, b=request.b, a_path=request.a_path, a_id=request.a_id,
                            b_path=request.b_path, b_id=request.b_id)
    if request.oracle:   # NAME#ootb and NAME#tuned; refuses an A/B, an engine list, a backend with no tuned plan
        configs = oracle_configs(configs)
    interleaved = None if request.oracle else ab_plan(request, configs)   # the oracle's pair is not an A/B
    sources, skipped = _sources(request, configs)
    if request.engine == ENGINE_LIST:
        return EngineListing(request, sources)
    _refuse_folders_and_backends(request, configs)
    vendor = first_vendor(configs)
    profiling = bool(hooks) or bool(request.profile_child)
    gpus = gpu_pins(request, configs, vendor, profiling)
    timeout = isolation(request, configs, len(sources), profiling, gpus is not None)
    suite_size = len(sources)
    sources, shard, graph_ids = select(request, sources)
    if request.db and not request.profile_child:
        from hipdnn_trace.history.store import check_store

        check_store(request.db)   # a nightly whose store cannot be opened fails now, not after the suite
    folder, run_id, resuming, stranded = run_folder(request)
    timing = timing_plan(request, configs, vendor)
    timing = replace(timing, options=with_plan_cache(timing.options, plan_cache(request, configs),
                                                     off=request.plan_cache == "none"))
    reference_device = resolve_reference_device(request, reference_only(configs))
    split = split_groups(request, configs, timing.options)
    settings = RunSettings(loop=LoopSettings(warmup=request.warmup, iters=max(1, request.iters),
                                             min_time_ms=request.min_time_ms, max_rel_ci=request.max_rel_ci,
                                             max_iters=request.max_iters,
                                             throttle_threshold=request.throttle_threshold / 100,
                                             keep_throttled=request.keep_throttled),
                           options=timing.options, seed=request.seed, validate=request.validate,
                           golden=request.golden, atol=request.atol, rtol=request.rtol,
                           save_tensors=request.save_tensors, ab=len(configs) == 2 and not request.oracle,
                           hooks=hooks,
                           ab_plan=interleaved,
                           samplers=timing.samplers, allow_unknown=request.allow_unknown_fields,
                           kernel_clock=timing.kernel_clock, require_kernel_clock=request.timing == "kernel",
                           max_reference_s=request.max_reference_seconds,
                           reference_cache=reference_cache(request), reference_device=reference_device,
                           engine_config=engine_config)
    plan = RunPlan(request=request, configs=configs, sources=sources, suite_size=suite_size,
                   skipped_perf=skipped, shard=shard, folder=folder, run_id=run_id, resuming=resuming,
                   stranded=stranded, done=0, vendor=vendor, timing=timing, settings=settings, timeout=timeout,
                   split=split, gpus=gpus, reference_device=reference_device, profiler=wanted)
    for hook in hooks:
        hook.run_id = run_id
    return _with_record(plan, graph_ids)


def split_groups(request: RunRequest, configs: Sequence[Config], options: RunOptions) -> list[list[str]] | None:
    """The groups of configurations that need processes of their own (e.g. two hipDNN plugin builds:
    plugin paths are process-wide), by name; None when one process runs them all."""
    if not needs_split(configs, options):
        return None
    if request.isolate is False:
        raise UserError("these configurations need separate processes (process-wide plugin paths, or "
                        "--oracle's process-wide tuning); drop --no-isolate")
    return [[c.name for c in g] for g in groups(configs, options)]


def _with_record(plan: RunPlan, graph_ids: dict[str, str | None]) -> RunPlan:
    """The plan with the run.json it starts with, the graphs a resume left and their estimates;
    a resume that is not the same run, or whose graph changed, is refused here."""
    run_record = record.initial_record(plan)
    done: set[str] = set()
    if plan.resuming:
        previous = load_run(plan.folder).meta
        run_record = record.resumed_record(
            previous, RunRecord.from_json(check_resumable(previous, run_record.to_json())))
        done = finished(plan.folder, graph_ids)
    sources = [s for s in plan.sources if s.name not in done]
    plan = replace(plan, sources=sources, done=len(done), record=run_record)
    if plan.gpus is None:   # a --gpus pool runs graphs side by side, longest first: a serial estimate would mislead
        estimates = suite_estimates(sources, plan.configs, plan.settings, plan.timeout,
                                    plan.request.fresh_child)
        plan = replace(plan, estimates=estimates)
        run_record.estimate = record.estimate_block(estimates)
    return plan


def _refuse_flags(request: RunRequest) -> None:
    """Flag combinations that are never a run (and a HIPDNN_TRACE_FLOAT64_GFLOPS that is no rate)."""
    from hipdnn_trace.backends.reference.rate import override

    override()
    for flag, value, top in (("--rtol", request.rtol, MAX_RTOL), ("--atol", request.atol, MAX_ATOL)):
        if value is not None and value > top:   # every finite output would pass: not a check any more
            raise UserError(f"{flag} {value:g} would let any result pass validation (at most {top:g}); "
                            "use --validate none to skip validation")
    if request.profile_set and not request.profile_child and request.profile not in COUNTER_PROFILERS:
        raise UserError(f"--profile-set {request.profile_set} chooses hardware counters: it needs --profile "
                        f"{'|'.join(COUNTER_PROFILERS)} (got --profile {request.profile})")


def ab_plan(request: RunRequest, configs: Sequence[Config]) -> ABPlan | None:
    """The interleaved A/B's plan (bench/ab.py), or None: one configuration, or --ab-sequential."""
    if len(configs) != 2 or request.ab_sequential:
        return None
    if request.ab_max_rounds < request.ab_min_rounds:
        raise UserError(f"--ab-max-rounds {request.ab_max_rounds} is below --ab-min-rounds {request.ab_min_rounds}")
    return ABPlan(band=request.ab_band, block_iters=request.ab_block, block_ms=request.ab_block_ms,
                  min_rounds=request.ab_min_rounds, max_rounds=request.ab_max_rounds,
                  max_seconds=request.ab_max_seconds, fresh_every=request.ab_fresh_sessions)


def reference_only(configs: Sequence[Config]) -> bool:
    return all(c.backend == "reference" for c in configs)


def first_vendor(configs: Sequence[Config]) -> str | None:
    """The run's GPU vendor ("nvidia" / "amd"): that of the first configuration that has one. Markers,
    clock sampling and locking and --gpus pins all follow it."""
    for name in dict.fromkeys(c.backend for c in configs):
        vendor = getattr(backends.get(name), "vendor", None)
        if vendor:
            return str(vendor)
    return None


def _sources(request: RunRequest, configs: Sequence[Config]) -> tuple[list[GraphSource], int]:
    """(the suite's graph sources, how many 'perf' folder graphs the CPU reference leaves out)."""
    skip = () if (request.include_perf or not reference_only(configs)) else ("perf",)
    if not request.graphs:
        raise UserError("no graphs given: name GRAPH paths, or graphs = [...] in a --config recipe")
    sources, skipped = expand_counting_skipped(list(request.graphs), skip_dirs=skip)
    if not sources:
        raise UserError("no graph files found in " + " ".join(request.graphs))
    return sources, skipped


def _refuse_folders_and_backends(request: RunRequest, configs: Sequence[Config]) -> None:
    """--golden and --save-tensors folders, and every backend installed, before any work."""
    if request.golden is not None and not request.golden.is_dir():
        raise UserError(f"--golden {request.golden}: not a folder")
    if request.save_tensors is not None and request.save_tensors.exists() and not request.save_tensors.is_dir():
        raise UserError(f"--save-tensors {request.save_tensors}: not a folder")   # else every graph errs
    if request.save_tensors is not None:
        check_writable(request.save_tensors, "--save-tensors")
    for name in dict.fromkeys(c.backend for c in configs):
        backend = backends.get(name)   # unknown/unbuilt backends fail before any work
        installed = getattr(backend, "installed", None)
        support = installed() if installed is not None else None
        if support is not None and not support:   # one line, before a run directory exists
            raise UserError(f"--backend {name}: {support.reason}")


def gpu_pins(request: RunRequest, configs: Sequence[Config], vendor: str | None,
             profiling: bool) -> GpuPins | None:
    """--gpus: the GPUs and how each worker is pinned; None without --gpus."""
    if request.gpus is None:
        return None
    flag = request.gpus_flag
    if reference_only(configs):
        raise UserError(f"{flag}: the reference backend runs on the CPU; spread it with --shard I/N instead")
    if request.isolate is False:
        raise UserError(f"{flag} runs every graph in a worker process per GPU; drop --no-isolate")
    if profiling:
        raise UserError(f"{flag}: a profiler attaches to one process; profile on one GPU (--device)")
    if request.device:
        raise UserError(f"{flag}: each worker sees its GPU as device 0; drop --device {request.device}")
    if request.clocks != "off":
        raise UserError(f"{flag}: --clocks locks one GPU (--device); lock the node's clocks beforehand "
                        "(nvidia-smi -lgc / amd-smi) or run one GPU")
    from hipdnn_trace.device import visibility

    if request.gpus == "all":
        count = visibility.gpu_count(vendor)
        if not count:
            raise UserError(f"{flag}: no GPU found on this machine")
        indices = list(range(count))
    else:
        indices = list(request.gpus)
    return pin_gpus(vendor, indices)


def isolation(request: RunRequest, configs: Sequence[Config], suite_size: int, profiling: bool,
              gpus: bool = False) -> float | None:
    """None: run graphs in this process; else the per-graph timeout (0: none) for isolated runs.
    A --gpus run is always isolated (each GPU's graphs run in that GPU's worker processes)."""
    isolate = True if gpus else request.isolate
    if isolate is None:
        gpu = any(c.backend != "reference" for c in configs)
        isolate = (suite_size > 1 and gpu and not profiling) or request.graph_timeout is not None
    if not isolate:
        if request.graph_timeout is not None:
            raise UserError("--graph-timeout needs --isolate (only a child process can be stopped when it hangs)")
        return None
    return DEFAULT_TIMEOUT_S if request.graph_timeout is None else request.graph_timeout


def select(request: RunRequest, sources: list[GraphSource]
           ) -> tuple[list[GraphSource], dict[str, Any] | None, dict[str, str | None]]:
    """(sources to run, shard block for run.json, source -> graph_id of each) after --shard."""
    if request.shard is None and request.resume is None:
        return sources, None, {}
    keys = [sharding.source_key(s) for s in sources]
    shard_meta = None
    if request.shard is not None:
        positions = sharding.select(keys, request.shard)
        shard_meta = {"index": request.shard.index, "count": request.shard.count, "suite_size": len(sources),
                      "positions": positions}   # index: 1..count
        sources, keys = [sources[i] for i in positions], [keys[i] for i in positions]
    return sources, shard_meta, {k.name: k.graph_id for k in keys}


def run_folder(request: RunRequest) -> tuple[Path, str, bool, bool]:
    """(run folder, run id, resuming, stranded): the folder --resume names (a stranded one is started
    afresh), else a new one under --out that must not hold another run."""
    if request.resume is None:
        run_id = request.run_id or new_run_id()
        folder = request.out / run_id
        # a profiled child writes into the folder its parent checked and the tool prepared
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())) and not request.profile_child:
            raise UserError(f"{folder} already exists; choose another --run-id or --out, or --resume it")
        return folder, run_id, False, False
    if request.run_id:
        raise UserError("--resume continues RUN_DIR; --run-id does not apply")
    folder = request.resume
    if not folder.exists():   # killed before its mkdir: there is no run to continue
        raise UserError(f"--resume {folder}: no such folder, nothing to resume (a run stopped before it "
                        "created its folder recorded nothing); start a new run")
    lock_run_dir(folder)   # before reading what is recorded: a second resume of DIR stops here
    if is_stranded(folder):   # left before run.json existed: nothing recorded, start it afresh
        return folder, folder.name, False, True
    return folder, str(load_run(folder).meta.get("run_id") or folder.name), True, False


def finished(folder: Path, graph_ids: dict[str, str | None]) -> set[str]:
    """Sources already recorded in the run being resumed; UserError if one changed since."""
    summary = load_run(folder).summary
    done: set[str] = set()
    for row in summary.select("source", "graph_id").unique(maintain_order=True).iter_rows():
        source, graph_id = row
        if source in graph_ids:
            if graph_id != graph_ids[source]:
                raise UserError(f"--resume {folder}: {source} changed since the interrupted run "
                                f"(graph_id {graph_id} then, {graph_ids[source]} now)")
            done.add(source)
    return done


def timing_plan(request: RunRequest, configs: Sequence[Config], vendor: str | None) -> TimingPlan:
    """The one timing decision: host clock or device events, staged or plain events, the kernel
    clock, clock sampling and markers."""
    only_reference = reference_only(configs)
    options = timing_options(request)
    markers = select_markers(request.markers, vendor=vendor)
    samplers, clocks = clock_samplers(vendor, request.device)
    kernel_clock, note = _kernel_clock(request, only_reference)
    return TimingPlan(timer="host" if only_reference else "device-events", options=options,
                      kernel_clock=kernel_clock, kernel_clock_note=note, samplers=samplers, clocks=clocks,
                      markers=markers)


def timing_options(request: RunRequest) -> RunOptions:
    """What each backend's prepare() gets: cache, event mode, CUDA graphs, device, backend extras."""
    extra = {"torch_sdpa_backend": request.torch_sdpa_backend} if request.torch_sdpa_backend != "default" else {}
    mode = "events" if request.timing == "events" else "staged"   # the event timer's mode; kernel runs beside it
    return RunOptions(cache=request.cache, timing=mode, cuda_graph=request.cuda_graph, device=request.device,
                      extra=extra)


def _kernel_clock(request: RunRequest, only_reference: bool) -> tuple[KernelClock | None, str]:
    """The CUPTI kernel clock --timing asks for, and what run.json says about it. An external
    profiler wrapping the run (ncu, nsys, rocprofv3) already holds CUPTI: no second subscriber."""
    if request.timing not in ("auto", "kernel"):
        return None, f"off (--timing {request.timing})"
    if only_reference:
        if request.timing == "kernel":
            raise UserError("--timing kernel: the CPU reference has no GPU kernels (it is timed with the host "
                            "clock); use --timing auto")
        return None, "off (CPU reference: host clock)"
    reason = KernelClock.unavailable()
    if reason is None and request.profile_child and request.profile_child != "cupti":
        reason = f"the run is wrapped by {request.profile_child}: no second CUPTI subscriber"
    if reason is not None:
        if request.timing == "kernel":
            raise UserError(f"--timing kernel: {reason}; use --timing staged")
        return None, f"off ({reason}); kernel_ms is the staged event span"
    return KernelClock(), KernelClock.source


def clock_samplers(vendor: str | None, device: int) -> tuple[tuple, dict[str, Any] | None]:
    """NVML clock sampling for NVIDIA GPU backends: (samplers, run.json description)."""
    if vendor != "nvidia":
        return (), None
    try:
        from hipdnn_trace.device.nvml import ClockSampler

        sampler = ClockSampler(device)
    except UserError as exc:
        return (), {"source": None, "note": str(exc)}
    return (sampler,), sampler.info(INTERVAL_S * 1e3)


def resolve_reference_device(request: RunRequest, only_reference: bool = False) -> ResolvedDevice:
    """Where the validating float64 reference runs (--reference-device), decided here only, by the
    rule ``inspect`` judges with (``bench/verdict.py`` ``reference_device``): a CPU-reference run stays
    on the CPU under auto (no torch import, no GPU context for a run that needs neither); auto
    elsewhere is cuda when torch sees a GPU."""
    device = reference_device(request.validate == "reference", request.reference_device,
                              only_reference=only_reference)
    return "cuda" if device == "cuda" else "cpu"


def reference_cache(request: RunRequest) -> ReferenceCache | None:
    """--reference-cache as a cache (None: off); a folder that cannot be written fails before any work."""
    choice = str(request.reference_cache)
    if choice == "none" or request.validate == "none":
        return None
    folder = auto_folder() if choice == "auto" else Path(choice)
    check_writable(folder, "--reference-cache")
    return ReferenceCache(folder, int(request.reference_cache_max * 2**30))


def plan_cache(request: RunRequest, configs: Sequence[Config]) -> PlanCache | None:
    """--plan-cache as a cache, when a configuration's backend keeps plans (None: off, or nothing to keep).
    A folder named on the command line that cannot be written fails before any work; the default one
    (auto) is left out with a warning instead, so a read-only home never stops a run."""
    choice = str(request.plan_cache)
    if choice == "none" or not any(getattr(backends.get(c.backend), "caches_plans", False) for c in configs):
        return None
    folder = plan_cache_folder() if choice == "auto" else Path(choice)
    try:
        check_writable(folder, "--plan-cache")
    except UserError as exc:
        if choice != "auto":
            raise
        warnings.warn(f"{exc}; plans are built every run (--plan-cache DIR puts the cache elsewhere)", stacklevel=2)
        return None
    return PlanCache(folder, int(request.plan_cache_max * 2**30))


def with_plan_cache(options: RunOptions, cache: PlanCache | None, off: bool = False) -> RunOptions:
    """``options`` with the plan cache in its extras, where a backend's session finds it (``off``:
    --no-plan-cache, which also turns off the caches libraries keep themselves)."""
    if cache is None:
        return replace(options, extra={**(options.extra or {}), PLAN_CACHE_OFF: True}) if off else options
    return replace(options, extra={**(options.extra or {}), PLAN_CACHE_OPTION: cache})


def check_writable(folder: Path, flag: str) -> None:
    """Create ``folder`` and write a probe file in it, so an unwritable target fails before any work."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            pass
    except OSError as exc:
        raise UserError(f"{flag} {folder}: cannot write there ({exc.strerror or exc})") from None

"""``hipdnn-trace run``: time, validate and record graphs (the main job)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from hipdnn_trace import backends
from hipdnn_trace.backends.base import RunOptions
from hipdnn_trace.backends.reference.budget import DEFAULT_MAX_REFERENCE_S
from hipdnn_trace.backends.reference.xp import DEVICES as REFERENCE_DEVICES, cuda_missing, resolve_device
from hipdnn_trace.bench import cpu_share, gpus as gpu_pool, shard as sharding
from hipdnn_trace.bench.config import ENGINE_LIST, build_configs
from hipdnn_trace.bench.counter_rng import GENERATOR
from hipdnn_trace.bench.estimate import GraphEstimate, estimate_suite
from hipdnn_trace.bench.graph_run import RunSettings
from hipdnn_trace.bench.interrupts import Interrupted, InterruptGuard
from hipdnn_trace.bench.isolation import DEFAULT_TIMEOUT_S, IsolatedRunner
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.bench.oracle import oracle_configs, oracle_meta
from hipdnn_trace.bench.records import FAILED, OK, GraphRun
from hipdnn_trace.bench.reference_cache import ReferenceCache, auto_folder
from hipdnn_trace.bench.sampling import INTERVAL_S
from hipdnn_trace.bench.shard import ShardSpec
from hipdnn_trace.bench.split import SplitRunner, groups, needs_split
from hipdnn_trace.bench.suite import SuiteCallbacks, exit_code_for, run_suite
from hipdnn_trace.commands import SUMMARIES, argtypes
from hipdnn_trace.console import Progress, Reporter, escape, fmt_duration
from hipdnn_trace.device.clock_lock import POLICIES, ClockLock
from hipdnn_trace.device.kernel_clock import KernelClock
from hipdnn_trace.errors import UserError
from hipdnn_trace.graph.sources import expand_counting_skipped
from hipdnn_trace.markers import select as select_markers
from hipdnn_trace.profilers.base import REGISTRY as PROFILERS, load as load_profiler
from hipdnn_trace.results.metadata import new_run_id, run_metadata
from hipdnn_trace.results.oracle import summary_lines as oracle_lines
from hipdnn_trace.results.rundir import RunWriter, check_resumable, clear_stranded, is_stranded, load_run, write_json

EXAMPLES = """\
examples:
  hipdnn-trace run graphs/                          # bundled graphs on the CPU reference
  hipdnn-trace run g.json --backend cudnn -w 20 -i 500 --cache cold
  sudo hipdnn-trace run graphs/perf/ --backend cudnn --clocks lock-base   # no boost drift between runs
  hipdnn-trace run graphs/conv/ --backend cudnn --engine all       # one row per plan
  hipdnn-trace run g.json --backend cudnn --engine list            # list the plans, run nothing
  hipdnn-trace run g.json --a cudnn:0 --b torch                    # A/B on the same inputs
  hipdnn-trace run g.json --backend hipdnn --APath /opt/a/plugins --BPath /opt/b/plugins
  hipdnn-trace run suite.tar.gz --max-rel-ci 0.01 --format csv,parquet --out runs/
  hipdnn-trace run g.json --save-tensors golden/    # then: run g.json --golden golden/
  hipdnn-trace run suite/ --backend hipdnn --graph-timeout 120     # crash/hang -> one error row
  hipdnn-trace run --resume runs/20260101-120000-ab12cd   # graphs and flags from its run.json
  hipdnn-trace run suite/ --backend hipdnn --shard 3/16 --run-id shard3   # then: hipdnn-trace merge
  hipdnn-trace run suite/ --shard auto --run-id shard-$SLURM_ARRAY_TASK_ID  # in a Slurm array task
  hipdnn-trace run --config nightly.toml --iters 500   # recipe (graphs = [...], iters = 200, ...); flags win

exit codes: 0 ok, 1 error (bad input, tool missing, a graph errored or nothing ran),
            2 validation mismatch, 130/143/141 interrupted by SIGINT/SIGTERM or a closed stdout
            pipe (files complete; finish with --resume)
"""


def _shard(text: str) -> ShardSpec:
    try:
        return ShardSpec.parse(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _gpus(text: str) -> list[int] | None:
    try:
        return gpu_pool.parse_gpus(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _reference_cache(args: argparse.Namespace) -> ReferenceCache | None:
    """--reference-cache as a cache (None: off); a folder that cannot be written fails before any work."""
    choice = str(args.reference_cache)
    if choice == "none" or args.validate == "none":
        return None
    folder = auto_folder() if choice == "auto" else Path(choice)
    _check_writable(folder, "--reference-cache")
    return ReferenceCache(folder, int(args.reference_cache_max * 2**30))


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run", help=SUMMARIES["run"],
        description="Run hipDNN graph files (files, folders, globs, tarballs) on a backend: build "
                    "(timed as init), bind seeded inputs, warm up, time iterations with device events, "
                    "fetch outputs, validate against the float64 reference, and write a run directory.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
    )
    p.add_argument("graphs", nargs="*", metavar="GRAPH",
                   help="graph files, folders, globs or tarballs (or graphs = [...] in --config)")
    p.add_argument("--config", type=Path, metavar="RECIPE.toml",
                   help="a TOML recipe of these flags (keys: long names with _, graphs = [...]); "
                        "defaults < recipe < flags given here; relative paths from the recipe's folder")
    g = p.add_argument_group("what runs")
    g.add_argument("--backend", "-b", default="reference", choices=backends.names(),
                   help="executor (default: reference, the CPU float64 oracle)")
    g.add_argument("--engine", "-e", default=None,
                   help="engine index or name, 'all' (a row per engine) or 'list' (print and exit)")
    g.add_argument("--autotune", action="store_true", help="time every engine briefly, keep the fastest")
    g.add_argument("--oracle", action="store_true",
                   help="time each graph on the backend's out-of-the-box plan (NAME#ootb) and a tuned one "
                        "(NAME#tuned; cudnn: autotune over the heuristics' plans, torch: cudnn.benchmark + "
                        "TunableOp in a child of its own, hipdnn: the engine's global.benchmarking), validate "
                        "both; oracle.csv and the last lines give regret = ootb / tuned median per graph and its "
                        "geomean, and flag a tuned plan that is faster but wrong (docs/oracle.md)")
    g.add_argument("--a", dest="a", metavar="SPEC", help="A/B: config A as BACKEND[:ENGINE][@PLUGIN_PATH]")
    g.add_argument("--b", dest="b", metavar="SPEC", help="A/B: config B, same form")
    g.add_argument("--APath", dest="a_path", help="A/B (seed-tool form): plugin path of A")
    g.add_argument("--AId", dest="a_id", help="A/B (seed-tool form): engine id or name of A")
    g.add_argument("--BPath", dest="b_path", help="A/B (seed-tool form): plugin path of B")
    g.add_argument("--BId", dest="b_id", help="A/B (seed-tool form): engine id or name of B")
    g.add_argument("--allow-unknown-fields", action="store_true",
                   help="read past graph fields no hipDNN writer puts on a node (default: an error naming the "
                        "JSON path and the closest known key); each becomes a warning note")
    g.add_argument("--include-perf", action="store_true",
                   help="with the reference backend, also run folders named 'perf' (GPU-sized graphs)")
    t = p.add_argument_group("timing")
    t.add_argument("--warmup", "-w", type=argtypes.iterations, default=10, help="warmup iterations (default 10)")
    t.add_argument("--iters", "-i", type=argtypes.iterations, default=100,
                   help="minimum timed iterations (default 100)")
    t.add_argument("--min-time-ms", type=argtypes.milliseconds, default=0.0,
                   help="keep timing until this much time passed")
    t.add_argument("--max-rel-ci", type=argtypes.fraction, default=None,
                   help="then until the median's 95%% CI is within this fraction (0.01 = 1%%)")
    t.add_argument("--max-iters", type=argtypes.iterations, default=None, help="cap for the two rules above")
    t.add_argument("--cache", choices=("warm", "cold"), default="warm",
                   help="cold: flush the L2 cache between iterations, outside the timed region")
    t.add_argument("--timing", choices=("auto", "kernel", "staged", "events"), default="auto",
                   help="kernel: kernel_ms is the sum of the iteration's kernel durations from CUPTI's "
                        "activity records (in process; unstaged events beside it give latency_ms); "
                        "staged: hold the GPU stream on a flag while enqueueing, so host launch overhead "
                        "stays out of the event span (falls back to events, with the reason in run.json); "
                        "events: plain events around each execute; auto (default): kernel where CUPTI "
                        "can run in process, else staged (docs/timing.md)")
    t.add_argument("--cuda-graph", action="store_true", help="capture the execution in a CUDA graph and replay it")
    t.add_argument("--device", type=argtypes.non_negative_int, default=0, help="GPU index (default 0)")
    t.add_argument("--clocks", choices=POLICIES, default="off",
                   help="lock the GPU clocks for the run (NVML on NVIDIA, amd-smi on AMD; needs root) at the "
                        "base/default clock or the maximum, restored at the end, on a crash or on the next "
                        "run after a kill; refused: a warning and run.json says why (default off)")
    t.add_argument("--torch-sdpa-backend", choices=("default", "flash", "efficient", "math", "cudnn"),
                   default="default", help="torch backend: which SDPA kernel family torch may use for "
                   "attention (default: torch chooses)")
    t.add_argument("--markers", choices=("auto", "nvtx", "roctx", "none"), default="auto",
                   help="profiler markers around phases (default: what is importable)")
    r = p.add_argument_group("reliability and scale-out (docs/reliability.md)")
    r.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=None,
                   help="run each graph in a child process: a crash, hang or out-of-memory becomes one "
                        "error row (default: on for suites of more than one graph on a GPU backend)")
    r.add_argument("--fresh-child", action="store_true",
                   help="isolating: a new child process for every graph, so each first_call_ms includes "
                        "process-level loading (default: one child runs graph after graph and is replaced "
                        "after a crash, a timeout, an error row or 100 graphs)")
    r.add_argument("--graph-timeout", type=argtypes.seconds, default=None, metavar="SECONDS",
                   help=f"kill a graph's child process after this long (implies --isolate; default "
                        f"{DEFAULT_TIMEOUT_S:g} when isolating, 0: no limit)")
    r.add_argument("--max-reference-seconds", type=argtypes.seconds, default=DEFAULT_MAX_REFERENCE_S,
                   metavar="S", help="refuse (one error row) a graph whose float64 CPU reference would take longer "
                   f"than this, estimated from its FLOPs before any work (default {DEFAULT_MAX_REFERENCE_S:g}; "
                   "0: no limit)")
    r.add_argument("--reference-device", choices=REFERENCE_DEVICES, default="auto",
                   help="where the float64 reference that validates runs: cuda = torch float64 on the GPU, "
                        "same ops, equal to the CPU's within 1e-12 relative; auto (default) = cuda when torch "
                        "sees a GPU, else cpu")
    r.add_argument("--resume", type=Path, metavar="RUN_DIR",
                   help="finish an interrupted run: skip graphs already recorded in RUN_DIR, append the "
                        "rest (same graphs and flags as the interrupted run; without GRAPH paths both come "
                        "from RUN_DIR/run.json, flags given here win where a resume allows)")
    r.add_argument("--shard", type=_shard, metavar="I/N|auto",
                   help="run only slice I of N of the suite (1/N .. N/N, like split -n l/I/N; the slice "
                        "depends on the graphs, not on file order); auto: I and N of this Slurm array task "
                        "(SLURM_ARRAY_TASK_ID/COUNT/MIN/MAX/STEP) or srun task (SLURM_PROCID/SLURM_NTASKS); "
                        "combine the N runs with 'hipdnn-trace merge'")
    r.add_argument("--gpus", type=_gpus, metavar="all|I,J,..", default=False,
                   help="one isolated worker per GPU (pinned with the vendor's visibility variable, each "
                        "sees its GPU as device 0), longest graphs first; one run directory, the rows of a "
                        "serial run (implies --isolate)")
    pr = p.add_argument_group("profiling")
    pr.add_argument("--profile", choices=("none", *PROFILERS), default="none",
                    help="cupti: kernel trace in-process; ncu / rocprofv3 / rocprof: re-run under the tool")
    pr.add_argument("--profile-set", default=None, metavar="NAME",
                    help="counter set from profiles/ (e.g. basic, memory, compute, roofline)")
    pr.add_argument("--profile-child", default=None, help=argparse.SUPPRESS)
    v = p.add_argument_group("validation")
    v.add_argument("--validate", choices=("reference", "none"), default="reference",
                   help="compare outputs with the float64 reference (default)")
    v.add_argument("--golden", type=Path, metavar="DIR", help="golden bundles: inputs from them, outputs compared")
    v.add_argument("--rtol", type=argtypes.tolerance,
                   help=f"relative tolerance (default per dtype and op, hipDNN's; at most {argtypes.MAX_RTOL:g})")
    v.add_argument("--atol", type=argtypes.tolerance,
                   help=f"absolute tolerance (default per dtype and op, hipDNN's; at most {argtypes.MAX_ATOL:g})")
    v.add_argument("--seed", type=int, default=0, help="input seed (default 0)")
    v.add_argument("--reference-cache", default="none", metavar="DIR|auto|none",
                   help="keep float64 reference outputs in DIR (auto: $XDG_CACHE_HOME/hipdnn-trace/reference) "
                        "and reuse them on reruns, A/B runs and shards (default none; docs/reliability.md)")
    v.add_argument("--reference-cache-max", type=argtypes.gib, default=20.0, metavar="GIB",
                   help="trim the reference cache to this size, least recently used first (default 20)")
    o = p.add_argument_group("output")
    o.add_argument("--out", "-o", type=Path, default=Path("runs"), help="parent of the run directory (default runs/)")
    o.add_argument("--run-id", type=argtypes.run_id,
                   help="name of the run directory inside --out (default: time + random suffix)")
    o.add_argument("--format", type=argtypes.formats, default=["parquet"],
                   help="formats of the big frames (iterations, kernels, counters): csv,json,parquet "
                        "(default parquet; summary and validation are always CSV); dnnbench also writes "
                        "results.dnnbench.json/.csv in ROCm dnn-benchmarking's schema v2 (its newest layout)")
    o.add_argument("--trace", dest="trace", action="store_true", default=True, help="write trace.pftrace (default)")
    o.add_argument("--no-trace", dest="trace", action="store_false", help="do not write a Perfetto trace")
    o.add_argument("--save-tensors", type=Path, metavar="DIR", help="write inputs and outputs as golden bundles")
    o.add_argument("--quiet", "-q", action="store_true",
                   help="only the final count line (no per-graph lines, table or progress line; errors and "
                        "warnings still go to stderr)")
    o.add_argument("--verbose", "-v", action="store_true", help="a full block per graph, also in suites")
    o.add_argument("--progress", choices=("auto", "on", "off"), default="auto",
                   help="progress line on stderr (auto: on a terminal, not with -q)")
    p.set_defaults(main=main)


def _reference_device(args: argparse.Namespace, reference_only: bool = False) -> str:
    """"cpu" or "cuda": where the validating float64 reference runs (--reference-device). A CPU-reference
    run stays on the CPU under auto (no torch import, no GPU context for a run that needs neither)."""
    if args.validate != "reference" or (reference_only and args.reference_device == "auto"):
        return "cpu"
    if args.reference_device == "cuda":
        reason = cuda_missing()
        if reason:
            raise UserError(f"--reference-device cuda: {reason}; use --reference-device cpu")
        return "cuda"
    return resolve_device(args.reference_device)


def _options(args: argparse.Namespace) -> RunOptions:
    extra = {"torch_sdpa_backend": args.torch_sdpa_backend} if args.torch_sdpa_backend != "default" else {}
    timing = "events" if args.timing == "events" else "staged"   # the event timer's mode; kernel runs beside it
    return RunOptions(cache=args.cache, timing=timing, cuda_graph=args.cuda_graph, device=args.device,
                      extra=extra)


def _kernel_clock(args: argparse.Namespace, reference_only: bool) -> tuple[KernelClock | None, str]:
    """The CUPTI kernel clock --timing asks for, and what run.json says about it. An external
    profiler wrapping the run (ncu, nsys, rocprofv3) already holds CUPTI: no second subscriber."""
    if args.timing not in ("auto", "kernel"):
        return None, f"off (--timing {args.timing})"
    if reference_only:
        if args.timing == "kernel":
            raise UserError("--timing kernel: the CPU reference has no GPU kernels (it is timed with the host "
                            "clock); use --timing auto")
        return None, "off (CPU reference: host clock)"
    reason = KernelClock.unavailable()
    if reason is None and args.profile_child and args.profile_child != "cupti":
        reason = f"the run is wrapped by {args.profile_child}: no second CUPTI subscriber"
    if reason is not None:
        if args.timing == "kernel":
            raise UserError(f"--timing kernel: {reason}; use --timing staged")
        return None, f"off ({reason}); kernel_ms is the staged event span"
    return KernelClock(), KernelClock.source


def _list_engines(args: argparse.Namespace, sources: list) -> int:
    from hipdnn_trace.graph.load import load_bytes

    backend = backends.get(args.backend)
    available = backend.available()
    if not available:
        raise UserError(f"backend {args.backend} not available: {available.reason}")
    for src in sources:
        graph = load_bytes(src.read(), src.name, allow_unknown=args.allow_unknown_fields)
        support = backend.check(graph)
        print(f"== {escape(graph.label)} ({escape(src.name)})")
        if not support:
            print(f"   unsupported: {escape(support.reason)}")
            continue
        engines = backend.engines(graph, _options(args))
        if not engines:
            print(f"   one way to run: the {args.backend} backend has no engines to choose from")
        for e in engines:
            ws = "-" if e.workspace_bytes is None else f"{e.workspace_bytes} B"
            knobs = ", ".join(f"{k}={v}" for k, v in e.knobs.items()) or "-"
            print(f"   {e.index:>4}  {e.name:<40} workspace {ws:<12} knobs {knobs}  {e.detail}")
    return 0


def _ab_line(g: GraphRun) -> str | None:
    """B's median time over A's with its CI: the ratio, direction and name ``compare`` and ``report``
    use (compare/result.py), so one number never reads two ways."""
    ran = [c for c in g.configs if c.status in (OK, FAILED) and c.samples is not None]
    if len(ran) != 2:
        return None
    from hipdnn_trace.compare.result import RATIO_LABEL, fmt_change
    from hipdnn_trace.compare.stats import median_ratio

    a, b = (c.samples.timed_kernel_ms() for c in ran)
    if not len(a) or not len(b) or min(a.min(), b.min()) <= 0:
        return None
    est = median_ratio(a, b, n_boot=2000, rng=np.random.default_rng(0))
    return (f"   A/B {g.name}: {RATIO_LABEL} {est.ratio:.3f} [95% CI {est.ci_low:.3f}, {est.ci_high:.3f}], "
            f"{fmt_change(est.ratio)}; A = {ran[0].config.name}, B = {ran[1].config.name}")


def _isolation(args: argparse.Namespace, configs: list, suite_size: int, profiling: bool) -> float | None:
    """None: run graphs in this process; else the per-graph timeout (0: none) for isolated runs."""
    isolate = args.isolate
    if isolate is None:
        gpu = any(c.backend != "reference" for c in configs)
        isolate = (suite_size > 1 and gpu and not profiling) or args.graph_timeout is not None
    if not isolate:
        if args.graph_timeout is not None:
            raise UserError("--graph-timeout needs --isolate (only a child process can be stopped when it hangs)")
        return None
    return DEFAULT_TIMEOUT_S if args.graph_timeout is None else args.graph_timeout


def _gpu_block(args: argparse.Namespace, configs: list, profiling: bool) -> dict[str, Any] | None:
    """--gpus: the GPUs and how each is pinned (run.json's "gpus"); None without --gpus.
    Sets --isolate (each GPU's graphs run in that GPU's worker processes)."""
    if args.gpus is False:
        return None
    flag = "--gpus " + ("all" if args.gpus is None else ",".join(map(str, args.gpus)))
    if all(c.backend == "reference" for c in configs):
        raise UserError(f"{flag}: the reference backend runs on the CPU; spread it with --shard I/N instead")
    if args.isolate is False:
        raise UserError(f"{flag} runs every graph in a worker process per GPU; drop --no-isolate")
    if profiling:
        raise UserError(f"{flag}: a profiler attaches to one process; profile on one GPU (--device)")
    if args.device:
        raise UserError(f"{flag}: each worker sees its GPU as device 0; drop --device {args.device}")
    if args.clocks != "off":
        raise UserError(f"{flag}: --clocks locks one GPU (--device); lock the node's clocks beforehand "
                        "(nvidia-smi -lgc / amd-smi) or run one GPU")
    args.isolate = True
    from hipdnn_trace.device import visibility

    vendors = [v for v in (getattr(backends.get(c.backend), "vendor", None) for c in configs) if v]
    vendor = vendors[0] if vendors else None
    indices = args.gpus
    if indices is None:
        count = visibility.gpu_count(vendor)
        if not count:
            raise UserError(f"{flag}: no GPU found on this machine")
        indices = list(range(count))
    pins = {str(i): visibility.pin(vendor, i) for i in indices}
    shares = cpu_share.split_cores(cpu_share.usable_cores(), len(indices))
    return {"devices": indices, "variable": visibility.variable_for(vendor, os.environ),
            "visible": {i: next(iter(env.values())) for i, env in pins.items()},
            "cpus": {str(i): cores for i, cores in zip(indices, shares)},
            "order": f"longest first: max(FLOPs / {gpu_pool.NOMINAL_FLOPS_PER_S:g}/s, "
                     f"bytes / {gpu_pool.NOMINAL_BYTES_PER_S:g}/s)",
            "graphs": {}}


def _pool(block: dict[str, Any], configs: list, settings: RunSettings, timeout: float | None,
          split: bool, resident: bool) -> gpu_pool.GpuPool:
    """A worker per GPU of run.json's "gpus" block, each pinned to its GPU before it starts."""
    workers = []
    for index in block["devices"]:
        value = block["visible"][str(index)]
        cores = block.get("cpus", {}).get(str(index))   # a run.json from before CPU shares has none
        env = {block["variable"]: value, **(cpu_share.worker_env(cores) if cores else {})}
        isolated = IsolatedRunner(DEFAULT_TIMEOUT_S if timeout is None else timeout, env=env, resident=resident)
        mine = settings
        if settings.samplers:   # NVML counts physical GPUs: sample this worker's GPU, when its entry is an index
            samplers = _clock_samplers(configs, int(value))[0] if value.isdigit() else ()
            mine = replace(settings, samplers=samplers)
        workers.append(gpu_pool.GpuWorker(index, SplitRunner(isolated) if split else isolated, mine))
    return gpu_pool.GpuPool(workers)


def _clock_samplers(configs: list, device: int) -> tuple[tuple, dict[str, Any] | None]:
    """NVML clock sampling for NVIDIA GPU backends: (samplers, run.json description)."""
    vendors = {getattr(backends.get(c.backend), "vendor", None) for c in configs}
    if "nvidia" not in vendors:
        return (), None
    try:
        from hipdnn_trace.device.nvml import ClockSampler

        sampler = ClockSampler(device)
    except UserError as exc:
        return (), {"source": None, "note": str(exc)}
    return (sampler,), sampler.info(INTERVAL_S * 1e3)


def _record_sessions(meta: dict[str, Any], g: GraphRun) -> None:
    """How each configuration ran (timer, fallbacks, plan) into run.json's "sessions"."""
    sessions = meta.setdefault("sessions", {})
    for c in g.configs:
        info = {k: v for k, v in c.info.items() if k not in ("traceback", "cupti", "autotune")}
        if not info:
            continue
        entry = sessions.setdefault(c.config.name, {"method": info, "graphs": {}})
        entry["graphs"][g.name] = {k: info[k] for k in ("plan", "workspace_bytes", "timing_fallback", "timer",
                                                        "timing") if k in info}


def _select(args: argparse.Namespace, sources: list) -> tuple[list, dict[str, Any] | None, dict[str, str | None]]:
    """(sources to run, shard block for run.json, source -> graph_id of each) after --shard."""
    if args.shard is None and args.resume is None:
        return sources, None, {}
    keys = [sharding.source_key(s) for s in sources]
    shard_meta = None
    if args.shard is not None:
        positions = sharding.select(keys, args.shard)
        shard_meta = {"index": args.shard.index, "count": args.shard.count, "suite_size": len(sources),
                      "positions": positions}   # index: 1..count
        sources, keys = [sources[i] for i in positions], [keys[i] for i in positions]
    return sources, shard_meta, {k.name: k.graph_id for k in keys}


def _finished(folder: Path, graph_ids: dict[str, str | None]) -> set[str]:
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


def _check_writable(folder: Path, flag: str) -> None:
    """Create ``folder`` and write a probe file in it, so an unwritable target fails before any work."""
    import tempfile

    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            pass
    except OSError as exc:
        raise UserError(f"{flag} {folder}: cannot write there ({exc.strerror or exc})") from None


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's exit flush cannot fail on the closed pipe again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


#: a suite estimated to take longer than this gets a note with the estimate up front
ESTIMATE_ABOVE_S = 10.0


def suite_estimates(sources: list, configs: list, settings: RunSettings,
                    timeout: float | None, fresh_child: bool) -> list[GraphEstimate]:
    """Per-graph estimates (bench/estimate.py) for the note and the progress line's ETA."""
    isolation = None if timeout is None else ("fresh" if fresh_child else "resident")
    return estimate_suite(sources, configs, settings, isolation=isolation)


def suite_rates() -> Any:
    """The rates the estimate used: this machine's when they were measured, else the defaults."""
    from hipdnn_trace.backends.reference import cost
    from hipdnn_trace.bench.estimate import DEFAULT_RATES

    return cost.measured_rates() if cost.measured_rates.cache_info().currsize else DEFAULT_RATES


def estimate_note(estimates: list[GraphEstimate]) -> str | None:
    """A note with the suite's estimated wall time and its longest graph, when the suite is long;
    None for a short one."""
    total = sum(e.seconds for e in estimates)
    if total < ESTIMATE_ABOVE_S:
        return None
    longest = max(estimates, key=lambda e: e.seconds)
    slowest = "" if len(estimates) < 2 else \
        f"; longest {Path(longest.source).stem} about {fmt_duration(longest.seconds)}"
    return (f"estimate: about {fmt_duration(total)} for {len(estimates)} graph(s) on this machine{slowest} "
            "(the progress line corrects it as graphs finish); Ctrl-C stops, --resume continues")


def _run_folder(args: argparse.Namespace) -> tuple[Path, str, bool]:
    """(run folder, run id, resuming): the folder --resume names (a stranded one is started afresh),
    else a new one under --out that must not hold another run."""
    if args.resume is None:
        run_id = args.run_id or new_run_id()
        folder = args.out / run_id
        # a profiled child writes into the folder its parent checked and the tool prepared
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())) and not args.profile_child:
            raise UserError(f"{folder} already exists; choose another --run-id or --out, or --resume it")
        return folder, run_id, False
    if args.run_id:
        raise UserError("--resume continues RUN_DIR; --run-id does not apply")
    folder = args.resume
    if not folder.exists():   # killed before its mkdir: there is no run to continue
        raise UserError(f"--resume {folder}: no such folder, nothing to resume (a run stopped before it "
                        "created its folder recorded nothing); start a new run")
    if is_stranded(folder):   # left before run.json existed: nothing recorded, start it afresh
        clear_stranded(folder)
        return folder, folder.name, False
    return folder, str(load_run(folder).meta.get("run_id") or folder.name), True


def _record_estimate(estimates: list[GraphEstimate], notes: list[str], meta: dict[str, Any]) -> None:
    """The estimate's note (a long suite) and run.json's ``estimate``: what was expected, beside what
    happened (breakdown.csv wall_ms)."""
    note = estimate_note(estimates)
    if note is not None:
        notes.append(note)
    meta["estimate"] = {"seconds": round(sum(e.seconds for e in estimates), 3),
                        "graphs": {e.source: round(e.seconds, 3) for e in estimates},
                        "rates": asdict(suite_rates())}


def _progress(args: argparse.Namespace, graphs: int, settings: RunSettings,
              estimates: list[GraphEstimate] | None) -> Progress:
    """The progress line: -q means the final line only, so none unless asked for by name."""
    loop = settings.loop
    return Progress(graphs, enabled={"on": True, "off": False}.get(args.progress, False if args.quiet else None),
                    estimates=None if estimates is None else [e.seconds for e in estimates],
                    iters=None if loop.min_time_ms or loop.max_rel_ci else loop.iters, tick_s=PROGRESS_TICK_S)


#: profilers that collect hardware counters (the ones --profile-set chooses for)
COUNTER_PROFILERS = ("ncu", "rocprofv3", "rocprof")


def main(args: argparse.Namespace) -> int:
    for flag, value, top in (("--rtol", args.rtol, argtypes.MAX_RTOL), ("--atol", args.atol, argtypes.MAX_ATOL)):
        if value is not None and value > top:   # every finite output would pass: not a check any more
            raise UserError(f"{flag} {value:g} would let any result pass validation (at most {top:g}); "
                            "use --validate none to skip validation")
    if args.profile_set and not args.profile_child and args.profile not in COUNTER_PROFILERS:
        raise UserError(f"--profile-set {args.profile_set} chooses hardware counters: it needs --profile "
                        f"{'|'.join(COUNTER_PROFILERS)} (got --profile {args.profile})")
    hooks: list = []
    # A profiled child names its profiler with --profile-child: an external tool wraps it
    # (nothing to do here), an in-process one (cupti, also ncu's timing pass) hooks in.
    wanted = args.profile_child or (args.profile if args.profile != "none" else None)
    if wanted is not None:
        profiler, kind = load_profiler(wanted)
        if kind == "external" and not args.profile_child:
            from hipdnn_trace.profilers.external import run_external

            return run_external(profiler, args, args.argv)   # cli.main keeps run's own arguments
        if kind == "in-process":
            check_tool = getattr(profiler, "check_tool", None)
            if check_tool is not None:
                check_tool()   # a missing profiler library is one line before any work
            hooks.append(profiler)
    configs = build_configs(backend=args.backend, engine=args.engine, autotune=args.autotune, a=args.a,
                            b=args.b, a_path=args.a_path, a_id=args.a_id, b_path=args.b_path, b_id=args.b_id)
    if args.oracle:
        configs = oracle_configs(configs)
    reference_only = all(c.backend == "reference" for c in configs)
    skip = () if (args.include_perf or not reference_only) else ("perf",)
    if not args.graphs:
        raise UserError("no graphs given: name GRAPH paths, or graphs = [...] in a --config recipe")
    sources, skipped = expand_counting_skipped(args.graphs, skip_dirs=skip)
    if not sources:
        raise UserError("no graph files found in " + " ".join(args.graphs))
    if args.engine == ENGINE_LIST:
        return _list_engines(args, sources)
    if args.golden is not None and not args.golden.is_dir():
        raise UserError(f"--golden {args.golden}: not a folder")
    if args.save_tensors is not None and args.save_tensors.exists() and not args.save_tensors.is_dir():
        raise UserError(f"--save-tensors {args.save_tensors}: not a folder")   # else every graph errs
    if args.save_tensors is not None:
        _check_writable(args.save_tensors, "--save-tensors")
    for name in dict.fromkeys(c.backend for c in configs):
        backend = backends.get(name)   # unknown/unbuilt backends fail before any work
        installed = getattr(backend, "installed", None)
        support = installed() if installed is not None else None
        if support is not None and not support:   # one line, before a run directory exists
            raise UserError(f"--backend {name}: {support.reason}")
    gpus = _gpu_block(args, configs, profiling=bool(hooks) or bool(args.profile_child))
    timeout = _isolation(args, configs, len(sources), profiling=bool(hooks) or bool(args.profile_child))
    suite_size = len(sources)
    sources, shard_meta, graph_ids = _select(args, sources)
    folder, run_id, resuming = _run_folder(args)
    loop = LoopSettings(warmup=args.warmup, iters=max(1, args.iters), min_time_ms=args.min_time_ms,
                        max_rel_ci=args.max_rel_ci, max_iters=args.max_iters)
    options = _options(args)
    vendor = getattr(backends.get(configs[0].backend), "vendor", None)
    markers = select_markers(args.markers, vendor=vendor)
    samplers, clocks = _clock_samplers(configs, args.device)
    kernel_clock, kernel_clock_note = _kernel_clock(args, reference_only)
    reference_device = _reference_device(args, reference_only)
    settings = RunSettings(loop=loop, options=options, seed=args.seed, validate=args.validate,
                           golden=args.golden, atol=args.atol, rtol=args.rtol,
                           save_tensors=args.save_tensors, ab=len(configs) == 2 and not args.oracle, hooks=hooks,
                           samplers=samplers, allow_unknown=args.allow_unknown_fields,
                           kernel_clock=kernel_clock, require_kernel_clock=args.timing == "kernel",
                           max_reference_s=args.max_reference_seconds,
                           reference_cache=_reference_cache(args), reference_device=reference_device)
    timing = {"timer": "host" if reference_only else "device-events", "cache": args.cache,
              "warmup": args.warmup, "iters": args.iters, "min_time_ms": args.min_time_ms,
              "max_rel_ci": args.max_rel_ci, "staged": options.timing == "staged", "timing": args.timing,
              "kernel_clock": kernel_clock_note,
              "cuda_graph": args.cuda_graph, "clock_control": None, "markers": markers.kind,
              # what --clocks asked; run.json's clocks: what held
              "clock_lock": None if args.clocks == "off" else args.clocks,
              "profiler": wanted,
              "clocks": clocks}
    # the run's own command line, also when it came from hipdnn_trace.run() inside a script
    meta = run_metadata(run_id=run_id, argv=["hipdnn-trace", "run", *getattr(args, "argv", [])],
                        timing=timing, seed=args.seed,
                        configs=[{"name": c.name, "backend": c.backend, "engine": c.engine,
                                  "plugin_path": c.plugin_path} for c in configs],
                        extra={"graphs": [s.name for s in sources], "shard": shard_meta,
                               # --shard auto: the scheduler's variables it came from (not compared by --resume)
                               "shard_from": dict(args.shard.variables) if args.shard and args.shard.variables
                               else None,
                               "validation": {"against": args.validate,
                                              "golden": None if args.golden is None else str(args.golden),
                                              "atol": args.atol, "rtol": args.rtol},
                               "isolation": {"enabled": timeout is not None, "graph_timeout_s": timeout or None,
                                             "child": "fresh per graph" if args.fresh_child else "resident"},
                               **({"gpus": gpus} if gpus is not None else {}),
                               "max_reference_seconds": args.max_reference_seconds or None,
                               "reference_cache": None if settings.reference_cache is None else {
                                   "folder": str(settings.reference_cache.folder),
                                   "max_bytes": settings.reference_cache.max_bytes, "graphs": {}},
                               "reference_device": {"asked": args.reference_device, "used": reference_device},
                               "inputs": {"generator": GENERATOR},
                               **({"oracle": oracle_meta(configs)} if args.oracle else {})})
    for name in {c.backend for c in configs}:
        try:
            meta["versions"].update(backends.get(name).versions())
            gpu_info = getattr(backends.get(name), "gpu_info", None)
            if meta.get("gpu") is None and gpu_info is not None:
                meta["gpu"] = gpu_info(args.device)
        except Exception:   # a version probe never stops a run
            pass
    for hook in hooks:
        hook.run_id = run_id
    notes = [f"skipped {skipped} graph(s) in folders named 'perf' (GPU-sized) on the CPU reference; "
             "--include-perf runs them"] if skipped else []
    if shard_meta is not None:
        notes.append(f"shard {args.shard}: {len(sources)} of the suite's {suite_size} graph(s)")
    if resuming:
        previous = load_run(folder).meta
        meta = check_resumable(previous, meta)
        if gpus is not None:   # where the graphs of the earlier part ran
            gpus["graphs"] = {**((previous.get("gpus") or {}).get("graphs") or {}), **gpus["graphs"]}
        elif previous.get("gpus"):   # resumed on one GPU: run.json still says where the earlier part ran
            meta["gpus"] = previous["gpus"]
        done = _finished(folder, graph_ids)
        sources = [s for s in sources if s.name not in done]
        notes.append(f"resuming {folder}: {len(done)} graph(s) already recorded, {len(sources)} to run")
    if gpus is not None:
        notes.append(f"{len(gpus['devices'])} GPU worker(s), longest graphs first: "
                     + ", ".join(f"{gpus['variable']}={v}" for v in gpus["visible"].values()))
    if timeout is not None:
        notes.append("each graph runs in a child process" + (f" (killed after {timeout:g} s)" if timeout else ""))
    # a --gpus pool runs graphs side by side, longest first: a serial estimate would mislead
    estimates = suite_estimates(sources, configs, settings, timeout, args.fresh_child) if gpus is None else None
    if estimates is not None:
        _record_estimate(estimates, notes, meta)
    vendors = [v for v in (getattr(backends.get(c.backend), "vendor", None) for c in configs) if v]
    with InterruptGuard() as guard, ClockLock(args.clocks, vendors[0] if vendors else None, args.device,
                                              run_dir=str(folder)) as clocks:
        meta["clocks"] = clocks.record()
        writer = RunWriter(folder, meta, formats=args.format, trace=args.trace, resume=resuming,
                           exclusive=args.resume is None and not args.profile_child)   # mkdir: one run per folder
        if gpus is not None:   # graphs finish out of order: the tables stay in suite order
            writer.suite_order = {name: i for i, name in enumerate(meta["graphs"])}
        return _run(args, sources, configs, settings, markers, writer, guard, timeout, notes, clocks, estimates)


#: how often the progress line redraws on its own (a graph may spend minutes in one numpy call)
PROGRESS_TICK_S = 1.0


def _run(args: argparse.Namespace, sources: list, configs: list, settings: RunSettings, markers: Any,
         writer: RunWriter, guard: InterruptGuard, timeout: float | None, notes: list[str],
         clocks: ClockLock | None = None, estimates: list[GraphEstimate] | None = None) -> int:
    folder = writer.folder
    reporter = Reporter(verbose=args.verbose, quiet=args.quiet, suite=len(sources) > 1,
                        name_width=max((len(Path(s.name).stem) for s in sources), default=0),
                        config_width=max((len(c.name) for c in configs), default=0))
    progress = _progress(args, len(sources), settings, estimates)
    reporter.header(configs=[c.name for c in configs], graphs=len(sources), warmup=args.warmup,
                    iters=args.iters, folder=str(folder), notes=notes)

    def after(index: int, g: GraphRun) -> None:
        with guard.protect():
            progress.clear()
            for hook in settings.hooks:
                finish = getattr(hook, "finish_graph", None)
                if finish is not None:
                    finish(g)
                if getattr(hook, "meta", None):
                    writer.meta["profile"] = {"tool": hook.name, **hook.meta}
            _record_sessions(writer.meta, g)
            if g.reference_origin and writer.meta.get("reference_cache") is not None:
                writer.meta["reference_cache"].setdefault("graphs", {})[g.name] = g.reference_origin
            handout = pool.handouts.get(g.source) if pool is not None else None
            if handout is not None:
                writer.meta["gpus"]["graphs"][g.source] = asdict(handout)
                writer.meta["gpus"]["warm_up_s"] = {str(gpu): spent for gpu, spent in pool.warm_ups.items()}
            if pool is not None:   # where each graph ran survives a kill too (one small atomic write), written
                with contextlib.suppress(OSError):   # before its rows: a kill between the two re-runs the graph
                    write_json(folder / "run.json", writer.meta)
            writer.add_graph(g, lane=None if handout is None else handout.gpu)
            reporter.graph(index, len(sources), g)
            if settings.ab:
                line = _ab_line(g)
                if line:
                    reporter.ab(line)

    runner = IsolatedRunner(timeout, resident=not args.fresh_child) if timeout is not None else None
    split = needs_split(configs, settings.options)
    if split:   # e.g. two hipDNN plugin builds: one process each
        if args.isolate is False:
            raise UserError("these configurations need separate processes (process-wide plugin paths); "
                            "drop --no-isolate")
        runner = SplitRunner(runner or IsolatedRunner(DEFAULT_TIMEOUT_S, resident=not args.fresh_child))
        writer.meta["isolation"] = {**(writer.meta.get("isolation") or {}),
                                    "split": [[c.name for c in g] for g in groups(configs, settings.options)]}
    pool = None
    if args.gpus is not False:
        runner = pool = _pool(writer.meta["gpus"], configs, settings, timeout, split, not args.fresh_child)
    started = time.monotonic()
    status, interrupted, outcome = "error", None, None
    try:
        if isinstance(runner, IsolatedRunner) and sources:   # set up the child before the first graph
            writer.meta["isolation"]["warm_up_s"] = runner.warm(configs, settings)
        if pool is not None:   # progress per iteration means nothing with several GPUs at once
            order = [gpu_pool.estimate_s(s, allow_unknown=args.allow_unknown_fields) for s in sources]
            outcome = pool.run_suite(sources, configs, settings, markers, SuiteCallbacks(
                before_graph=lambda i, s: progress.graph(i - 1, Path(s.name).stem), after_graph=after), order)
        else:
            outcome = run_suite(sources, configs, settings, markers, SuiteCallbacks(
                before_graph=lambda i, s: progress.graph(i - 1, Path(s.name).stem),
                after_graph=after,
                on_iteration=progress.iteration,
                on_stage=progress.stage,
            ), runner=runner)
        status = "complete"
    except Interrupted as exc:
        status, interrupted = "interrupted", exc
    except KeyboardInterrupt:
        status, interrupted = "interrupted", Interrupted(signal.SIGINT)
    except BrokenPipeError:   # `... | head`: the reader left; stop like a signal, keep what finished
        _silence_stdout()
        status, interrupted = "interrupted", Interrupted(signal.SIGPIPE)
    finally:
        with guard.protect(raise_pending=False):
            progress.close()
            if runner is not None:
                runner.close()
            for hook in settings.hooks:
                close = getattr(hook, "close", None)
                if close is not None:
                    close()   # an in-process profiler stops tracing with the run
            if clocks is not None:   # clocks back before run.json is final: it records how that went
                clocks.restore()
                writer.meta["clocks"] = clocks.record()
            writer.finish(status, elapsed_s=round(time.monotonic() - started, 3))
    if interrupted is not None:
        done = writer.frame("summary").get_column("source").n_unique()
        print(f"hipdnn-trace run: interrupted by {signal.Signals(interrupted.signum).name}; "
              f"{done} graph(s) recorded in {escape(folder)} (finish with --resume {escape(folder)})", file=sys.stderr)
        return interrupted.exit_code
    try:
        reporter.final(outcome.runs if outcome else [], str(folder), time.monotonic() - started)
        if args.oracle:   # -q: the geomean line alone
            for line in oracle_lines(writer.frame("oracle"))[:1 if args.quiet else None]:
                reporter.print(line)
    except BrokenPipeError:   # every graph finished; only the table had no reader
        _silence_stdout()
    statuses = writer.frame("summary").get_column("status").to_list()
    if not statuses and args.shard is not None:
        return 0   # more shards than graphs: an empty slice is not a failure
    return exit_code_for(statuses)

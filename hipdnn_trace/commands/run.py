"""``hipdnn-trace run``: time, validate and record graphs (the main job).

This module is the command line's face of a run: its flags (grouped as ``--help`` shows them) and
``main``, which turns argparse's namespace into a ``runs.request.RunRequest`` and executes it
(``runs/``: plan, measure, record), the same path ``hipdnn_trace.run()`` takes from Python.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hipdnn_trace import backends
from hipdnn_trace.backends.reference.budget import DEFAULT_MAX_REFERENCE_S
from hipdnn_trace.bench import gpus as gpu_pool
from hipdnn_trace.bench.isolation import DEFAULT_TIMEOUT_S
from hipdnn_trace.bench.shard import ShardSpec
from hipdnn_trace.commands import SUMMARIES, argtypes
from hipdnn_trace.device.clock_lock import POLICIES
from hipdnn_trace.errors import UserError
from hipdnn_trace.profilers.base import REGISTRY as PROFILERS
from hipdnn_trace.runs.measure import execute
from hipdnn_trace.runs.request import REFERENCE_DEVICES, RunRequest, request_from_args

#: every option's default, from the request (one place)
_D = RunRequest()

EXAMPLES = """\
examples:
  hipdnn-trace run graphs/                          # bundled graphs on the CPU reference
  hipdnn-trace run g.json --backend cudnn -w 20 -i 500 --cache cold
  sudo hipdnn-trace run graphs/perf/ --backend cudnn --clocks lock-base   # no boost drift between runs
  hipdnn-trace run graphs/conv/ --backend cudnn --engine all       # one row per plan
  hipdnn-trace run g.json --backend cudnn --engine list            # list the plans, run nothing
  hipdnn-trace run graphs/perf/ --backend torch --oracle          # ootb vs tuned plan: regret per graph
  hipdnn-trace run g.json --a cudnn:0 --b torch                    # A/B on the same inputs
  hipdnn-trace run graphs/conv --a reference --b reference --ab-band 0.03   # interleaved A/A: SAME?
  hipdnn-trace run g.json --backend hipdnn --APath /opt/a/plugins --BPath /opt/b/plugins
  hipdnn-trace run suite.tar.gz --max-rel-ci 0.01 --format csv,parquet --out runs/
  hipdnn-trace run g.json --save-tensors golden/    # then: run g.json --golden golden/
  hipdnn-trace run integration_test_bundles/quick/   # bundles vs their golden .bin, sweeps per case
  hipdnn-trace run graphs/perf/ --backend cudnn --peaks h100-sxm   # speed of light on H100 SXM peaks
  hipdnn-trace run g.json --backend cudnn --profile ncu    # why: each kernel's limiter (kernel_metrics.csv)
  hipdnn-trace run suite/ --backend hipdnn --graph-timeout 120     # crash/hang -> one error row
  hipdnn-trace run --resume runs/20260101-120000-ab12cd   # graphs and flags from its run.json
  hipdnn-trace run suite/ --backend hipdnn --shard 3/16 --run-id shard3   # then: hipdnn-trace merge
  hipdnn-trace run suite/ --shard auto --run-id shard-$SLURM_ARRAY_TASK_ID  # in a Slurm array task
  hipdnn-trace run --config nightly.toml --iters 500   # recipe (graphs = [...], iters = 200, ...); flags win
  hipdnn-trace inspect big.json && hipdnn-trace run big.json   # "cannot run" there: refused here, same line
  HIPDNN_TRACE_FLOAT64_GFLOPS=110 hipdnn-trace run suite/   # judge --max-reference-seconds at a fixed rate

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
    for add_group in (_what_runs, _timing, _ab, _reliability, _profiling, _validation, _output):
        add_group(p)
    p.set_defaults(main=main)


def _what_runs(p: argparse.ArgumentParser) -> None:
    """Options: backend, engines, A/B configurations, which graphs."""
    g = p.add_argument_group("what runs")
    g.add_argument("--backend", "-b", default=_D.backend, choices=backends.names(),
                   help="executor (default: reference, the CPU float64 oracle)")
    g.add_argument("--engine", "-e", default=_D.engine,
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


def _timing(p: argparse.ArgumentParser) -> None:
    """Options: the measurement loop, timers, clocks and markers."""
    t = p.add_argument_group("timing")
    t.add_argument("--warmup", "-w", type=argtypes.iterations, default=_D.warmup, help="warmup iterations (default 10)")
    t.add_argument("--iters", "-i", type=argtypes.iterations, default=_D.iters,
                   help="minimum timed iterations (default 100)")
    t.add_argument("--min-time-ms", type=argtypes.milliseconds, default=_D.min_time_ms,
                   help="keep timing until this much time passed")
    t.add_argument("--max-rel-ci", type=argtypes.fraction, default=_D.max_rel_ci,
                   help="then until the median's 95%% CI is within this fraction (0.01 = 1%%)")
    t.add_argument("--max-iters", type=argtypes.iterations, default=_D.max_iters, help="cap for the two rules above")
    t.add_argument("--cache", choices=("warm", "cold"), default=_D.cache,
                   help="cold: flush the L2 cache between iterations, outside the timed region")
    t.add_argument("--timing", choices=("auto", "kernel", "staged", "events"), default=_D.timing,
                   help="kernel: kernel_ms is the sum of the iteration's kernel durations from CUPTI's "
                        "activity records (in process; unstaged events beside it give latency_ms); "
                        "staged: hold the GPU stream on a flag while enqueueing, so host launch overhead "
                        "stays out of the event span (falls back to events, with the reason in run.json); "
                        "events: plain events around each execute; auto (default): kernel where CUPTI "
                        "can run in process, else staged (docs/timing.md)")
    t.add_argument("--cuda-graph", action="store_true", help="capture the execution in a CUDA graph and replay it")
    t.add_argument("--device", type=argtypes.non_negative_int, default=_D.device, help="GPU index (default 0)")
    t.add_argument("--clocks", choices=POLICIES, default=_D.clocks,
                   help="lock the GPU clocks for the run (NVML on NVIDIA, amd-smi on AMD; needs root) at the "
                        "base/default clock or the maximum, restored at the end, on a crash or on the next "
                        "run after a kill; refused: a warning and run.json says why (default off)")
    t.add_argument("--throttle-threshold", type=argtypes.percent, default=_D.throttle_threshold, metavar="PCT",
                   help="a timed sample whose SM clock (NVML) is below PCT%% of the reference clock (the locked "
                        "clock under --clocks, else the GPU's default clock) is flagged throttled and left out of "
                        "the statistic, counted in summary's n_throttled (NVIDIA nvbench's rule; default 75, 0: off)")
    t.add_argument("--keep-throttled", action="store_true",
                   help="keep throttled samples in the statistic (still flagged, counted and warned)")
    t.add_argument("--torch-sdpa-backend", choices=("default", "flash", "efficient", "math", "cudnn"),
                   default=_D.torch_sdpa_backend, help="torch backend: which SDPA kernel family torch may use for "
                   "attention (default: torch chooses)")
    t.add_argument("--markers", choices=("auto", "nvtx", "roctx", "none"), default=_D.markers,
                   help="profiler markers around phases (default: what is importable)")


def _ab(p: argparse.ArgumentParser) -> None:
    """Options: the interleaved A/B of --a/--b (bench/ab.py, docs/compare.md)."""
    ab = p.add_argument_group(
        "A/B (--a/--b; docs/compare.md)",
        "A and B run interleaved on the same inputs in blocks, A B B A then B A A B per round, until the "
        "interval on B/A (paired over rounds) is inside the band (SAME) or beyond it (FASTER/SLOWER), "
        "or a cap is hit (UNDECIDED); the verdicts go to ab.csv. Example: "
        "hipdnn-trace run graphs/conv --a reference --b reference --ab-band 0.03")
    ab.add_argument("--ab-band", type=argtypes.fraction, default=_D.ab_band, metavar="FRACTION",
                    help=f"equivalence band: B/A within [1/(1+band), 1+band] is SAME (default {_D.ab_band:g})")
    ab.add_argument("--ab-block", type=argtypes.positive_int, default=_D.ab_block, metavar="N",
                    help=f"timed iterations per block (default {_D.ab_block})")
    ab.add_argument("--ab-block-ms", type=argtypes.milliseconds, default=_D.ab_block_ms, metavar="MS",
                    help=f"and timed iterations until a block took this long (default {_D.ab_block_ms:g}; "
                         "a block shorter than a scheduler slice is all or nothing of a neighbour's burst)")
    ab.add_argument("--ab-min-rounds", type=argtypes.positive_int, default=_D.ab_min_rounds, metavar="N",
                    help=f"rounds (4 blocks each) before a verdict may stop the graph (default "
                         f"{_D.ab_min_rounds}; at least enough for --iters per configuration)")
    ab.add_argument("--ab-max-rounds", type=argtypes.positive_int, default=_D.ab_max_rounds, metavar="N",
                    help=f"cap on rounds: still undecided here is UNDECIDED (default {_D.ab_max_rounds})")
    ab.add_argument("--ab-max-seconds", type=argtypes.seconds, default=_D.ab_max_seconds, metavar="S",
                    help=f"cap on a graph's interleaved timing (default {_D.ab_max_seconds:g}; 0: none)")
    ab.add_argument("--ab-fresh-sessions", type=argtypes.non_negative_int, default=_D.ab_fresh_sessions,
                    metavar="N",
                    help=f"close, prepare and bind both sessions again every N rounds, A or B first by turns, "
                         f"so where their buffers land counts as noise, not as a difference (default "
                         f"{_D.ab_fresh_sessions}: each round its own placement; 0: prepare once; an autotuned "
                         "engine is reused)")
    ab.add_argument("--ab-sequential", action="store_true",
                    help="time A fully, then B (no interleaving, no verdict row)")


def _reliability(p: argparse.ArgumentParser) -> None:
    """Options: isolation, time limits, where the reference runs, resume, shards and GPUs."""
    r = p.add_argument_group("reliability and scale-out (docs/reliability.md)")
    r.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=_D.isolate,
                   help="run each graph in a child process: a crash, hang or out-of-memory becomes one "
                        "error row (default: on for suites of more than one graph on a GPU backend)")
    r.add_argument("--fresh-child", action="store_true",
                   help="isolating: a new child process for every graph, so each first_call_ms includes "
                        "process-level loading (default: one child runs graph after graph and is replaced "
                        "after a crash, a timeout, an error row or 100 graphs)")
    r.add_argument("--graph-timeout", type=argtypes.seconds, default=_D.graph_timeout, metavar="SECONDS",
                   help=f"kill a graph's child process after this long (implies --isolate; default "
                        f"{DEFAULT_TIMEOUT_S:g} when isolating, 0: no limit)")
    r.add_argument("--max-reference-seconds", type=argtypes.seconds, default=_D.max_reference_seconds,
                   metavar="S", help="refuse (one error row) a graph whose float64 CPU reference would take longer "
                   f"than this, estimated from its FLOPs before any work (default {DEFAULT_MAX_REFERENCE_S:g}; "
                   "0: no limit), at this machine's float64 rate, measured once and kept in the user's cache "
                   "folder (HIPDNN_TRACE_FLOAT64_GFLOPS sets it): inspect gives the same verdict")
    r.add_argument("--reference-device", choices=REFERENCE_DEVICES, default=_D.reference_device,
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


def _profiling(p: argparse.ArgumentParser) -> None:
    """Options: a profiler around the run."""
    pr = p.add_argument_group("profiling")
    pr.add_argument("--profile", choices=("none", *PROFILERS), default=_D.profile,
                    help="cupti: kernel trace in-process; ncu / rocprofv3 / rocprof: re-run under the tool")
    pr.add_argument("--profile-set", default=_D.profile_set, metavar="NAME",
                    help="counter set from profiles/: why (ncu's default: each kernel's limiter, occupancy, "
                         "stalls; docs/nvidia.md \"Why\"), basic, memory, compute, roofline, or counter names")
    pr.add_argument("--profile-child", default=_D.profile_child, help=argparse.SUPPRESS)


def _validation(p: argparse.ArgumentParser) -> None:
    """Options: the float64 reference, golden bundles, tolerances, seed, reference cache."""
    v = p.add_argument_group("validation")
    v.add_argument("--validate", choices=("reference", "none"), default=_D.validate,
                   help="compare outputs with the float64 reference (default)")
    v.add_argument("--golden", type=Path, metavar="DIR", help="golden bundles: inputs from them, outputs compared")
    v.add_argument("--rtol", type=argtypes.tolerance,
                   help=f"relative tolerance (default per dtype and op, hipDNN's; at most {argtypes.MAX_RTOL:g})")
    v.add_argument("--atol", type=argtypes.tolerance,
                   help=f"absolute tolerance (default per dtype and op, hipDNN's; at most {argtypes.MAX_ATOL:g})")
    v.add_argument("--test-config", type=Path, metavar="TOML",
                   help="a dnn-providers engine config (config/<ENGINE>.toml): its tolerance and validator "
                        "overrides and test skips judge the hipDNN rows whose test names its globs match "
                        "(docs/hipdnn-format.md 5.1)")
    v.add_argument("--seed", type=int, default=_D.seed, help="input seed (default 0)")
    v.add_argument("--reference-cache", default=_D.reference_cache, metavar="DIR|auto|none",
                   help="keep float64 reference outputs in DIR (auto: $XDG_CACHE_HOME/hipdnn-trace/reference) "
                        "and reuse them on reruns, A/B runs and shards (default none; docs/reliability.md)")
    v.add_argument("--reference-cache-max", type=argtypes.gib, default=_D.reference_cache_max, metavar="GIB",
                   help="trim the reference cache to this size, least recently used first (default 20)")
    c = p.add_argument_group("plan cache")
    c.add_argument("--plan-cache", default=_D.plan_cache, metavar="DIR|auto|none",
                   help="keep built execution plans (cuDNN) in DIR and reuse them when graph, engine, library, "
                        "driver and GPU are the same (default auto: $XDG_CACHE_HOME/hipdnn-trace/plans; "
                        "docs/plan-cache.md)")
    c.add_argument("--no-plan-cache", dest="plan_cache", action="store_const", const="none",
                   help="build every plan, use and store nothing (the same as --plan-cache none)")
    c.add_argument("--plan-cache-max", type=argtypes.gib, default=_D.plan_cache_max, metavar="GIB",
                   help="trim the plan cache to this size, least recently used first (default 2)")
    c.add_argument("--build-workers", type=argtypes.count_or_auto, default=_D.build_workers, metavar="N|auto",
                   help="build the cuDNN plans the plan cache lacks in N processes side by side, ahead of the "
                        "suite: each graph waits only for its own plan, then restores it (default auto: up to 8, "
                        "half the cores, one per 6 graphs, for 8 graphs or more; 0: each plan built in the suite as "
                        "its graph comes; docs/plan-cache.md)")


def _output(p: argparse.ArgumentParser) -> None:
    """Options: the run folder, its formats and the console."""
    o = p.add_argument_group("output")
    o.add_argument("--out", "-o", type=Path, default=_D.out, help="parent of the run directory (default runs/)")
    o.add_argument("--run-id", type=argtypes.run_id,
                   help="name of the run directory inside --out (default: time + random suffix)")
    o.add_argument("--format", type=argtypes.formats, default=list(_D.format),
                   help="formats of the big frames (iterations, kernels, counters): csv,json,parquet "
                        "(default parquet; summary and validation are always CSV); dnnbench also writes "
                        "results.dnnbench.json/.csv in ROCm dnn-benchmarking's schema v2 (its newest layout)")
    o.add_argument("--peaks", metavar="NAME|FILE",
                   help="GPU peaks for speed of light (a row of the peak table, e.g. h100-sxm, or a peaks file "
                        "from hipdnn-trace calibrate; default: the row of the GPU's name; docs/speed-of-light.md)")
    o.add_argument("--trace", dest="trace", action="store_true", default=True, help="write trace.pftrace (default)")
    o.add_argument("--no-trace", dest="trace", action="store_false", help="do not write a Perfetto trace")
    o.add_argument("--save-tensors", type=Path, metavar="DIR", help="write inputs and outputs as golden bundles")
    o.add_argument("--db", metavar="FILE|URL", help="when the run ends, import it into this results store: a DuckDB "
                   "file or a postgresql:// URL (hipdnn-trace history reads it; docs/history.md)")
    o.add_argument("--quiet", "-q", action="store_true",
                   help="only the final count line (no per-graph lines, table or progress line; errors and "
                        "warnings still go to stderr)")
    o.add_argument("--verbose", "-v", action="store_true", help="a full block per graph, also in suites")
    o.add_argument("--progress", choices=("auto", "on", "off"), default=_D.progress,
                   help="progress line on stderr (auto: on a terminal, not with -q)")


def main(args: argparse.Namespace) -> int:
    """Run what the command line asked: the request, planned (every refusal first), measured, recorded."""
    return execute(request_from_args(args)).exit_code

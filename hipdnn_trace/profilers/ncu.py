"""``run --profile ncu``: Nsight Compute counters for the timed iterations, folded into the run.

Two child runs (``profilers.external`` starts them):

* pass 0 — the measured run, with the in-process CUPTI kernel trace (``--profile-child
  cupti``) and no counters: its timings are undisturbed and its kernels carry real
  start/end times for the timeline;
* pass 1 — the same arguments under ``ncu`` with a few iterations (``HIPDNN_TRACE_NCU_ITERS``,
  default 3), scoped by NVTX to the harness's timed iterations only
  (``--nvtx-include 'regex:hipdnn_trace@execute/iter [0-9]+/'``: the L2 flush and anything
  else between iterations is never profiled), ``--clock-control none`` by default
  (``HIPDNN_TRACE_NCU_CLOCK_CONTROL=base`` locks base clocks), metrics from
  ``profiles/<arch>.toml`` (``--profile-set``, default ``why``: docs/nvidia.md "Why"); the
  replay cost is printed before the pass starts.

``collect`` exports ncu's report as ``--csv --page raw`` (``ncu_raw.csv`` in the run
directory), maps every counted kernel to pass 0's kernel at the same place (graph,
config, iteration, position in the iteration, same name), derives metrics and
each kernel's why columns and limiter (:mod:`.ncu_why`, :mod:`.why`), per graph the time by
limiter (:mod:`.graph_limiters`), and adds per-kernel counter tracks to the run's trace.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl

from hipdnn_trace.errors import UserError
from hipdnn_trace.profilers import counters as derived_metrics, ncu_csv, ncu_why
from hipdnn_trace.profilers.base import Collected
from hipdnn_trace.profilers.graph_limiters import graph_limiters, graphs_by_limiter
from hipdnn_trace.profilers.harness_kernels import drop_harness
from hipdnn_trace.profilers.ncu_tool import export_command, find_ncu
from hipdnn_trace.profilers.profiles import Profile, load_peaks, normalize_arch, profile_for_arch, select_gpu
from hipdnn_trace.results import schemas
from hipdnn_trace.results.kernel_names import with_demangled

NVTX_FILTER = "regex:hipdnn_trace@execute/iter [0-9]+/"
DEFAULT_SETS = "why"
#: ncu replay passes per kernel, as profiler__replayer_passes reports them on an H200 (ncu 2025.3.1):
#: measured for basic,memory,roofline (tests/data/ncu/perf_cudnn_roofline_raw_base_units.csv) and
#: --set full (tests/data/ncu/*_full_raw.csv); why over all of graphs/perf (docs/benchmarks.md "Fifth session").
REPLAY_PASSES = {"basic,memory,roofline": (15, "measured"), "full": (38, "measured"), "why": (22, "measured")}
REPORT = "ncu_pass1"
_LABELS = ["graph_id", "config", "iteration"]


#: the why columns drawn as per-kernel counter tracks in the run's trace (beside the raw counters)
WHY_TRACKS = ("sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "l1_throughput_pct",
              "l2_throughput_pct", "achieved_occupancy_pct", "issue_active_pct", "tensor_pipe_pct")


def why_counters(metrics: pl.DataFrame | None, counters: pl.DataFrame) -> pl.DataFrame:
    """kernel_metrics' why columns as long counter rows ("why sm_throughput_pct", %) on the same kernels
    (dispatch_id is the traced correlation id), so the trace shows them as counter tracks."""
    if metrics is None or metrics.is_empty() or "dispatch_id" not in metrics.columns:
        return counters.clear()
    keep = [c for c in WHY_TRACKS if c in metrics.columns]
    labels = [c for c in ("run_id", "graph", "graph_id", "config", "iteration", "kernel", "device")
              if c in metrics.columns]
    if not keep:
        return counters.clear()
    long = metrics.select(*labels, pl.col("dispatch_id").cast(pl.Int64).alias("correlation_id"),
                          *[pl.col(c).cast(pl.Float64) for c in keep]).unpivot(
        index=[*labels, "correlation_id"], on=keep, variable_name="counter", value_name="value")
    return long.filter(pl.col("value").is_not_null() & (pl.col("correlation_id") >= 0)).with_columns(
        ("why " + pl.col("counter")).alias("counter"), pl.lit("%").alias("unit"), pl.lit("ncu").alias("source"))


def child_pass_arguments(iters: int) -> list[str]:
    """Appended to the counter pass's child: a short loop (argparse keeps the last value), and
    plain event timing, so staged timing's hold kernel never runs under ncu."""
    return ["--warmup", "1", "--iters", str(iters), "--max-iters", str(iters), "--min-time-ms", "0", "--no-trace",
            "--timing", "events"]


def timing_child(child: list[str], in_process: str | None) -> list[str]:
    """Pass 0's child: ``--profile-child ncu`` becomes the in-process kernel trace (or nothing)."""
    out = list(child)
    if "--profile-child" in out:
        i = out.index("--profile-child")
        if in_process:
            out[i + 1] = in_process
        else:
            del out[i:i + 2]
    return out


def ncu_command(exe: str, child: list[str], report: Path, metrics: list[str], clock_control: str,
                iters: int) -> list[str]:
    return [exe, "--nvtx", "--nvtx-include", NVTX_FILTER, "--clock-control", clock_control,
            "--metrics", ",".join(metrics), "--export", str(report), "--force-overwrite",
            "--target-processes", "all", *child, *child_pass_arguments(iters)]


def replay_estimate(args: Any, iterations: int) -> str:
    """The counter pass's replay cost, said before it starts: passes per kernel x kernels x
    iterations (kernels per iteration are not known before the graphs run: per kernel)."""
    from hipdnn_trace.graph.sources import expand

    spec = getattr(args, "profile_set", None) or DEFAULT_SETS
    passes, how = REPLAY_PASSES.get(spec, (max(p for p, _ in REPLAY_PASSES.values()), "upper bound"))
    try:
        graphs = len(expand(getattr(args, "graphs", ()) or ()))
    except Exception:   # the run itself reports bad paths
        graphs = 0
    configs = 2 if (getattr(args, "oracle", False) or getattr(args, "a", None)) else 1
    replays = passes * max(graphs, 1) * configs * iterations
    return (f"--profile ncu --profile-set {spec}: ~{passes} replay passes per kernel ({how}) x up to {graphs} "
            f"graph(s) x {configs} configuration(s) x {iterations} iteration(s) = ~{replays} kernel replays per "
            "kernel of an iteration (HIPDNN_TRACE_NCU_ITERS sets the iterations)")


def with_why(metrics: pl.DataFrame, counters: pl.DataFrame, table: ncu_csv.RawTable) -> pl.DataFrame:
    """The derived (roofline) metrics of each kernel joined with its why columns and limiter
    (profilers/ncu_why.py, profilers/why.py), through the raw page's ID."""
    if metrics.is_empty():
        return metrics
    why, _ = ncu_why.kernel_metrics(table)
    ids = counters.select("correlation_id", "ncu_id").unique(subset=["correlation_id"])
    labels = {"graph_id", "config", "phase", "iteration", "device", "dispatch_id", "kernel", "duration_ns"}
    drop = [c for c in ("verdict", "verdict_reason") if c in metrics.columns]
    return metrics.drop(drop).join(ids, left_on="dispatch_id", right_on="correlation_id", how="left").join(
        why.select([c for c in why.columns if c not in labels]), on="ncu_id", how="left")


def _ordinal(frame: pl.DataFrame, order: str) -> pl.DataFrame:
    return frame.sort(order).with_columns(pl.int_range(pl.len()).over(_LABELS).alias("_ord"))


def map_to_trace(ncu_kernels: pl.DataFrame, ncu_counters: pl.DataFrame,
                 traced: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Give counters the correlation id and times of the same kernel in pass 0's trace.

    Same kernel = same graph_id, config (marker-safe spelling), iteration, position within
    the iteration and mangled name. Returns (counters, number of counted kernels without a
    twin; those keep a negative id so they cannot collide with traced kernels).
    """
    if ncu_counters.is_empty():
        return ncu_counters, 0
    p = _ordinal(ncu_kernels.filter(pl.col("iteration").is_not_null()), "correlation_id").select(
        *_LABELS, "_ord", pl.col("correlation_id").alias("_ncu"), pl.col("name").alias("_pname"))
    if traced.is_empty():
        pairs = p.with_columns(pl.lit(None, dtype=pl.Int64).alias("_corr"), pl.lit(None, dtype=pl.Int64)
                               .alias("_start"), pl.lit(None, dtype=pl.Int64).alias("_end"))
    else:
        t = traced.with_columns(pl.col("config").cast(pl.String).str.replace_all(r"[/@ ]", "_").alias("_safe"))
        if "mangled_name" in t.columns:   # pass 0's names are demangled; ncu prints the mangled base name
            t = t.with_columns(pl.coalesce("mangled_name", "name").alias("name"))
        m = _ordinal(t.select("graph_id", pl.col("_safe").alias("config"), "iteration", "name", "correlation_id",
                              "start_ns", "end_ns"), "start_ns")
        pairs = p.join(m.select(*_LABELS, "_ord", pl.col("name").alias("_mname"), pl.col("correlation_id")
                                .alias("_corr"), pl.col("start_ns").alias("_start"), pl.col("end_ns").alias("_end")),
                       on=[*_LABELS, "_ord"], how="left", nulls_equal=True)
        pairs = pairs.with_columns(
            *[pl.when(pl.col("_mname") == pl.col("_pname")).then(pl.col(c)).otherwise(None).alias(c)
              for c in ("_corr", "_start", "_end")]).drop("_mname")
    out = ncu_counters.join(pairs.select("_ncu", "_corr", "_start", "_end"), left_on="correlation_id",
                            right_on="_ncu", how="left")
    lost = out.filter(pl.col("_corr").is_null()).select("correlation_id").n_unique()
    out = out.with_columns(
        pl.coalesce("_corr", -(pl.col("correlation_id") + 1)).alias("correlation_id"),
        pl.col("_start").alias("start_ns"), pl.col("_end").alias("end_ns"),
        pl.col("correlation_id").alias("ncu_id"),
    ).drop("_corr", "_start", "_end")
    return out, lost


def relabel(frame: pl.DataFrame, iterations: pl.DataFrame) -> pl.DataFrame:
    """Marker-safe config names back to the real ones; run_id and graph from the iterations."""
    if frame.is_empty() or iterations.is_empty():
        return frame
    pairs = iterations.select("graph_id", "config", "graph", "run_id").unique(subset=["graph_id", "config"]) \
        .with_columns(pl.col("config").str.replace_all(r"[/@ ]", "_").alias("_safe"))
    out = frame.join(pairs.select("graph_id", "_safe", pl.col("config").alias("_config"), pl.col("graph").alias("_g"),
                                  pl.col("run_id").alias("_r")),
                     left_on=["graph_id", "config"], right_on=["graph_id", "_safe"], how="left", nulls_equal=True)
    return out.with_columns(pl.coalesce("_config", "config").alias("config"), pl.col("_g").alias("graph"),
                            pl.col("_r").alias("run_id")).drop("_config", "_g", "_r")


class NcuProfiler:
    """ExternalProfiler for Nsight Compute (see the module docstring)."""

    name = "ncu"
    markers = "nvtx"

    def __init__(self) -> None:
        self._exe: str | None = None
        self._version: str | None = None
        self._profile: Profile | None = None
        self._metrics: list[str] | None = None
        self._arch: str | None = None
        self._why_metrics: pl.DataFrame | None = None

    # ---------------------------------------------------------------- planning

    def check_tool(self) -> None:
        self._exe = find_ncu()
        try:
            out = subprocess.run([self._exe, "--version"], capture_output=True, text=True, timeout=60).stdout
            self._version = out.strip().splitlines()[-1] if out.strip() else None
        except (OSError, subprocess.TimeoutExpired):
            self._version = None

    def clock_control(self) -> str:
        value = os.environ.get("HIPDNN_TRACE_NCU_CLOCK_CONTROL", "none")
        if value not in ("none", "base"):
            raise UserError(f"HIPDNN_TRACE_NCU_CLOCK_CONTROL={value}: expected none or base")
        return value

    def iterations(self) -> int:
        text = os.environ.get("HIPDNN_TRACE_NCU_ITERS", "3")
        if not text.isdigit() or int(text) < 1:
            raise UserError(f"HIPDNN_TRACE_NCU_ITERS={text}: expected a positive integer")
        return int(text)

    def arch(self, args: argparse.Namespace) -> str:
        if self._arch is None:
            from hipdnn_trace.device.nvml import gpu_info

            env = os.environ.get("HIPDNN_TRACE_GPU_ARCH")
            info = gpu_info(int(getattr(args, "device", 0) or 0))
            arch = normalize_arch(env) if env else (info or {}).get("arch")
            if not arch:
                raise UserError("--profile ncu: cannot tell the GPU architecture (no NVML); set "
                                "HIPDNN_TRACE_GPU_ARCH=sm_90")
            self._arch = arch
        return self._arch

    def metrics(self, args: argparse.Namespace) -> list[str]:
        if self._metrics is None:
            from hipdnn_trace.profilers.rocprof.runner import requested_counters

            self._profile = profile_for_arch(self.arch(args))
            wanted = requested_counters(self._profile, getattr(args, "profile_set", None) or DEFAULT_SETS)
            duration = "gpu__time_duration.sum"
            self._metrics = list(dict.fromkeys([duration, *wanted]))
        return self._metrics

    def passes(self, args: argparse.Namespace) -> int:
        self.metrics(args)   # an unknown preset fails before anything runs
        print(f"hipdnn-trace run: {replay_estimate(args, self.iterations())}", file=sys.stderr)
        return 2

    def env(self, pass_index: int) -> dict[str, str]:
        return {}

    def command(self, child_argv: list[str], out_dir: Path, pass_index: int, args: argparse.Namespace) -> list[str]:
        if pass_index == 0:
            trace = "cupti" if importlib.util.find_spec("cupti") is not None else None
            return timing_child(child_argv, trace)
        return ncu_command(self._exe or find_ncu(), child_argv, out_dir.parent / REPORT, self.metrics(args),
                           self.clock_control(), self.iterations())

    def timing_meta(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"profiler": self.name, "clock_control": self.clock_control(),
                "kernel_times": "pass 0: event timing + CUPTI kernel trace, no counters; ncu counters from "
                                f"pass 1 ({self.iterations()} timed iterations under ncu)"}

    # ---------------------------------------------------------------- collection

    def collect(self, run_dir: Path, pass_dirs: list[Path], iterations: pl.DataFrame,
                args: argparse.Namespace) -> Collected:
        from hipdnn_trace.results.rundir import _write_frame, load_run

        exe = self._exe or find_ncu()
        report = (pass_dirs[0].parent if pass_dirs else run_dir / "passes") / f"{REPORT}.ncu-rep"
        if not report.exists():
            raise UserError(f"--profile ncu: no report {report} (the counter pass failed; see its output above)")
        done = subprocess.run(export_command(exe, report), capture_output=True, text=True, timeout=600)
        csv_path = run_dir / "ncu_raw.csv"
        csv_path.write_text(done.stdout)
        if done.returncode != 0 or not ncu_csv.looks_like_ncu_raw(done.stdout[:200_000]):
            raise UserError(f"--profile ncu: exporting {report} failed: {' '.join(done.stderr.split())[:300]}")
        table = ncu_csv.read_raw_csv(csv_path, done.stdout)
        metrics = self.metrics(args)
        n_kernels, n_counters = ncu_csv.frames(table, metrics)
        n_kernels = ncu_csv.last_loop(n_kernels.filter(pl.col("iteration").is_not_null()))
        n_kernels, harness = drop_harness(n_kernels)
        n_counters = n_counters.join(n_kernels.select("correlation_id"), on="correlation_id", how="semi")
        run = load_run(run_dir)
        traced = run.kernels
        counters, lost = map_to_trace(n_kernels, n_counters, traced)
        counters = relabel(counters, iterations)
        kernels_out = schemas.empty(schemas.KERNELS)
        notes = list(table.notes)
        if harness:
            notes.append(f"{harness} harness kernels (hipdnn_trace_hold, input generation) left out")
        if traced.is_empty():
            notes.append("pass 0 has no kernel trace (cupti-python missing): kernels come from ncu, without times")
            kernels_out = relabel(n_kernels, iterations)
        if lost:
            notes.append(f"{lost} counted kernels have no same-named kernel at the same place in pass 0")
        meta: dict[str, Any] = {
            "tool": exe, "tool_version": self._version, "arch": self.arch(args), "metrics": metrics,
            "profile_set": getattr(args, "profile_set", None) or DEFAULT_SETS, "nvtx_include": NVTX_FILTER,
            "clock_control": self.clock_control(), "cache_control": "all (ncu default: caches flushed per replay)",
            "iterations_profiled": self.iterations(), "kernels_profiled": n_kernels.height,
            "report": str(report.relative_to(run_dir)) if report.is_relative_to(run_dir) else str(report),
            "csv": csv_path.name,
        }
        if counters.height:
            meta.update(self._derive(run_dir, run, counters, traced, notes, _write_frame, table))
        if counters.height and traced.height:
            self._add_tracks(run_dir, pl.concat([counters, why_counters(self._why_metrics, counters)],
                                                how="diagonal_relaxed"), traced)
        meta["notes"] = notes
        return Collected(kernels=kernels_out, counters=counters, meta=meta)

    def _derive(self, run_dir: Path, run: Any, counters: pl.DataFrame, traced: pl.DataFrame, notes: list[str],
                write: Any, table: ncu_csv.RawTable) -> dict[str, Any]:
        """kernel_metrics (roofline columns + the why columns and limiter) and graph_limiters."""
        gpu_name = (run.meta.get("gpu") or {}).get("name")
        spec = select_gpu(load_peaks(), self._arch, gpu_name)
        if spec is None:
            notes.append(f"no peak-table entry for {gpu_name!r}: no % of peak or roofline")
        profile = self._profile or profile_for_arch(self._arch or "sm_90")
        c = counters.with_columns(pl.col("correlation_id").alias("dispatch_id"))
        wide = derived_metrics.wide_counters(c.with_columns(pl.lit("timed").alias("phase")))
        metrics = with_demangled(with_why(derived_metrics.derive(wide, profile, spec), counters, table), "kernel")
        self._why_metrics = metrics
        summary = run.summary
        analytical = summary.select("graph_id", "config", "flops") if summary.height else None
        limiters = graph_limiters(metrics, analytical)
        write(run_dir / "counters_wide.parquet", wide, "parquet")
        write(run_dir / "kernel_metrics.parquet", metrics, "parquet")
        write(run_dir / "kernel_metrics.csv", metrics.select([col for col, dt in metrics.schema.items()
                                                               if dt != pl.List]), "csv")
        write(run_dir / "graph_limiters.parquet", limiters, "parquet")
        write(run_dir / "graph_limiters.csv", limiters, "csv")
        out: dict[str, Any] = {"gpu": spec.name if spec else None, "peaks_source": spec.source if spec else None}
        passes = ncu_csv.number((table.column("profiler__replayer_passes") or [""])[0]) \
            if "profiler__replayer_passes" in table.columns else None
        if passes is not None:
            out["replay_passes_per_kernel"] = int(passes)
        if limiters.height:
            # per graph: the roofline sums and FLOP ratio as before; the verdict is the dominant limiter
            # (the FLOP/DRAM verdict only where no kernel has one: a set without the why metrics)
            timed = traced.filter(pl.col("iteration").is_not_null()) if traced.height else None
            graphs = graphs_by_limiter(derived_metrics.graph_verdicts(metrics, spec, kernels=timed,
                                                                      analytical=analytical), limiters)
            out["verdicts"] = graphs.with_columns(pl.col("verdict").alias("bottleneck"))
            ratios = limiters.select("graph_id", "config", "flops_ratio").unique(subset=["graph_id", "config"])
            out["flops_ratio"] = {f"{g}|{cfg}": r for g, cfg, r in ratios.iter_rows() if r is not None}
        return out

    def _add_tracks(self, run_dir: Path, counters: pl.DataFrame, traced: pl.DataFrame) -> None:
        """Counter tracks on the traced kernels' times (the ncu pass itself has no timestamps)."""
        from hipdnn_trace.results.timeline import add_counters
        from hipdnn_trace.trace.writer import TraceWriter

        path = run_dir / "trace.pftrace"
        if not path.exists():
            return
        placed = counters.filter(pl.col("correlation_id") >= 0)
        kernels = traced.with_columns(pl.lit("ncu").alias("source"))
        with TraceWriter(path, append=True) as writer:
            add_counters(writer, placed, kernels)

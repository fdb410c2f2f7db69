"""``run --profile rocprofv3`` / ``--profile rocprof``: the ExternalProfiler side of AMD profiling.

:mod:`hipdnn_trace.profilers.external` runs the harness child once per pass under the
command built here. Pass 0 is the measured run: kernel and marker trace only, so
counter collection (which serialises dispatches) never touches the timings. Passes
1..N each collect one group of counters that fits the hardware's per-block limits
(:func:`.argv.split_passes`). ``collect`` then

* parses pass 0 into the run's kernels, joined to iterations through the roctx ranges
  (:mod:`.markers_join`); if the capture has no harness ranges (no roctx library, or the
  tool's collection was paused around them) the iterations frame's own timestamps stand
  in for them (same CLOCK_BOOTTIME clock);
* parses each counter pass, joins it the same way, and maps every counted dispatch to
  pass 0's dispatch that is the same kernel at the same place: graph, config, phase,
  iteration and position within the iteration (dispatch ids differ between processes);
* derives metrics and verdicts with the GPU's arch profile and peak table, using pass
  0's kernel durations (the undisturbed ones) for rates.

``--profile-set`` takes preset names of profiles/<arch>.toml (``roofline``,
``basic,memory``) or counter names, comma separated.

Counter passes run with ``--selected-regions`` where the installed rocprofv3 has it
(its ``--help`` says so): the harness then calls ``roctxProfilerResume``/``Pause``
around each timed loop (``HIPDNN_TRACE_ROCTX_REGIONS=1``, see markers_roctx.py), so
newer rocprofv3 (whose counter context pauses with the rest) counts only timed
dispatches. Pass 0 never pauses: its trace must keep every phase.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import polars as pl

from hipdnn_trace.errors import UserError
from hipdnn_trace.markers import graph_range_name, iteration_name
from hipdnn_trace.markers_roctx import REGIONS_ENV
from hipdnn_trace.profilers import counters as derived_metrics
from hipdnn_trace.profilers.base import Collected
from hipdnn_trace.profilers.graph_limiters import graph_limiters, graphs_by_limiter
from hipdnn_trace.profilers.ingest import Ingested, gpu_facts, ingest, write_frame
from hipdnn_trace.profilers.profiles import Profile, load_peaks, normalize_arch, profile_for_arch, select_gpu
from hipdnn_trace.profilers.rocprof import argv as cmdline, why_amd
from hipdnn_trace.profilers.rocprof.frames import MARKERS
from hipdnn_trace.profilers.rocprof.markers_join import PREFIX, join_iterations

_LABELS = ["graph_id", "config", "phase", "iteration"]


def detect_gpu_arch(device: int = 0) -> str | None:
    """gfx target of GPU ``device``: $HIPDNN_TRACE_GPU_ARCH, rocm_agent_enumerator, rocminfo."""
    env = os.environ.get("HIPDNN_TRACE_GPU_ARCH")
    if env:
        return normalize_arch(env)
    for cmd in (["rocm_agent_enumerator"], ["rocminfo"]):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        gpus = [g for g in re.findall(r"\bgfx[0-9a-f]+\b", out) if g != "gfx000"]
        if cmd[0] == "rocminfo":
            gpus = list(dict.fromkeys(gpus)) if len(set(gpus)) == 1 else gpus
        if len(gpus) > device:
            return gpus[device]
    return None


@functools.lru_cache(maxsize=8)
def tool_has_option(exe: str, option: str) -> bool:
    """Whether ``exe --help`` lists ``option`` (rocprofv3 grew --selected-regions after 6.3)."""
    try:
        proc = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in proc.stdout + proc.stderr


def with_option(argv: list[str], option: str) -> list[str]:
    """``option`` added to the tool's own options (before ``--`` and the application)."""
    cut = argv.index("--") if "--" in argv else len(argv)
    return [*argv[:cut], option, *argv[cut:]]


def requested_counters(profile: Profile, spec: str | None) -> list[str]:
    """``--profile-set`` -> counter names: preset names and/or counters, comma separated."""
    if not spec:
        return []
    out: list[str] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if item in profile.presets:
            out += profile.presets[item].counters
        elif item in profile.counters:
            out.append(item)
        else:
            raise UserError(
                f"--profile-set {item}: neither a preset ({', '.join(profile.presets)}) nor a counter "
                f"declared in {profile.path.name}"
            )
    return list(dict.fromkeys(out))


def markers_from_iterations(iterations: pl.DataFrame) -> pl.DataFrame:
    """Harness ranges rebuilt from the iterations frame (start_ns + host time), one thread.

    Used when a capture has no roctx ranges: legacy rocprof keeps them only in its JSON,
    and a paused collection loses the graph range. Valid because the harness and the
    profilers stamp the same clock (CLOCK_BOOTTIME ns).
    """
    need = {"graph_id", "config", "phase", "iteration", "start_ns", "host_ms"}
    if iterations.is_empty() or not need <= set(iterations.columns):
        return pl.DataFrame(schema=MARKERS)
    it = iterations.filter(pl.col("start_ns").is_not_null()).with_columns(
        (pl.col("start_ns") + (pl.col("host_ms").fill_null(0.0) * 1e6).cast(pl.Int64)).alias("end_ns")
    )
    rows: list[dict[str, Any]] = []
    for (graph_id, config), g in it.group_by(["graph_id", "config"], maintain_order=True):
        rows.append({"name": f"{PREFIX}{graph_range_name(str(graph_id), str(config or ''))}".rstrip(),
                     "start_ns": g["start_ns"].min(), "end_ns": g["end_ns"].max()})
        for phase, name in (("warmup", "warmup"), ("timed", "execute")):
            p = g.filter(pl.col("phase") == phase)
            if p.height:
                rows.append({"name": f"{PREFIX}{name}", "start_ns": p["start_ns"].min(), "end_ns": p["end_ns"].max()})
                rows += [{"name": f"{PREFIX}{iteration_name(i)}", "start_ns": s, "end_ns": e}
                         for i, s, e in p.select("iteration", "start_ns", "end_ns").iter_rows()]
    return pl.DataFrame(rows, schema={k: MARKERS[k] for k in ("name", "start_ns", "end_ns")}).with_columns(
        [pl.lit(None, dtype=MARKERS[c]).alias(c) for c in ("process_id", "thread_id", "correlation_id")]
    ).select(list(MARKERS))


def _relabel(frame: pl.DataFrame, iterations: pl.DataFrame) -> pl.DataFrame:
    """Marker config names are made safe for ncu filters; put the real names back, add
    run_id and graph (name) from the iterations frame."""
    if frame.is_empty() or iterations.is_empty():
        return frame
    pairs = iterations.select("graph_id", "config", "graph", "run_id").unique(subset=["graph_id", "config"])
    safe = pairs.with_columns(
        pl.col("config").cast(pl.String).str.replace_all(r"[/@ ]", "_").alias("_safe")
    )
    out = frame.join(
        safe.select("graph_id", pl.col("_safe"), pl.col("config").alias("_config"), pl.col("graph").alias("_graph"),
                    pl.col("run_id").alias("_run")),
        left_on=["graph_id", "config"], right_on=["graph_id", "_safe"], how="left", nulls_equal=True,
    )
    return out.with_columns(
        pl.coalesce("_config", "config").alias("config"),
        pl.coalesce("_graph", "graph").alias("graph"),
        pl.coalesce("_run", "run_id").alias("run_id"),
    ).drop("_config", "_graph", "_run")


def _ordinals(kernels: pl.DataFrame) -> pl.DataFrame:
    return kernels.sort("start_ns", nulls_last=True).with_columns(
        pl.int_range(pl.len()).over(_LABELS).alias("_ord")
    )


def map_to_main(counters: pl.DataFrame, pass_kernels: pl.DataFrame,
                main_kernels: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Give a counter pass's dispatches the ids of the same kernels in the measured run.

    Returns (counters, number of counted dispatches without a same-named twin in pass 0;
    those keep their own ids).
    """
    if counters.is_empty() or pass_kernels.is_empty() or main_kernels.is_empty():
        return counters, 0
    p = _ordinals(pass_kernels.filter(pl.col("dispatch_id").is_not_null())).select(
        "dispatch_id", "device", *_LABELS, "_ord", pl.col("name").alias("_pname"))
    m = _ordinals(main_kernels).select(
        *_LABELS, "_ord", pl.col("name").alias("_mname"), pl.col("dispatch_id").alias("_mdisp"),
        pl.col("correlation_id").alias("_mcorr"), pl.col("device").alias("_mdev"),
        pl.col("start_ns").alias("_mstart"), pl.col("end_ns").alias("_mend"))
    pairs = p.join(m, on=[*_LABELS, "_ord"], how="left", nulls_equal=True).filter(pl.col("_pname") == pl.col("_mname"))
    out = counters.join(pairs.select("dispatch_id", "device", "_mdisp", "_mcorr", "_mdev", "_mstart", "_mend"),
                        on=["dispatch_id", "device"], how="left", nulls_equal=True)
    lost = out.filter(pl.col("_mdisp").is_null()).select("dispatch_id").n_unique()
    mapped = pl.col("_mdisp").is_not_null()
    # Times move to pass 0's timeline (the run's trace); a pass's own times mean nothing there.
    out = out.with_columns(
        pl.coalesce("_mdisp", "dispatch_id").alias("dispatch_id"),
        pl.when(mapped).then(pl.col("_mcorr")).otherwise(pl.col("correlation_id")).alias("correlation_id"),
        pl.coalesce("_mdev", "device").alias("device"),
        pl.when(mapped).then(pl.col("_mstart")).otherwise(None).alias("start_ns"),
        pl.when(mapped).then(pl.col("_mend")).otherwise(None).alias("end_ns"),
    ).drop("_mdisp", "_mcorr", "_mdev", "_mstart", "_mend")
    return out, lost


class _AmdProfiler:
    name = "rocprofv3"
    markers = "roctx"
    folder = "rocprofv3"

    def __init__(self) -> None:
        self._exe: str | None = None
        self._version: str | None = None
        self._arch: str | None = None
        self._plans: dict[str | None, list[tuple[str, ...]]] = {}
        self._profile: Profile | None = None
        self._scoped: set[int] = set()      # passes run with --selected-regions

    # --- planning -----------------------------------------------------------

    def _arch_of(self, args: argparse.Namespace) -> str | None:
        if self._arch is None:
            self._arch = detect_gpu_arch(int(getattr(args, "device", 0) or 0))
        return self._arch

    def plan(self, args: argparse.Namespace) -> list[tuple[str, ...]]:
        """Counter groups of passes 1..N (empty without --profile-set)."""
        spec = getattr(args, "profile_set", None) or None
        if spec not in self._plans:
            if spec is None:
                self._plans[spec] = []
            else:
                arch = self._arch_of(args)
                if arch is None:
                    raise UserError("--profile-set: cannot tell the GPU architecture "
                                    "(no rocm_agent_enumerator/rocminfo; set HIPDNN_TRACE_GPU_ARCH=gfx942)")
                self._profile = profile_for_arch(arch)
                self._plans[spec] = cmdline.split_passes(requested_counters(self._profile, spec), self._profile)
        return self._plans[spec]

    def passes(self, args: argparse.Namespace) -> int:
        return 1 + len(self.plan(args))

    def env(self, pass_index: int) -> dict[str, str]:
        """Scoped passes: the child's roctx markers pause/resume around each timed loop."""
        return {REGIONS_ENV: "1"} if pass_index in self._scoped else {}

    def timing_meta(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"profiler": self.name, "counter_passes": len(self.plan(args)),
                "kernel_times": f"{self.name} kernel trace of pass 0 (no counters collected in it)"}

    # --- collection ---------------------------------------------------------

    def _ingest(self, folder: Path, what: str) -> Ingested:
        if not folder.is_dir() or not any(folder.rglob("*")):
            raise UserError(f"--profile {self.name}: {what} wrote no profile in {folder}")
        return ingest([folder])

    def _joined(self, result: Ingested, iterations: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Kernels and counters labelled; falls back to iteration timestamps without markers."""
        kernels, counters = result.kernels, result.counters
        if kernels.height and kernels["phase"].is_null().all():
            synthetic = markers_from_iterations(iterations)
            if synthetic.height:
                kernels = join_iterations(kernels, synthetic)
                if counters.height and {"start_ns"} <= set(counters.columns):
                    counters = join_iterations(counters, synthetic)
        return _relabel(kernels, iterations), _relabel(counters, iterations)

    def collect(self, run_dir: Path, pass_dirs: list[Path], iterations: pl.DataFrame,
                args: argparse.Namespace) -> Collected:
        from hipdnn_trace.results.rundir import load_run

        main = self._ingest(run_dir / self.folder, "the measured run")
        kernels, _ = self._joined(main, iterations)
        kernels = kernels.with_columns(pl.lit(0, dtype=pl.Int64).alias("pass"))
        notes = list(main.notes)
        plan = self.plan(args)
        parts = []
        for index, pass_dir in enumerate(pass_dirs, start=1):
            its = load_run(pass_dir).iterations if (pass_dir / "run.json").exists() else iterations
            result = self._ingest(pass_dir / self.folder, f"counter pass {index}")
            pk, pc = self._joined(result, its)
            pc, lost = map_to_main(pc, pk, kernels)
            if lost:
                notes.append(f"pass {index}: {lost} counted dispatches have no same kernel at the same place in pass 0")
            parts.append(pc.with_columns(pl.lit(index, dtype=pl.Int64).alias("pass")))
        counters = pl.concat(parts, how="vertical_relaxed") if parts else main.counters
        meta: dict[str, Any] = {
            "tool": self._exe or self.name, "tool_version": self._version,
            "profile_set": getattr(args, "profile_set", None), "passes": [list(p) for p in plan],
            "join": {str(k): int(v) for k, v in kernels.group_by("join").len().iter_rows()} if kernels.height else {},
        }
        if counters.height:
            meta.update(self._derive(run_dir, kernels, counters, main, notes))
        meta["notes"] = notes
        return Collected(kernels=kernels, counters=counters, meta=meta)

    def _derive(self, run_dir: Path, kernels: pl.DataFrame, counters: pl.DataFrame, main: Ingested,
                notes: list[str]) -> dict[str, Any]:
        from hipdnn_trace.results.rundir import load_run

        arch, product, consts = gpu_facts(main.agents)
        arch = arch or self._arch
        if arch is None:
            notes.append("derived metrics skipped: GPU architecture unknown")
            return {}
        profile = self._profile or profile_for_arch(arch)
        spec = select_gpu(load_peaks(), arch, product, int(consts["cu_count"]) if "cu_count" in consts else None)
        wide = derived_metrics.wide_counters(counters, kernels)
        durations = kernels.select("dispatch_id", "device", pl.col("duration_ns").cast(pl.Float64).alias("_d"))
        wide = wide.join(durations.unique(subset=["dispatch_id", "device"]), on=["dispatch_id", "device"],
                         how="left", nulls_equal=True).with_columns(
            pl.coalesce("_d", "duration_ns").alias("duration_ns")).drop("_d")
        metrics = derived_metrics.derive(wide, profile, spec, consts)
        if profile.vendor == "amd":
            metrics = why_amd.why_columns(metrics, kernels, {**(spec.constants() if spec else {}), **consts})
        summary = load_run(run_dir).summary
        analytical = summary.select("graph_id", "config", "flops") if summary.height else None
        limiters = graph_limiters(metrics, analytical) if "limiter" in metrics.columns else pl.DataFrame()
        graphs = graphs_by_limiter(
            derived_metrics.graph_verdicts(metrics, spec, kernels=kernels, analytical=analytical), limiters)
        if limiters.height:
            write_frame(limiters, run_dir, "graph_limiters", parquet=True)
        write_frame(wide, run_dir, "counters_wide", parquet=True)
        write_frame(metrics, run_dir, "kernel_metrics", parquet=True)
        out: dict[str, Any] = {"arch": arch, "gpu": spec.name if spec else None,
                               "peaks_source": spec.source if spec else None}
        if graphs.height:
            out["verdicts"] = graphs.with_columns(pl.col("verdict").alias("bottleneck"))
        return out


class Rocprofv3Profiler(_AmdProfiler):
    """rocprofv3 (rocprofiler-sdk, ROCm >= 6.2)."""

    name = "rocprofv3"
    folder = "rocprofv3"

    def check_tool(self) -> None:
        self._exe = cmdline.find_tool("rocprofv3", os.environ.get("HIPDNN_TRACE_ROCPROFV3"))
        self._version = cmdline.rocprofv3_version(self._exe)

    def command(self, child_argv: list[str], out_dir: Path, pass_index: int, args: argparse.Namespace) -> list[str]:
        plan = self.plan(args)
        counters = plan[pass_index - 1] if pass_index > 0 else ()
        cmd = cmdline.rocprofv3_command(
            child_argv, out_dir / self.folder, counters=counters, profile=self._profile,
            formats=cmdline.default_formats(self._version), exe=self._exe or "rocprofv3",
        )
        cmd.write_files()
        if counters and self._exe and tool_has_option(self._exe, "--selected-regions"):
            self._scoped.add(pass_index)
            return with_option(cmd.argv, "--selected-regions")
        return cmd.argv


class RocprofLegacyProfiler(_AmdProfiler):
    """Legacy rocprof v1 (ROCm <= 6.x). Its roctx ranges live only in its JSON, so kernels
    are joined to iterations by the iterations frame's timestamps."""

    name = "rocprof"
    folder = "rocprof"

    def check_tool(self) -> None:
        self._exe = cmdline.find_tool("rocprof", os.environ.get("HIPDNN_TRACE_ROCPROF"))

    def command(self, child_argv: list[str], out_dir: Path, pass_index: int, args: argparse.Namespace) -> list[str]:
        plan = self.plan(args)
        counters = plan[pass_index - 1] if pass_index > 0 else ()
        cmd = cmdline.rocprof_command(child_argv, out_dir / self.folder, counters=counters, profile=self._profile,
                                      exe=self._exe or "rocprof")
        cmd.write_files()
        return cmd.argv

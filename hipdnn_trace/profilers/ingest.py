"""Profiler output made anywhere (a harness run or years of old files) -> the project's frames.

``ingest(paths)`` walks files and directories, detects each file's format from its
content (:mod:`.rocprof.detect`, or ``fmt`` to insist on one), parses it, and groups
files into *captures*: the files one profiled process wrote. A capture is a directory,
split by rocprofv3's ``<pid>_`` file prefix, with rocprofv3's per-pass ``pmc_<n>`` /
``pass_<n>`` directory folded out (each pass is one run of the application; its number
goes to the ``pass`` column). Within a capture, kernels and counters are joined to the
harness iterations through the marker ranges (:mod:`.rocprof.markers_join`), a source
read twice (CSV and rocpd database of one run; rocprof-compute's per-pass and merged
files) is kept once, and counters get a wide per-dispatch view. When the GPU is known
(agent info, rocprof-compute sysinfo, or ``arch`` / ``gpu``), derived metrics and
verdicts are computed from the arch profile (:mod:`.counters`).

``write(result, out_dir)`` writes every frame as CSV + Parquet and a Perfetto trace.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from hipdnn_trace import read_gate
from hipdnn_trace.atomic import write_atomic, write_path_atomic, write_text_atomic
from hipdnn_trace.errors import UserError
from hipdnn_trace.profilers import counters as derived_metrics
from hipdnn_trace.profilers.graph_limiters import graph_limiters, graphs_by_limiter
from hipdnn_trace.profilers.harness_kernels import drop_harness
from hipdnn_trace.profilers.ncu_why import WHY
from hipdnn_trace.profilers.profiles import ProfileError, load_peaks, normalize_arch, profile_for_arch, select_gpu
from hipdnn_trace.profilers.rocprof import legacy, rocpd_sqlite, rocprofv2, rocprofv3_csv as v3, why_amd
from hipdnn_trace.profilers.rocprof.detect import Detected, check_format, detect
from hipdnn_trace.profilers.rocprof.frames import AGENTS, API, COUNTERS_FULL, KERNELS_FULL, MARKERS, MEMORY, STATS
from hipdnn_trace.profilers.rocprof.markers_join import has_harness_markers, join_iterations
from hipdnn_trace.results.kernel_names import with_demangled
from hipdnn_trace.results.schemas import conform

_PASS_DIR = re.compile(r"^(?:pmc|pass)_(\d+)$")
_PID_PREFIX = re.compile(r"^(\d+)_.+")
#: Which file wins when one capture holds the same kernels twice (lower first).
_KERNEL_PRIORITY = {"kernel_trace": 0, "rocpd": 1, "v1_results": 2, "wide": 3, "v1_db": 4, "rocprofv2": 5}


@dataclass
class Ingested:
    kernels: pl.DataFrame
    counters: pl.DataFrame
    counters_wide: pl.DataFrame
    kernel_metrics: pl.DataFrame
    graphs: pl.DataFrame
    stats: pl.DataFrame
    agents: pl.DataFrame
    markers: pl.DataFrame
    memory: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=MEMORY))
    files: list[Detected] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    graph_limiters: pl.DataFrame = field(default_factory=pl.DataFrame)


@dataclass
class _Capture:
    name: str
    pass_no: int | None
    files: list[Detected] = field(default_factory=list)


def collect(paths: Sequence[Path]) -> list[tuple[Path, Path, bool]]:
    """(file, the input it came from, named explicitly?) for every file under ``paths``."""
    out: list[tuple[Path, Path, bool]] = []
    if not paths:
        raise UserError("no input paths")
    for root in paths:
        if root.is_dir():
            files = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
            if not files:
                raise UserError(f"{root}: directory has no files")
            out += [(p, root, False) for p in files]
        elif root.is_file():
            out.append((root, root.parent, True))
        elif os.path.lexists(root):   # a FIFO, a device, a dangling link: the gate says which
            read_gate.check(root, read_gate.PROFILER_CAPTURE)
            raise UserError(f"{root}: not a file or folder ingest can read")
        else:
            raise UserError(f"{root}: no such file or directory")
    return out


def _capture_of(path: Path, root: Path, index: int, many: bool) -> tuple[str, int | None]:
    rel = path.parent.relative_to(root) if path.is_relative_to(root) else Path(path.parent.name)
    parts, pass_no = [], None
    for part in rel.parts:
        m = _PASS_DIR.match(part)
        if m and pass_no is None:
            pass_no = int(m.group(1))
        else:
            parts.append(part)
    name = "/".join(parts) or "."
    pid = _PID_PREFIX.match(path.name)
    if pid and pass_no is None:
        name = f"{name}:{pid.group(1)}"
    if many:
        name = f"{index}:{name}"
    return name, pass_no


def detect_all(paths: Sequence[Path], fmt: str | None = None) -> tuple[list[_Capture], list[Detected], list[str]]:
    """Detect every file; explicit files of unknown kind are errors, others are notes."""
    found = collect(paths)
    roots = list(dict.fromkeys(root for _, root, _ in found))
    captures: dict[tuple[str, int | None], _Capture] = {}
    seen: list[Detected] = []
    notes: list[str] = []
    for path, root, explicit in found:
        try:
            d = detect(path)
        except UserError as exc:   # a malformed file in a folder: listed, the rest still ingested
            if explicit:
                raise
            notes.append(f"skipped malformed file: {exc}")
            continue
        check_format(d, fmt)
        seen.append(d)
        if d.kind == "unknown":
            if explicit:
                raise UserError(f"{path}: not a profiler file ingest knows ({d.note})")
            continue
        if d.kind == "ncu_report" and not explicit:   # a run folder also holds its export, ncu_raw.csv
            notes.append(f"{path}: skipped: an ncu report inside a folder (name it to export it through ncu)")
            continue
        if d.kind == "ignored":
            if explicit:
                notes.append(f"{path}: skipped: {d.note}")
            continue
        name, pass_no = _capture_of(path, root, roots.index(root), len(roots) > 1)
        captures.setdefault((name, pass_no), _Capture(name, pass_no)).files.append(d)
    if not captures:
        raise UserError(f"no profiler data found in {', '.join(map(str, paths))}")
    return list(captures.values()), seen, notes


def _parse(d: Detected) -> dict[str, pl.DataFrame]:
    """One detected file -> the frames it holds."""
    if d.kind == "kernel_trace":
        return {"kernels": v3.kernels_from_table(d.table)}
    if d.kind == "counter_collection":
        return {"counters": v3.counters_from_table(d.table)}
    if d.kind == "api_trace":
        return {"markers": v3.markers_from_table(d.table), "api": v3.api_from_table(d.table).filter(
            pl.col("domain").str.to_uppercase().str.starts_with("HIP"))}
    if d.kind == "stats":
        stats = v3.stats_from_table(d.table, v3.stats_domain(d.path))
        return {"stats": stats.with_columns(pl.lit(d.format).alias("source"))}
    if d.kind == "agent_info":
        return {"agents": v3.agents_from_table(d.table)}
    if d.kind == "sysinfo":
        return {"agents": legacy.agents_from_sysinfo(d.table)}
    if d.kind == "memory_trace":
        return {"memory": v3.memory_from_table(d.table)}
    if d.kind == "v1_results":
        kernels, counters = legacy.read_v1_results(d.path, d.table)
        return {"kernels": kernels, "counters": counters}
    if d.kind == "wide":
        kernels, counters = legacy.read_wide(d.path, d.table)
        return {"kernels": kernels, "counters": counters}
    if d.kind == "rocpd":
        return rocpd_sqlite.read_rocpd(d.path)
    if d.kind == "v1_db":
        return legacy.read_v1_db(d.path)
    if d.kind == "rocprofv2":
        return rocprofv2.read_rocprofv2(d.path)
    if d.kind in ("ncu_raw", "ncu_report"):
        from hipdnn_trace.profilers import ncu_why

        text = ncu_why.export_report(d.path) if d.kind == "ncu_report" else None
        return ncu_why.ingest_frames(d.path, text)
    raise AssertionError(d.kind)


_SCHEMAS = {"kernels": KERNELS_FULL, "counters": COUNTERS_FULL, "markers": MARKERS, "api": API,
            "stats": STATS, "agents": AGENTS, "memory": MEMORY, "why": WHY}


def _concat(frames: list[pl.DataFrame], schema: dict) -> pl.DataFrame:
    frames = [conform(f, schema) for f in frames if f is not None and f.height]
    return pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame(schema=schema)


def _load_capture(cap: _Capture, notes: list[str]) -> dict[str, pl.DataFrame]:
    parts: dict[str, list[tuple[int, pl.DataFrame]]] = defaultdict(list)
    csv_kernels = any(d.kind == "kernel_trace" for d in cap.files)
    for d in sorted(cap.files, key=lambda d: (_KERNEL_PRIORITY.get(d.kind, 9), d.path.name)):
        frames = _parse(d)
        if d.kind == "rocpd" and csv_kernels:
            notes.append(f"{d.path}: kernels/counters taken from the CSV files of the same run; "
                         "database used for markers only")
            frames = {k: v for k, v in frames.items() if k in ("markers", "api", "agents")}
        for kind, frame in frames.items():
            parts[kind].append((_KERNEL_PRIORITY.get(d.kind, 9), frame))
    out = {kind: _concat([f for _, f in parts.get(kind, [])], schema) for kind, schema in _SCHEMAS.items()}
    kernels = out["kernels"]
    if kernels.height:
        keyed = kernels.filter(pl.col("dispatch_id").is_not_null())
        unkeyed = kernels.filter(pl.col("dispatch_id").is_null())
        before = keyed.height
        keyed = keyed.unique(subset=["dispatch_id", "name", "device"], keep="first", maintain_order=True)
        if keyed.height < before:
            notes.append(f"capture {cap.name}: {before - keyed.height} kernel rows repeated across files, kept once")
        out["kernels"] = with_demangled(pl.concat([keyed, unkeyed], how="vertical_relaxed"))
    if out["counters"].height:
        before = out["counters"].height
        out["counters"] = with_demangled(out["counters"].unique(
            subset=["dispatch_id", "device", "kernel", "counter", "start_ns"], keep="first", maintain_order=True
        ), "kernel")
        if out["counters"].height < before:
            notes.append(f"capture {cap.name}: {before - out['counters'].height} counter values repeated "
                         "across files, kept once")
    tag = [pl.lit(cap.name).alias("capture"), pl.lit(cap.pass_no, dtype=pl.Int64).alias("pass")]
    out["kernels"] = out["kernels"].with_columns(tag)
    out["counters"] = out["counters"].with_columns(tag)
    out["why"] = out["why"].with_columns(tag[0])
    _join(out)
    _drop_harness(out, cap.name, notes)
    out["markers"] = out["markers"].with_columns(pl.lit(cap.name).alias("capture"))
    out["memory"] = out["memory"].with_columns(pl.lit(cap.name).alias("capture"))
    return out


def _join(out: dict[str, pl.DataFrame]) -> None:
    """Kernels and counters of one capture -> iterations, through its harness markers."""
    markers, api = out["markers"], out["api"]
    if markers.is_empty() or not has_harness_markers(markers):
        return
    kernels = join_iterations(out["kernels"], markers, api)
    out["kernels"] = kernels
    counters = out["counters"]
    if counters.is_empty():
        return
    labels = ["graph_id", "config", "phase", "iteration", "join"]
    by_dispatch = kernels.filter(pl.col("dispatch_id").is_not_null()).select(
        "dispatch_id", "device", *[pl.col(c).alias(f"_k_{c}") for c in labels]
    ).unique(subset=["dispatch_id", "device"], keep="first")
    joined = counters.join(by_dispatch, on=["dispatch_id", "device"], how="left", nulls_equal=True)
    has_kernel = joined["_k_join"].is_not_null() | joined["_k_phase"].is_not_null()
    direct = join_iterations(joined.filter(~has_kernel).drop([f"_k_{c}" for c in labels]), markers, api)
    via_kernel = joined.filter(has_kernel).with_columns([pl.col(f"_k_{c}").alias(c) for c in labels]).drop(
        [f"_k_{c}" for c in labels]
    )
    out["counters"] = pl.concat([via_kernel, direct], how="vertical_relaxed")


def _drop_harness(out: dict[str, pl.DataFrame], capture: str, notes: list[str]) -> None:
    """The harness's own kernels (profilers/harness_kernels.py) out of kernels and counters."""
    kernels, dropped = drop_harness(out["kernels"], "name")
    if not dropped:
        return
    gone = out["kernels"].join(kernels.select("dispatch_id"), on="dispatch_id", how="anti", nulls_equal=True)
    ids = gone["dispatch_id"].drop_nulls()
    out["kernels"] = kernels
    out["counters"], _ = drop_harness(out["counters"].filter(~pl.col("dispatch_id").is_in(ids.implode())), "kernel")
    out["why"] = out["why"].filter(~pl.col("dispatch_id").is_in(ids.implode()))
    notes.append(f"capture {capture}: {dropped} harness kernel dispatches (hipdnn_trace_hold, input generation, "
                 "poisoning) left out")


def gpu_facts(agents: pl.DataFrame) -> tuple[str | None, str | None, dict[str, float]]:
    """(arch, product, constants) of the profiled GPU when the captures agree on one arch."""
    gpus = agents.filter(pl.col("type").str.to_uppercase() == "GPU") if agents.height else agents
    archs = sorted({normalize_arch(a) for a in gpus["arch"].to_list() if a}) if gpus.height else []
    if len(archs) != 1:
        return None, None, {}
    row = gpus.filter(pl.col("arch").map_elements(normalize_arch, return_dtype=pl.String) == archs[0]).row(
        0, named=True)
    consts = {"num_xcd": row["num_xcc"], "cu_count": row["cu_count"], "max_clock_mhz": row["max_clock_mhz"],
              "wave_size": row["wave_size"], "max_waves_per_cu": row.get("max_waves_per_cu"),
              "lds_banks_per_cu": row.get("lds_banks_per_cu"), "l2_channels": row.get("l2_channels")}
    if row.get("max_mem_clock_mhz") and row.get("hbm_channels"):   # rocprof-compute utils/parser.py:91
        consts["hbm_gbps"] = row["max_mem_clock_mhz"] / 1000 * 32 * row["hbm_channels"]
    return archs[0], row["product"], {k: float(v) for k, v in consts.items() if v}


def ingest(
    paths: Sequence[Path],
    fmt: str | None = None,
    *,
    arch: str | None = None,
    gpu: str | None = None,
) -> Ingested:
    """Parse, group, join and derive; see the module docstring."""
    captures, seen, notes = detect_all(paths, fmt)
    loaded = [_load_capture(cap, notes) for cap in captures]
    frames = {kind: _concat([c[kind] for c in loaded], schema) for kind, schema in _SCHEMAS.items() if kind != "api"}
    frames["markers"] = pl.concat(
        [c["markers"] for c in loaded if c["markers"].height], how="vertical_relaxed"
    ) if any(c["markers"].height for c in loaded) else pl.DataFrame(schema={**MARKERS, "capture": pl.String})
    wide = derived_metrics.wide_counters(frames["counters"], frames["kernels"])
    metrics, graphs = pl.DataFrame(), pl.DataFrame()
    found_arch, product, consts = gpu_facts(frames["agents"])
    use_arch = normalize_arch(arch) or found_arch
    if wide.height:
        if use_arch is None:
            notes.append("derived metrics skipped: GPU architecture unknown (no agent info; pass --arch)")
        else:
            try:
                profile = profile_for_arch(use_arch)
            except ProfileError as exc:
                notes.append(f"derived metrics skipped: {exc}")
                profile = None
            if profile is not None:
                peaks = load_peaks()
                cu_count = int(consts["cu_count"]) if "cu_count" in consts else None
                spec = select_gpu(peaks, use_arch, product, cu_count, gpu)
                if spec is None:
                    notes.append(f"no peak-table entry for {product or use_arch}: % of peak and verdicts skipped "
                                 "(pass --gpu)")
                metrics = derived_metrics.derive(wide, profile, spec, consts)
                if profile.vendor == "amd":
                    metrics = why_amd.why_columns(metrics, frames["kernels"],
                                                  {**(spec.constants() if spec else {}), **consts})
                graphs = derived_metrics.graph_verdicts(metrics, spec, kernels=_one_pass(frames["kernels"]))
    metrics = join_why(metrics, frames["why"])
    limiters = graph_limiters(metrics) if "limiter" in metrics.columns else pl.DataFrame()
    return Ingested(
        kernels=frames["kernels"],
        counters=frames["counters"],
        counters_wide=wide,
        kernel_metrics=metrics,
        graph_limiters=limiters,
        graphs=graphs_by_limiter(graphs, limiters),
        stats=frames["stats"],
        agents=frames["agents"].unique(maintain_order=True),
        markers=frames["markers"],
        memory=frames["memory"],
        files=seen,
        notes=notes,
    )


def join_why(metrics: pl.DataFrame, why: pl.DataFrame) -> pl.DataFrame:
    """Derived metrics + the why columns and limiter of the same dispatch (ncu captures), or the
    why rows alone where no profile derived metrics."""
    if why.is_empty():
        return metrics
    if metrics.is_empty():
        return why.drop("capture")
    key = [c for c in ("capture", "dispatch_id") if c in metrics.columns]
    taken = set(metrics.columns) - set(key)
    drop = [c for c in ("verdict", "verdict_reason") if c in metrics.columns]
    return metrics.drop(drop).join(why.select([c for c in why.columns if c not in taken]), on=key, how="left",
                                   nulls_equal=True)


def _one_pass(kernels: pl.DataFrame) -> pl.DataFrame:
    """Kernels of one application run: passes are separate processes whose clocks and
    gaps do not line up, so busy/idle time must not mix them."""
    if "pass" not in kernels.columns or kernels["pass"].n_unique() <= 1:
        return kernels
    first = kernels["pass"].drop_nulls().min()
    return kernels.filter(pl.col("pass").is_null() | (pl.col("pass") == first))


def write_frame(frame: pl.DataFrame, out_dir: Path, name: str, parquet: bool = True) -> list[Path]:
    written = [out_dir / f"{name}.csv"]
    write_atomic(written[0], lambda fh: frame.write_csv(fh))
    if parquet:
        written.append(out_dir / f"{name}.parquet")
        write_atomic(written[1], lambda fh: frame.write_parquet(fh))
    return written


def write(result: Ingested, out_dir: Path, *, trace: bool = True) -> list[Path]:
    """kernels / counters / counters_wide (+ metrics, graphs, stats, agents when present)
    as CSV and Parquet, ``trace.pftrace``, and ``ingest.json`` (what was read or skipped)."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{out_dir}: cannot create output directory: {exc.strerror or exc}") from None
    try:
        return _write_all(result, out_dir, trace=trace)
    except OSError as exc:   # a full or read-only file system: one line, the partial temp files are gone
        raise UserError(f"{exc.filename or out_dir}: cannot write ({exc.strerror or exc})") from None


def _write_all(result: Ingested, out_dir: Path, *, trace: bool) -> list[Path]:
    written: list[Path] = []
    written += write_frame(result.kernels, out_dir, "kernels")
    written += write_frame(result.counters, out_dir, "counters")
    written += write_frame(result.counters_wide, out_dir, "counters_wide")
    for name in ("kernel_metrics", "graph_limiters", "graphs", "stats", "agents", "memory"):
        frame = getattr(result, name)
        if frame.height:
            written += write_frame(frame, out_dir, name)
    if trace:
        from hipdnn_trace.profilers.trace_export import write_trace

        path = out_dir / "trace.pftrace"
        write_path_atomic(path, lambda p: write_trace(p, result.kernels, result.counters, result.markers,
                                                      result.memory))
        written.append(path)
    manifest = {
        "skipped_malformed": [n.removeprefix("skipped malformed file: ") for n in result.notes
                              if n.startswith("skipped malformed file: ")],
        "files": [
            {"path": str(d.path), "kind": d.kind, "format": d.format, **({"note": d.note} if d.note else {})}
            for d in result.files
        ],
        "notes": result.notes,
        "rows": {name: getattr(result, name).height
                 for name in ("kernels", "counters", "counters_wide", "kernel_metrics", "graph_limiters", "stats",
                              "memory")},
    }
    path = out_dir / "ingest.json"
    write_text_atomic(path, json.dumps(manifest, indent=2) + "\n")
    written.append(path)
    return written

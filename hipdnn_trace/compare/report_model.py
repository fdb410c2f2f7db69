"""What a report says, independent of how it is written (HTML or Markdown).

A report is a list of sections; each holds paragraphs, tables and figures. Tables
list every graph; figures show the top N (slowest graphs, or the largest changes
in an A/B report) so a suite of hundreds stays readable.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from hipdnn_trace.compare import plots
from hipdnn_trace.compare.comparison import SLOWER, Comparison
from hipdnn_trace.compare.loading import run_label
from hipdnn_trace.compare.matching import units
from hipdnn_trace.compare.oracle_section import oracle_cells
from hipdnn_trace.compare.render import display_order, fmt_change, fmt_ci, fmt_ms, fmt_p, fmt_ratio, row_warnings
from hipdnn_trace.compare.result import RATIO_LABEL, RATIO_NAME
from hipdnn_trace.console import fmt_share, si_rate
from hipdnn_trace.results.speed_of_light import DTYPE_CLASS, peaks_of


@dataclass
class Table:
    """Rows of text cells. A column empty in every row is dropped on construction: an empty
    ``engine`` or ``note`` column only takes width from the columns that say something."""

    columns: list[str]
    rows: list[list[str]]
    caption: str = ""
    #: per row, a CSS class for the whole row (e.g. the verdict), or "".
    row_classes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.rows:
            return   # no rows: keep the header, it says what would be there
        keep = [i for i in range(len(self.columns)) if any(row[i] for row in self.rows)]
        if len(keep) < len(self.columns):
            self.columns = [self.columns[i] for i in keep]
            self.rows = [[row[i] for i in keep] for row in self.rows]


@dataclass
class Image:
    png: bytes
    alt: str
    caption: str = ""


@dataclass
class Section:
    id: str
    title: str
    paragraphs: list[str] = field(default_factory=list)
    blocks: list[Table | Image] = field(default_factory=list)
    collapsed: bool = False     # reference material: shown folded, one click away


@dataclass
class Report:
    title: str
    sections: list[Section]


def _num(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def _short(value: Any, limit: int = 120) -> str:
    """Cell text, long messages cut (the run directory has them whole)."""
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _unit_name(graph: Any, config: Any, engine: Any = None) -> str:
    name = f"{graph} ({config})"
    return f"{name} [{engine}]" if engine not in (None, "", "default") else name


# -- runs -------------------------------------------------------------------------------

RUN_FIELDS: list[tuple[str, tuple[str, ...]]] = [
    ("run id", ("run_id",)),
    ("created", ("created",)),
    ("status", ("status",)),
    ("host", ("machine", "host")),
    ("cpu", ("machine", "cpu")),
    ("os", ("machine", "os")),
    ("gpu", ("gpu", "name")),
    ("timer", ("timing", "timer")),
    ("cache", ("timing", "cache")),
    ("warmup", ("timing", "warmup")),
    ("iterations", ("timing", "iters")),
    ("min time ms", ("timing", "min_time_ms")),
    ("max rel CI", ("timing", "max_rel_ci")),
    ("clock control", ("timing", "clock_control")),
    ("CUDA graph", ("timing", "cuda_graph")),
    ("staged", ("timing", "staged")),
    ("seed", ("seed",)),
]


def _dig(meta: dict[str, Any], path: tuple[str, ...]) -> str:
    value: Any = meta
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    if path == ("timing", "staged") and (meta.get("timing") or {}).get("timer") == "host":
        return "-"   # staged timing is a GPU method; a host-timed (CPU) run has none
    return "-" if value is None else str(value)


def runs_section(runs: list[Any]) -> Section:
    labels = ["A", "B"] if len(runs) == 2 else ["value"]
    metas = [r.meta if isinstance(r.meta, dict) else {} for r in runs]
    rows, classes = [], []
    fields = list(RUN_FIELDS)
    versions = sorted({k for m in metas for k in (m.get("versions") or {})})
    fields += [(f"version {k}", ("versions", k)) for k in versions]
    for name, path in fields:
        values = [_dig(m, path) for m in metas]
        rows.append([name, *values])
        classes.append("differs" if len(set(values)) > 1 else "")
    configs = [
        ", ".join(f"{c.get('name')} ({c.get('backend')}, {c.get('engine')})"
                  for c in (m.get("configs") or []) if isinstance(c, dict)) or "-"
        for m in metas
    ]
    rows.append(["configs", *configs])
    classes.append("differs" if len(set(configs)) > 1 else "")
    note = ["Rows that differ between the runs are highlighted."] if len(runs) == 2 else []
    return Section("runs", "Runs", note,
                   [Table(["field", *labels], rows, "How the numbers were made", classes)], collapsed=True)


# -- comparison ---------------------------------------------------------------------------

def verdict_section(c: Comparison, top: int) -> Section:
    counts = ", ".join(f"{n} {v}" for v, n in c.counts.items())
    s = c.settings
    paragraphs = [
        f"B = {c.label_b} against A = {c.label_a}, paired by {s['by']}; threshold "
        f"{s['threshold']:.0%}, alpha {s['alpha']} (Holm-adjusted Mann-Whitney U), "
        f"{RATIO_NAME} = ratio of medians (>1: B slower) with a {s['n_boot']}-replicate bootstrap 95% CI "
        f"(seed {s['seed']}), "
        f"widened by a run-to-run drift of {s['drift']:.1%} per graph ({s['drift_source']}).",
        f"Verdicts: {counts}.",
    ]
    if not math.isnan(c.geomean):
        lo, hi = c.geomean_ci
        paragraphs.append(
            f"Geometric mean of {RATIO_LABEL}: {c.geomean:.3f} [{lo:.3f}, {hi:.3f}] ({fmt_change(c.geomean)})."
        )
    paragraphs += [f"Note: {n}" for n in c.notes]
    ordered = display_order(c.table)
    blocks: list[Table | Image] = []
    changed = ordered.filter(pl.col("ci_low").is_not_null()).with_columns(
        pl.col("ratio").log().abs().alias("_size")).sort("_size", descending=True).head(top)
    bars = plots.ratio_bars(
        [_unit_name(r["graph"], r["config"]) for r in changed.iter_rows(named=True)],
        changed["ratio"].to_list(), changed["ci_low"].to_list(), changed["ci_high"].to_list(),
        changed["verdict"].to_list(), s["threshold"],
        (c.geomean, *c.geomean_ci),
    )
    if bars:
        blocks.append(Image(bars, "change of median time B vs A with 95% CIs",
                            f"Largest {changed.height} changes, with the suite geomean"))
    rows = [
        [r["graph"] or "", r["config"] or "",
         (r["engine_a"] or "") if r["engine_a"] == r["engine_b"] else f"{r['engine_a']} -> {r['engine_b']}",
         f"{r['n_a']} / {r['n_b']}", fmt_ms(r["median_a"]), fmt_ms(r["median_b"]),
         fmt_ratio(r["ratio"]), fmt_ci(r["ci_low"], r["ci_high"]), fmt_p(r["p_holm"]),
         r["verdict"], "; ".join(t for t in (r["note"], row_warnings(r)) if t)]
        for r in ordered.iter_rows(named=True)
    ]
    unit = "cycles" if s.get("metric") == "cycles" else "ms"
    blocks.append(Table(
        ["graph", "config", "engine", "n A / B", f"median A {unit}", f"median B {unit}", RATIO_LABEL, "95% CI",
         "p (Holm)", "verdict", "note"],
        rows, "Every matched graph, regressions first", ordered["verdict"].str.to_lowercase().to_list()))
    if c.unmatched.height:
        blocks.append(Table(
            ["only in", "graph", "config", "engine", "status", "n"],
            [[r["only_in"], r["graph"] or "", r["config"] or "", r["engine"] or "",
              r["status"] or "", str(r["n"])] for r in c.unmatched.iter_rows(named=True)],
            "Graphs present in one run only"))
    return Section("verdicts", "A/B verdicts", paragraphs, blocks)


def interleaved_section(runs: list[Any]) -> Section | None:
    """The interleaved A/B verdicts each run decided as it ran (its ab frame), or None."""
    from hipdnn_trace.compare import ab_view

    blocks: list[Table | Image] = []
    paragraphs = []
    for tag, run in zip(("A", "B") if len(runs) == 2 else ("",), runs):
        df = ab_view.ab_frame(run)
        if not df.height:
            continue
        title = f"{tag + ': ' if tag else ''}{run_label(run)}"
        paragraphs.append(f"{title}: {ab_view.summary_line(df)}.")
        blocks.append(Table(ab_view.COLUMNS, ab_view.rows(df), title,
                            df["verdict"].str.to_lowercase().to_list()))
    if not blocks:
        return None
    paragraphs.insert(0, f"{RATIO_LABEL} of configurations timed in alternating blocks (A B B A, B A A B) on the "
                         "same inputs until the interval was inside the band (SAME) or beyond it "
                         "(FASTER/SLOWER), else UNDECIDED at the cap (docs/compare.md).")
    return Section("interleaved", "Interleaved A/B", paragraphs, blocks)


# -- per-run summary ----------------------------------------------------------------------

def _tflops(value: float) -> str:
    return si_rate(value * 1e12, "FLOPS")


def _gbps(value: float) -> str:
    return si_rate(value * 1e9, "B/s")


#: (header, summary column, formatter of a present value): rates in SI units and cv in percent,
#: through the console's own formatters, so the report reads like ``run``'s final table.
SUMMARY_COLUMNS: list[tuple[str, str, Callable[[Any], str] | None]] = [
    ("graph", "graph", None), ("config", "config", None), ("engine", "engine", None), ("n", "n", None),
    ("median ms", "median", None), ("p5", "p5", None), ("p95", "p95", None), ("cv", "cv", fmt_share),
    ("init ms", "init_ms", None), ("compute", "tflops", _tflops), ("memory", "gbps", _gbps),
    ("bottleneck", "bottleneck", None), ("light ms", "sol_ms", None),
    ("bound", "sol_bound", None), ("of light", "sol_share", fmt_share), ("status", "status", None),
    ("validation", "validation", None), ("throttled", "n_throttled", None), ("warnings", "warnings", None),
    ("error", "error", None)]


def _summary_cell(value: Any, formatter: Callable[[Any], str] | None) -> str:
    """Empty for a missing value (so a column missing everywhere is dropped), "-" for NaN."""
    if value is None:
        return ""
    if formatter is not None and not (isinstance(value, float) and not math.isfinite(value)):
        return formatter(value)
    return _num(value) if isinstance(value, float) else _short(value)


def summary_section(runs: list[Any]) -> Section:
    blocks: list[Table | Image] = []
    for tag, run in zip(("A", "B") if len(runs) == 2 else ("",), runs):
        frame = run.summary.sort(["graph", "config", "engine"], nulls_last=True)
        present = [(h, c, f) for h, c, f in SUMMARY_COLUMNS if c in frame.columns]
        rows = [[_summary_cell(r[c], f) for _, c, f in present] for r in frame.iter_rows(named=True)]
        classes = ["failed" if r["status"] not in (None, "ok") else ""
                   for r in frame.iter_rows(named=True)]
        title = f"{tag + ': ' if tag else ''}{run_label(run)}"
        if rows:
            blocks.append(Table([h for h, _, _ in present], rows, title, classes))
    paragraphs = [] if blocks else ["No summary rows (the run has no summary.csv)."]
    return Section("summary", "Summary per graph", paragraphs, blocks)


# -- figures ------------------------------------------------------------------------------

def _selected(runs: list[Any], comparison: Comparison | None, top: int) -> list[dict[str, Any]]:
    """The graphs the figures show: largest changes (A/B) or slowest medians (one run)."""
    if comparison is not None:
        table = comparison.table.filter(pl.col("ratio").is_not_null()).with_columns(
            pl.col("ratio").log().abs().alias("_size")).sort("_size", descending=True).head(top)
        return [{"graph_id": r["graph_id"], "graph": r["graph"], "config": r["config"],
                 "config_a": r["config_a"], "config_b": r["config_b"],
                 "engine_a": r["engine_a"], "engine_b": r["engine_b"]}
                for r in table.iter_rows(named=True)]
    found = units(runs[0]).filter(pl.col("n") > 0).with_columns(
        pl.col("samples").list.median().alias("_median")).sort("_median", descending=True).head(top)
    return [{"graph_id": r["graph_id"], "graph": r["graph"], "config": r["config"],
             "config_a": r["config"], "engine_a": r["engine"]} for r in found.iter_rows(named=True)]


def _iterations_of(run: Any, graph_id: Any, graph: Any, config: Any, engine: Any) -> pl.DataFrame:
    frame = run.iterations
    key = (pl.col("graph_id") == graph_id) if graph_id is not None else (pl.col("graph") == graph)
    key &= pl.col("config").fill_null("") == (config or "")
    key &= pl.col("engine").fill_null("") == (engine or "")
    return frame.filter(key).with_columns(
        (pl.col("phase") == "warmup").alias("_warm")
    ).sort(["_warm", "iteration"], descending=[True, False], nulls_last=True)


def _series(frame: pl.DataFrame) -> plots.Series:
    frame = frame.filter(pl.col("kernel_ms").is_not_null())
    return plots.Series(
        values=frame["kernel_ms"].to_numpy().astype(float),
        warmup=frame["_warm"].to_numpy().astype(bool),
        flagged=frame["clock_flag"].fill_null(False).to_numpy().astype(bool),
    )


def _timed(frame: pl.DataFrame) -> np.ndarray:
    timed = frame.filter((pl.col("phase") == "timed") & pl.col("kernel_ms").is_not_null())
    return timed["kernel_ms"].to_numpy().astype(float)


def figures_sections(runs: list[Any], comparison: Comparison | None, top: int) -> list[Section]:
    chosen = _selected(runs, comparison, top)
    labels = (run_label(runs[0]), run_label(runs[1]) if len(runs) == 2 else None)
    dists, panels = [], []
    for item in chosen:
        frame_a = _iterations_of(runs[0], item["graph_id"], item["graph"], item["config_a"],
                                 item["engine_a"])
        frame_b = (_iterations_of(runs[1], item["graph_id"], item["graph"], item["config_b"],
                                  item["engine_b"]) if len(runs) == 2 else None)
        name = _unit_name(item["graph"], item["config"], item["engine_a"])
        dists.append(plots.Distribution(name, _timed(frame_a),
                                        None if frame_b is None else _timed(frame_b)))
        panels.append((name, _series(frame_a), None if frame_b is None else _series(frame_b)))
    which = "largest changes" if comparison is not None else "slowest graphs"
    sections = []
    box = plots.distributions(dists, labels)
    sections.append(Section(
        "distributions", "Timing distributions",
        [f"Timed kernel times of the {len(dists)} {which}, relative to "
         f"{'A' if comparison is not None else 'each graph'}'s median "
         "(absolute median in the label). Boxes: quartiles; whiskers: 1.5 IQR; dots: outliers."],
        [Image(box, "box plots of kernel time per graph")] if box else []))
    series = plots.time_series(panels, labels)
    sections.append(Section(
        "iterations", "Per-iteration time series",
        ["Every iteration in execution order: warmup (shaded) then timed. Drifts and steps "
         "show throttling or interference; crosses mark iterations whose SM clock was below "
         "90% of the run's maximum."],
        [Image(series, "kernel time per iteration")] if series else []))
    return sections


def _peaks(meta: dict[str, Any]) -> tuple[float | None, float | None]:
    gpu = meta.get("gpu") if isinstance(meta, dict) else None
    if not isinstance(gpu, dict):
        return None, None
    tflops = gpu.get("peak_tflops")
    gbps = gpu.get("peak_gbps", gpu.get("peak_bandwidth_gbps"))
    return (float(tflops) if tflops else None, float(gbps) if gbps else None)


def _roofs(run: Any) -> tuple[dict[str, float], float | None, str]:
    """The speed-of-light peaks run.json recorded: TFLOPS of the data types the run's graphs use (every
    type when none is known), HBM GB/s, and the caption naming them and their source."""
    peaks = peaks_of(run.meta)
    if peaks is None:
        return {}, None, ""
    used = {DTYPE_CLASS[d] for v in run.summary.get_column("dtype").drop_nulls().to_list()
            for d in str(v).split(",") if d in DTYPE_CLASS} if "dtype" in run.summary.columns else set()
    roofs = {k: v for k, v in peaks.tflops.items() if k in used} or dict(peaks.tflops)
    return roofs, peaks.hbm_tbs * 1e3, f"Roofs: {peaks.label or peaks.name} ({peaks.source})"


def throughput_section(runs: list[Any]) -> Section | None:
    points = []
    for tag, run in zip(("A", "B") if len(runs) == 2 else ("",), runs):
        frame = run.summary.filter(
            pl.col("flops").is_not_null() & pl.col("bytes").is_not_null()
            & pl.col("tflops").is_not_null() & (pl.col("bytes") > 0))
        for r in frame.iter_rows(named=True):
            points.append((tag, str(r["config"]), r["flops"] / r["bytes"], r["tflops"], str(r["graph"])))
    counters = [r for r in runs if r.counters.height]
    if not points and not counters:
        return None
    blocks: list[Table | Image] = []
    peak_tflops, peak_gbps = _peaks(runs[-1].meta)
    roofs, sol_gbps, caption = _roofs(runs[-1])
    scatter = plots.roofline(points, peak_tflops, sol_gbps or peak_gbps, roofs)
    if scatter:
        blocks.append(Image(scatter, "TFLOPS against arithmetic intensity",
                            caption or ("Roofline" if peak_tflops and peak_gbps else
                                        "Achieved compute (no roof: the GPU's peaks are not in run.json)")))
    for tag, run in zip(("A", "B") if len(runs) == 2 else ("",), runs):
        if not run.counters.height:
            continue
        wide = (run.counters.group_by(["graph", "config", "counter"])
                .agg(pl.col("value").mean()).sort(["graph", "config", "counter"]))
        names = wide["counter"].unique(maintain_order=True).to_list()[:12]
        pivot = wide.filter(pl.col("counter").is_in(names)).pivot(
            on="counter", index=["graph", "config"], values="value")
        blocks.append(Table(
            pivot.columns,
            [[_num(v) if isinstance(v, float) else str(v) for v in row] for row in pivot.rows()],
            f"{tag + ': ' if tag else ''}profiler counters, mean per iteration"
            + (f" (first 12 of {wide['counter'].n_unique()})" if wide["counter"].n_unique() > 12 else "")))
    return Section("throughput", "Throughput and counters",
                   ["Achieved throughput from the analytical FLOPs and bytes of each graph."],
                   blocks)


# -- validation ---------------------------------------------------------------------------

def validation_section(runs: list[Any], comparison: Comparison | None) -> Section:
    blocks: list[Table | Image] = []
    paragraphs = []
    if comparison is not None and comparison.validation_changes.height:
        changes = comparison.validation_changes
        blocks.append(Table(
            ["change", "graph", "config", "output", "against", "max_rel A", "max_rel B"],
            [[r["change"], r["graph"] or "", r["config"] or "", r["output"], r["against"],
              _num(r["max_rel_a"]), _num(r["max_rel_b"])] for r in changes.iter_rows(named=True)],
            "Outputs whose check changed outcome",
            ["failed" if r["change"] == "newly failing" else "" for r in changes.iter_rows(named=True)]))
    run = runs[-1]
    frame = run.validation.sort(["passed", "graph", "config", "output"], nulls_last=True)
    if frame.height:
        failed = int((~frame["passed"].fill_null(True)).sum())
        paragraphs.append(f"{run_label(run)}: {frame.height} output checks, {failed} failed.")
        blocks.append(Table(
            ["graph", "config", "output", "against", "dtype", "max_abs", "max_rel",
             "mismatches", "passed", "message"],
            [[r["graph"] or "", r["config"] or "", r["output"] or str(r["output_uid"]),
              r["against"] or "", r["dtype"] or "", _num(r["max_abs"]), _num(r["max_rel"]),
              f"{_num(r['mismatches'])} / {_num(r['total'])}",
              "yes" if r["passed"] else "no" if r["passed"] is not None else "-",
              _short(r["message"])] for r in frame.iter_rows(named=True)],
            f"Output checks of {run_label(run)}, failures first",
            ["failed" if r["passed"] is False else "" for r in frame.iter_rows(named=True)]))
    else:
        paragraphs.append(f"{run_label(run)} has no output checks (validation.csv empty or absent).")
    return Section("validation", "Validation", paragraphs, blocks)


def headline_section(runs: list[Any], comparison: Comparison | None) -> Section:
    """What a reader needs first: the counts, what failed and why, the largest regressions with their
    CIs, and where the time goes (then the details below)."""
    run = runs[-1]
    summary = run.summary
    paragraphs: list[str] = []
    blocks: list[Table | Image] = []
    if summary.height:
        status = dict(summary.group_by("status").len().iter_rows())
        paragraphs.append(f"{run_label(run)}: {summary.height} graph rows: {status.get('ok', 0)} passed, "
                          f"{status.get('failed', 0)} failed validation, {status.get('unsupported', 0)} "
                          f"unsupported, {status.get('error', 0)} errored.")
        timed = summary.filter(pl.col("median").is_not_null()).sort("median", descending=True)
        total = float(timed["median"].sum()) if timed.height else 0.0
        if total > 0:
            top3 = ", ".join(f"{r['graph']} ({r['config']}) {fmt_ms(r['median'])} ms, {r['median'] / total:.0%}"
                             for r in timed.head(3).iter_rows(named=True))
            paragraphs.append(f"Most time (share of the summed medians): {top3}.")
        if "bottleneck" in summary.columns and summary["bottleneck"].drop_nulls().len():
            kinds = dict(summary["bottleneck"].drop_nulls().value_counts().iter_rows())
            paragraphs.append("Roofline position: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + ".")
        bad = summary.filter(pl.col("status") != "ok")
        if bad.height:
            blocks.append(Table(["graph", "config", "status", "reason"],
                                [[r["graph"] or "", r["config"] or "", r["status"] or "", _short(r["error"], 200)]
                                 for r in bad.head(10).iter_rows(named=True)],
                                f"Not passed ({bad.height})" + (", first 10" if bad.height > 10 else ""),
                                ["failed"] * min(bad.height, 10)))
    else:
        paragraphs.append(f"{run_label(run)} has no summary rows.")
    if comparison is not None:
        matched, total_rows = comparison.coverage
        counts = ", ".join(f"{n} {v}" for v, n in comparison.counts.items() if n) or "no verdicts"
        overall = (f"geomean {RATIO_NAME} {comparison.geomean:.3f} ({fmt_change(comparison.geomean)}) over "
                   f"{matched} of "
                   f"{total_rows} graph rows" if comparison.overall_claim and math.isfinite(comparison.geomean)
                   else f"no overall claim ({matched} of {total_rows} graph rows in both runs)")
        paragraphs.append(f"{comparison.label_b} vs {comparison.label_a}: {counts}; {overall}.")
        newly = comparison.newly_failing
        if newly.height:
            paragraphs.append(f"Newly failing validation ({newly.height}): " + ", ".join(
                f"{_unit_name(r['graph'], r['config'])} {r['output']}" for r in newly.head(5).iter_rows(named=True))
                + (" ..." if newly.height > 5 else "") + ".")
        worst = comparison.top(SLOWER, 3)
        if worst.height:
            paragraphs.append("Largest regressions: " + "; ".join(
                f"{_unit_name(r['graph'], r['config'])} {RATIO_NAME} {fmt_ratio(r['ratio'])} "
                f"{fmt_ci(r['ci_low'], r['ci_high'])}"
                for r in worst.iter_rows(named=True)) + ".")
    return Section("headline", "At a glance", paragraphs, blocks)


def why_section(runs: list[Any], comparison: Comparison | None) -> Section | None:
    """Profiled runs: limiter bars, the hierarchical roofline and the explanation (compare/why_report.py);
    None when no run carries kernel_metrics."""
    from hipdnn_trace.compare.why import TABLE_COLUMNS, table_rows
    from hipdnn_trace.compare.why_report import limiter_bars_png, roofline_png
    from hipdnn_trace.compare.why_sections import one_run, two_runs_explained
    from hipdnn_trace.results.profile_frames import load_profile_frame
    from hipdnn_trace.results.speed_of_light import peaks_of

    blocks: list[Any] = []
    paragraphs: list[str] = []
    for tag, run in zip(("A: ", "B: ") if len(runs) == 2 else ("",), runs):
        metrics = load_profile_frame(run.path, "kernel_metrics")
        if metrics is None:
            continue
        limiters = load_profile_frame(run.path, "graph_limiters")
        bars = limiter_bars_png(limiters) if limiters is not None else None
        if bars:
            blocks.append(Image(bars, "limiter bars", f"{tag}share of each graph's kernel time by limiter"))
        peaks = peaks_of(run.meta)
        tflops = max(peaks.tflops.values()) if peaks is not None and peaks.tflops else None
        image, caption = roofline_png(metrics, tflops, peaks.hbm_tbs if peaks is not None else None)
        if image:
            blocks.append(Image(image, "hierarchical roofline", f"{tag}{caption}"))
        if limiters is not None and limiters.height:
            top = limiters.sort("kernel_time_ns", descending=True).head(20)
            blocks.append(Table(["graph", "config", "limiter", "share %", "dominant kernel"],
                                [[str(r["graph"]), str(r["config"]), str(r["limiter"]), f"{r['share_pct']:.0f}",
                                  str(r["dominant_kernel"])] for r in top.iter_rows(named=True)],
                                f"{tag}limiters by kernel time (graph_limiters)"))
    if not blocks:
        return None
    text, found = two_runs_explained(comparison, runs[0], runs[1]) if comparison is not None and len(runs) == 2 \
        else one_run(runs[0], 0.05)
    paragraphs += [line for line in text.strip().split("\n") if line and line != "why:" and not line.startswith("  ")]
    blocks += [Table(TABLE_COLUMNS, table_rows(e), f"why {e.graph}: {e.label_a} vs {e.label_b}, kernels by "
                     "contribution to the difference") for e in found if not e.note and e.changes]
    return Section("why", "Why: limiters, roofline, what explains a difference", paragraphs, blocks)


def build_report(runs: list[Any], comparison: Comparison | None, top: int = 12) -> Report:
    """All sections of the report of one run, or of B against A when ``comparison`` is given."""
    title = (f"hipdnn-trace: {comparison.label_b} vs {comparison.label_a}" if comparison
             else f"hipdnn-trace: {run_label(runs[0])}")
    sections = [headline_section(runs, comparison)]
    if comparison is not None:
        sections.append(verdict_section(comparison, top))
    interleaved = interleaved_section(runs)
    if interleaved:
        sections.append(interleaved)
    sections.append(summary_section(runs))
    paragraphs, tables = oracle_cells(runs)   # run --oracle: ootb vs tuned plan per graph
    if tables:
        sections.append(Section("oracle", "Oracle: out-of-the-box vs tuned plan", paragraphs,
                                [Table(*cells) for cells in tables]))
    why = why_section(runs, comparison)   # profiled runs: limiters, hierarchical roofline, the explanation
    if why is not None:
        sections.append(why)
    sections += figures_sections(runs, comparison, top)
    throughput = throughput_section(runs)
    if throughput:
        sections.append(throughput)
    sections.append(validation_section(runs, comparison))
    sections.append(runs_section(runs))   # how the numbers were made: last, folded
    return Report(title, sections)

"""The pictures of the report's "Why" section (report_model.py ``why_section``): per-graph limiter bars
(share of kernel time per limiter, graph_limiters) and a hierarchical roofline (L1, L2, DRAM; each kernel a
point per level). docs/compare.md "Why".

Roofline (Nsight Compute Kernel Profiling Guide, "Roofline Charts"; the hierarchical roofline of Yang et al.,
"Hierarchical Roofline analysis for GPUs", 2020, which measures it with these metrics): a kernel's achieved
FLOP/s (counter FLOPs / duration) against its arithmetic intensity at each memory level (FLOPs / bytes moved
there: ``l1tex__t_bytes.sum``, ``lts__t_bytes.sum``, ``dram__bytes.sum``); each level's ceiling is its peak
bandwidth, ``<bytes>.sum.peak_sustained`` (bytes per cycle) x ``<unit>__cycles_elapsed.avg.per_second``, as
ncu computes "% of peak"; the compute ceiling is the peak table's (run.json). A level whose metrics a report
lacks (an older profile set) is left out and the caption says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

#: level -> (bytes, bytes per cycle at peak, cycles per second)
LEVELS = {
    "L1": ("l1tex__t_bytes.sum", "l1tex__t_bytes.sum.peak_sustained", "l1tex__cycles_elapsed.avg.per_second"),
    "L2": ("lts__t_bytes.sum", "lts__t_bytes.sum.peak_sustained", "lts__cycles_elapsed.avg.per_second"),
    "DRAM": ("dram__bytes.sum", "dram__bytes.sum.peak_sustained", "dram__cycles_elapsed.avg.per_second"),
}
LIMITER_COLORS = {"parallelism": "#d62728", "latency": "#ff7f0e", "issue": "#9467bd", "compute": "#1f77b4",
                  "memory": "#2ca02c", "unclassified": "#7f7f7f"}


def _axes(width: float, height: float) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.add_subplot()


def _png(fig: Any) -> bytes:
    from hipdnn_trace.compare.plots import _png as to_png

    return to_png(fig)


def roofline_points(metrics: pl.DataFrame) -> tuple[dict[str, list[tuple[float, float, str]]], dict[str, float]]:
    """Per level: (intensity FLOP/B, achieved TFLOP/s, kernel) per kernel, and the level's peak GB/s."""
    points: dict[str, list[tuple[float, float, str]]] = {}
    peaks: dict[str, float] = {}
    if metrics.is_empty() or not {"flops", "duration_ns"} <= set(metrics.columns):
        return points, peaks
    for level, (moved, per_cycle, rate) in LEVELS.items():
        if moved not in metrics.columns:
            continue
        rows = metrics.select("kernel", pl.col("flops").cast(pl.Float64), pl.col("duration_ns").cast(pl.Float64),
                              pl.col(moved).cast(pl.Float64).alias("_b")).filter(
            (pl.col("flops") > 0) & (pl.col("_b") > 0) & (pl.col("duration_ns") > 0))
        points[level] = [(f / b, f / d / 1e3, str(k)) for k, f, d, b in rows.iter_rows()]
        if per_cycle in metrics.columns and rate in metrics.columns:
            bw = metrics.select((pl.col(per_cycle).cast(pl.Float64) * pl.col(rate).cast(pl.Float64)).median()).item()
            if bw:
                peaks[level] = float(bw) / 1e9
    return points, peaks


def roofline_png(metrics: pl.DataFrame, peak_tflops: float | None,
                 hbm_tbs: float | None = None) -> tuple[bytes | None, str]:
    """The hierarchical roofline as a PNG, and its caption. ``hbm_tbs`` (the peak table's HBM bandwidth) is
    the DRAM ceiling where the profile carries no peak metrics of its own (an older set, AMD)."""
    points, peaks = roofline_points(metrics)
    if not points:
        return None, ""
    from_table = "DRAM" in points and "DRAM" not in peaks and bool(hbm_tbs)
    if from_table:
        peaks["DRAM"] = float(hbm_tbs) * 1e3   # TB/s -> GB/s
    fig, ax = _axes(7.5, 4.6)
    markers = {"L1": "^", "L2": "s", "DRAM": "o"}
    xs = [x for pts in points.values() for x, _, _ in pts]
    lo, hi = max(min(xs) / 4, 1e-3), max(xs) * 4
    grid = np.geomspace(lo, hi, 64)
    for level, pts in points.items():
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=markers[level], s=22, label=f"{level} ({len(pts)})")
        if level in peaks:
            roof = grid * peaks[level] / 1e3
            ax.plot(grid, np.minimum(roof, peak_tflops) if peak_tflops else roof, lw=0.9,
                    label=f"{level} {peaks[level]:.0f} GB/s")
    if peak_tflops:
        ax.axhline(peak_tflops, color="k", lw=0.8, ls="--", label=f"compute {peak_tflops:.0f} TFLOP/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte at the level)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.legend(fontsize=7, loc="lower right")
    missing = [lv for lv in LEVELS if lv not in points]
    caption = ("Hierarchical roofline: each kernel once per memory level; ceilings are each level's peak "
               "bandwidth as ncu computes it" + ("; DRAM's from the peak table (hbm_tbs)" if from_table else "")
               + (f"; no {', '.join(missing)} bytes in this profile set" if missing else ""))
    return _png(fig), caption


def limiter_bars_png(limiters: pl.DataFrame, top: int = 24) -> bytes | None:
    """Per graph x configuration: a bar split by the share of kernel time under each limiter."""
    if limiters.is_empty() or "share_pct" not in limiters.columns:
        return None
    df = limiters.with_columns(pl.col("limiter").cast(pl.String).str.split(" ").list.first().alias("_cls"),
                               (pl.col("graph").cast(pl.String) + " · " + pl.col("config").cast(pl.String))
                               .alias("_name"))
    totals = df.group_by("_name").agg(pl.col("kernel_time_ns").sum()).sort("kernel_time_ns", descending=True)
    names = totals["_name"].head(top).to_list()
    fig, ax = _axes(7.5, 0.28 * len(names) + 1.2)
    left = np.zeros(len(names))
    for cls, color in LIMITER_COLORS.items():
        share = [float(df.filter((pl.col("_name") == n) & (pl.col("_cls") == cls))["share_pct"].sum()) for n in names]
        if any(share):
            ax.barh(range(len(names)), share, left=left, color=color, label=cls)
            left += np.array(share)
    ax.set_yticks(range(len(names)), [n[:60] for n in names], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("share of the graph's profiled kernel time (%)")
    ax.set_xlim(0, 100)
    ax.legend(fontsize=7, loc="lower right")
    return _png(fig)

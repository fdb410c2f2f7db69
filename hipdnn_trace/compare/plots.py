"""The report's figures, as PNG bytes (matplotlib's Agg canvas: no display, no pyplot state).

Each function takes plain data (lists of series, frames) and returns PNG bytes, or
None when there is nothing to draw, so the report can leave the section out.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from hipdnn_trace.console import si_rate

COLOR_A = "#7f8c8d"
COLOR_B = "#2e86c1"
VERDICT_COLORS = {"SLOWER": "#c0392b", "FASTER": "#27ae60", "SAME": "#7f8c8d",
                  "INCONCLUSIVE": "#e0a800"}
DPI = 100

#: boxplot's ``vert=False`` became ``orientation="horizontal"`` in matplotlib 3.10.
_MPL = tuple(int(p) for p in matplotlib.__version__.split(".")[:2] if p.isdigit())
HORIZONTAL = {"orientation": "horizontal"} if _MPL >= (3, 10) else {"vert": False}


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


@dataclass
class Distribution:
    """Timed samples of one graph x config, per run (B absent for a single run)."""

    label: str
    a: np.ndarray
    b: np.ndarray | None = None


def distributions(items: Sequence[Distribution], labels: tuple[str, str | None]) -> bytes | None:
    """Box plots of kernel time relative to A's median, one row per graph.

    Relative times put graphs of 10 us and 10 ms on one readable axis; the tick label
    carries the absolute median.
    """
    items = [d for d in items if len(d.a) or (d.b is not None and len(d.b))]
    if not items:
        return None
    two = any(d.b is not None for d in items)
    fig = Figure(figsize=(9, 0.5 + 0.45 * len(items) * (1.6 if two else 1.0)), layout="constrained")
    ax = fig.add_subplot()
    ticks, names, placed = [], [], []
    for row, d in enumerate(reversed(items)):
        reference = float(np.median(d.a)) if len(d.a) else float(np.median(d.b))
        y = row * (2.2 if two else 1.0)
        series = [(d.a, y + (0.4 if two else 0.0), COLOR_A)]
        if d.b is not None:
            series.append((d.b, y - 0.4, COLOR_B))
        for values, pos, color in series:
            if len(values):
                relative = values / reference
                placed.append((relative, pos))
                box = ax.boxplot(relative, positions=[pos], **HORIZONTAL,
                                 widths=0.6, patch_artist=True, showfliers=True,
                                 flierprops={"markersize": 2, "markeredgecolor": color},
                                 medianprops={"color": "black"})
                for patch in box["boxes"]:
                    patch.set_facecolor(color)
                    patch.set_alpha(0.6)
        ticks.append(y)
        names.append(f"{d.label}  ({reference:.4g} ms)")
    low, high = _whisker_span([values for values, _ in placed])
    ax.set_xlim(low, high)
    for values, pos in placed:  # outliers off the axis: count them at the edge
        beyond = int((values > high).sum())
        if beyond:
            ax.annotate(f"+{beyond} >", (high, pos), xytext=(-2, 0), textcoords="offset points",
                        ha="right", va="center", fontsize=7, color="#c0392b")
    ax.set_yticks(ticks, names, fontsize=8)
    ax.axvline(1.0, color="black", linewidth=0.5, linestyle=":")
    ax.set_xlabel(f"kernel time / median of {labels[0]}")
    if two:
        from matplotlib.patches import Patch

        ax.legend(handles=[Patch(color=COLOR_A, alpha=0.6, label=f"A: {labels[0]}"),
                           Patch(color=COLOR_B, alpha=0.6, label=f"B: {labels[1]}")],
                  loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def _plain_log_ticks(axis: object, label: Callable[[float], str] = lambda v: f"{v:g}") -> None:
    """Log axis ticks at 1-2-5 steps written as plain numbers (0.5, 1, 2), not 10^x."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))  # type: ignore[attr-defined]
    axis.set_major_formatter(FuncFormatter(lambda v, _: label(v)))  # type: ignore[attr-defined]
    axis.set_minor_formatter(NullFormatter())  # type: ignore[attr-defined]


def _whisker_span(groups: Sequence[np.ndarray]) -> tuple[float, float]:
    """An x range covering every box's whiskers (1.5 IQR), padded; far outliers fall off.

    CPU and shared-GPU timings carry rare spikes of 10-50x the median; scaling the axis
    to them would flatten every box into a line.
    """
    lows, highs = [], []
    for values in groups:
        q1, q3 = np.percentile(values, [25, 75])
        reach = 1.5 * (q3 - q1)
        lows.append(values[values >= q1 - reach].min())
        highs.append(values[values <= q3 + reach].max())
    low, high = min(lows), max(highs)
    pad = 0.08 * max(high - low, 0.02)
    return low - pad, high + pad


@dataclass
class Series:
    """All iterations of one graph x config of one run, in execution order."""

    values: np.ndarray          # kernel_ms
    warmup: np.ndarray          # bool per iteration
    flagged: np.ndarray         # bool: SM clock below 90% of the run's max


def time_series(panels: Sequence[tuple[str, Series, Series | None]],
                labels: tuple[str, str | None], columns: int = 3) -> bytes | None:
    """Small multiples of kernel time per iteration: warmup shaded, throttled points marked."""
    panels = [p for p in panels if len(p[1].values) or (p[2] is not None and len(p[2].values))]
    if not panels:
        return None
    columns = min(columns, len(panels))
    rows = math.ceil(len(panels) / columns)
    fig = Figure(figsize=(4.2 * columns, 2.6 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False)
    any_flag = False
    for ax, (title, a, b) in zip(axes.flat, panels):
        for series, color, name in ((a, COLOR_A, labels[0]), (b, COLOR_B, labels[1])):
            if series is None or not len(series.values):
                continue
            x = np.arange(len(series.values))
            ax.plot(x, series.values, color=color, linewidth=0.8, marker=".", markersize=2,
                    label=name)
            if series.warmup.any():
                ax.axvspan(-0.5, float(np.flatnonzero(series.warmup).max()) + 0.5,
                           color="#bbbbbb", alpha=0.25, linewidth=0)
            if series.flagged.any():
                any_flag = True
                ax.plot(x[series.flagged], series.values[series.flagged], "x", color="#c0392b",
                        markersize=5)
        shown = np.concatenate([x.values for x in (a, b) if x is not None and len(x.values)])
        if shown.min() > 0 and shown.max() / np.median(shown) > 10:
            ax.set_yscale("log")  # spikes of 10x+ would flatten the rest into a line
            _plain_log_ticks(ax.yaxis)
        ax.set_title(title, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("iteration (warmup shaded)", fontsize=7)
        ax.set_ylabel("ms", fontsize=7)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    handles, names = axes.flat[0].get_legend_handles_labels()
    if any_flag:
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], marker="x", color="#c0392b", linestyle=""))
        names.append("SM clock < 90% of max")
    if len(names) > 1:
        fig.legend(handles, names, loc="outside upper center", ncols=len(names), fontsize=8)
    return _png(fig)


def ratio_bars(names: Sequence[str], ratios: Sequence[float], lows: Sequence[float],
               highs: Sequence[float], verdicts: Sequence[str], threshold: float,
               geomean: tuple[float, float, float] | None) -> bytes | None:
    """Horizontal bars of the change B/A - 1 with CI whiskers; the no-change band shaded."""
    rows = [(n, r, lo, hi, v) for n, r, lo, hi, v in zip(names, ratios, lows, highs, verdicts)
            if r is not None and lo is not None and hi is not None]
    if geomean is not None and not math.isnan(geomean[0]):
        rows.insert(0, ("geomean (all tested rows)", *geomean, "GEOMEAN"))
    if not rows:
        return None
    fig = Figure(figsize=(9, 0.6 + 0.32 * len(rows)), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(len(rows))[::-1]
    change = np.array([(r[1] - 1) * 100 for r in rows])
    low = np.array([(r[2] - 1) * 100 for r in rows])
    high = np.array([(r[3] - 1) * 100 for r in rows])
    colors = [VERDICT_COLORS.get(r[4], "#34495e") for r in rows]
    ax.barh(y, change, color=colors, alpha=0.75)
    ax.errorbar(change, y, xerr=[change - low, high - change], fmt="none", ecolor="black",
                elinewidth=1, capsize=2)
    ax.axvspan((1 / (1 + threshold) - 1) * 100, threshold * 100, color="#bbbbbb", alpha=0.3,
               linewidth=0)
    ax.axvline(0, color="black", linewidth=0.6)
    span = max(float(np.abs(change).max()), threshold * 100) * 1.6
    ax.set_xlim(max(float(low.min()), -span) - 2, min(float(high.max()), span) + 2)
    ax.set_yticks(y, [r[0] for r in rows], fontsize=8)
    ax.set_xlabel("change of median kernel time B vs A, % (95% CI, clipped; > 0: B slower)")
    ax.grid(axis="x", alpha=0.3)
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color=c, alpha=0.75, label=v) for v, c in VERDICT_COLORS.items()]
              + [Patch(color="#bbbbbb", alpha=0.3, label=f"+-{threshold:.0%} band")],
              fontsize=7, loc="lower right")
    return _png(fig)


#: the roofline names this many of the last run's points (the fastest and the slowest by TFLOPS)
LABELLED_POINTS = 8


def roofline(points: Sequence[tuple[Any, ...]], peak_tflops: float | None,
             peak_gbps: float | None, roofs: Mapping[str, float] | None = None) -> bytes | None:
    """TFLOPS against arithmetic intensity (FLOP/byte): colour per config, marker per run.

    ``points`` are (run tag, config, intensity, tflops[, graph name]); run "A" is drawn hollow so
    B's points stay visible on top. The roof is drawn when the GPU's peaks are known: one per data
    type in ``roofs`` (name -> TFLOPS, the speed-of-light peaks), else the single ``peak_tflops``. The
    last run's extreme points (highest and lowest TFLOPS) are labelled with their graph names.
    """
    points = [p for p in points if p[2] and p[3] and p[2] > 0 and p[3] > 0]
    if not points:
        return None
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    configs = sorted({p[1] for p in points})
    palette = [COLOR_B, "#e67e22", "#8e44ad", "#16a085", "#c0392b", "#34495e"]
    for run in sorted({p[0] for p in points}):
        for i, config in enumerate(configs):
            chosen = [p for p in points if p[0] == run and p[1] == config]
            if not chosen:
                continue
            color = palette[i % len(palette)]
            hollow = run == "A"
            ax.scatter([p[2] for p in chosen], [p[3] for p in chosen], s=22, alpha=0.85,
                       facecolors="none" if hollow else color, edgecolors=color,
                       label=f"{run}: {config}" if run else config)
    last = sorted({p[0] for p in points})[-1]
    named = sorted((p for p in points if p[0] == last and len(p) > 4), key=lambda p: p[3])
    half = LABELLED_POINTS // 2
    for p in (named if len(named) <= LABELLED_POINTS else named[:half] + named[-half:]):
        ax.annotate(str(p[4])[:28], (p[2], p[3]), xytext=(4, 3), textcoords="offset points", fontsize=6,
                    color="#333333")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ceilings: dict[str, float] = {}
    for name, tflops in sorted((roofs or {}).items()):   # types of one peak share a line: "bf16/fp16"
        same = next((k for k, v in ceilings.items() if v == tflops), None)
        ceilings[f"{same}/{name}" if same else name] = ceilings.pop(same) if same else tflops
    if not ceilings and peak_tflops:
        ceilings = {"roofline": peak_tflops}
    if ceilings and peak_gbps:
        xs = np.array([p[2] for p in points])
        grid = np.logspace(np.log10(xs.min() / 4), np.log10(max(xs.max(), max(ceilings.values()) * 1e3
                                                                / peak_gbps) * 4), 200)
        for k, (name, tflops) in enumerate(sorted(ceilings.items(), key=lambda kv: -kv[1])):
            label = name if name == "roofline" else f"{name} roof {si_rate(tflops * 1e12, 'FLOPS')}"
            ax.plot(grid, np.minimum(tflops, peak_gbps * grid / 1e3), color="black", linewidth=1,
                    linestyle=("-", "--", ":", "-.")[k % 4], label=label)
    _plain_log_ticks(ax.xaxis)
    _plain_log_ticks(ax.yaxis, lambda tflops: si_rate(tflops * 1e12, "FLOPS"))  # as the tables say it
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("achieved compute")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return _png(fig)

"""Why two configurations of one graph take different times: the kernel-level changes that account for the
difference, from the two sides' ``kernel_metrics`` (docs/frames.md; profilers/why.py's columns).

One pure function serves every caller: ``compare RUN_A RUN_B --why`` (graphs whose verdict is SLOWER or
FASTER), ``compare RUN --why`` on one run (the oracle's out-of-the-box and tuned plans, the interleaved
A/B's two configurations) and the end of ``run --oracle --profile ncu``. docs/compare.md "Why".

Kernels are paired by name and by their order among the kernels of that name in one iteration; a kernel on
one side only is added or removed whole. Per kernel: its median profiled duration over the iterations,
launch shape (grid, block, waves), occupancy (achieved / theoretical and the limiter), the limiter of
profilers/why.py and the top stalls. A kernel's contribution is its time on A minus its time on B (0 where
absent), so the contributions add up to the difference of the profiled kernel times; each is also given as
a share of that difference. Profiled durations come from the counter pass (caches flushed per replay, ncu's
default): they explain the difference, the timed medians (the run's own) measure it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

#: columns shown per kernel (those present)
SHAPE = ("grid_size", "block_size", "sm_count", "waves_per_sm", "achieved_occupancy_pct", "theoretical_occupancy_pct",
         "occupancy_limiter", "limiter", "top_stalls", "why")


@dataclass(frozen=True)
class KernelChange:
    kernel: str
    occurrence: int
    a_ns: float | None          # median profiled duration on A (None: not on A)
    b_ns: float | None
    a: dict[str, Any]           # SHAPE columns on A ({} when absent)
    b: dict[str, Any]

    @property
    def contribution_ns(self) -> float:
        return (self.a_ns or 0.0) - (self.b_ns or 0.0)


@dataclass
class Explanation:
    graph: str
    label_a: str
    label_b: str
    time_a_ms: float | None     # the run's own (timed) medians
    time_b_ms: float | None
    changes: list[KernelChange] = field(default_factory=list)
    note: str = ""

    @property
    def profiled_a_ns(self) -> float:
        return sum(c.a_ns or 0.0 for c in self.changes)

    @property
    def profiled_b_ns(self) -> float:
        return sum(c.b_ns or 0.0 for c in self.changes)

    @property
    def delta_ns(self) -> float:
        return self.profiled_a_ns - self.profiled_b_ns


def _per_kernel(frame: pl.DataFrame) -> dict[tuple[str, int], tuple[float, dict[str, Any]]]:
    """(kernel, occurrence in its iteration) -> (median duration over iterations, its first row's shape)."""
    if frame.is_empty():
        return {}
    df = frame.with_columns(pl.col("iteration").fill_null(0) if "iteration" in frame.columns else pl.lit(0)
                            .alias("iteration"))
    order = "dispatch_id" if "dispatch_id" in df.columns else None
    df = (df.sort(["iteration", order]) if order else df).with_columns(
        pl.int_range(pl.len()).over(["iteration", "kernel"]).alias("_occ"))
    shape = [c for c in SHAPE if c in df.columns]
    out = {}
    for (kernel, occ), group in df.group_by(["kernel", "_occ"], maintain_order=True):
        first = group.row(0, named=True)
        out[(str(kernel), int(occ))] = (float(group["duration_ns"].median()), {c: first[c] for c in shape})
    return out


def explain(a: pl.DataFrame, b: pl.DataFrame, *, graph: str, label_a: str, label_b: str,
            time_a_ms: float | None = None, time_b_ms: float | None = None) -> Explanation:
    """The kernel-level changes between side A's and side B's kernel_metrics rows of one graph."""
    ka, kb = _per_kernel(a), _per_kernel(b)
    keys = list(ka) + [k for k in kb if k not in ka]
    changes = [KernelChange(kernel=k[0], occurrence=k[1], a_ns=ka[k][0] if k in ka else None,
                            b_ns=kb[k][0] if k in kb else None, a=ka[k][1] if k in ka else {},
                            b=kb[k][1] if k in kb else {}) for k in keys]
    changes.sort(key=lambda c: -abs(c.contribution_ns))
    note = "" if ka and kb else f"no profiled kernels on {'A' if not ka else 'B'}"
    return Explanation(graph, label_a, label_b, time_a_ms, time_b_ms, changes, note)


def _ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.4g} ms"


def _shape(s: dict[str, Any]) -> str:
    if not s:
        return "-"
    parts = []
    if s.get("grid_size") is not None:
        waves = s.get("waves_per_sm")
        parts.append(f"grid {s['grid_size']}x{s.get('block_size')}" + (f", {waves:.2g} waves" if waves is not None
                                                                         else ""))
    if s.get("achieved_occupancy_pct") is not None:
        limit = f", limit {s['occupancy_limiter']}" if s.get("occupancy_limiter") else ""
        parts.append(f"occupancy {s['achieved_occupancy_pct']:.1f}/{s.get('theoretical_occupancy_pct') or 0:.1f}%"
                     f"{limit}")
    if s.get("limiter"):
        parts.append(str(s["limiter"]))
    if s.get("top_stalls"):
        parts.append(f"stalls {s['top_stalls']}")
    return "; ".join(parts)


def _over(e: Explanation, total: float) -> str:
    """Why a share can pass 100%: the faster side's kernels that run longer there give some of it back."""
    back = sum(abs(c.contribution_ns) for c in e.changes if (c.contribution_ns > 0) != (e.delta_ns > 0))
    return f" (over 100%: the faster side's own kernel time gives back {back / 1e6:.4g} ms)" if total > abs(
        e.delta_ns) and back else ""


def summary(e: Explanation) -> str:
    """One paragraph: which kernels account for the difference, by limiter, with their launch shapes."""
    if e.note:
        return f"{e.graph}: {e.note}"
    delta = e.delta_ns
    if delta == 0:
        return f"{e.graph}: no difference in profiled kernel time"
    slower = e.label_a if delta > 0 else e.label_b
    side = [c for c in e.changes if (c.contribution_ns > 0) == (delta > 0)]
    by_limiter: dict[str, list[KernelChange]] = {}
    for c in side:
        shape = c.a if delta > 0 else c.b
        by_limiter.setdefault(str(shape.get("limiter") or "unclassified").split(" ")[0], []).append(c)
    name, group = max(by_limiter.items(), key=lambda kv: sum(abs(c.contribution_ns) for c in kv[1]))
    total = sum(abs(c.contribution_ns) for c in group)
    shapes = [(c.a if delta > 0 else c.b) for c in group]
    grids = " and ".join(str(s.get("grid_size")) for s in shapes if s.get("grid_size") is not None)
    sms = next((s.get("sm_count") for s in shapes if s.get("sm_count")), None)
    waves = " and ".join(f"{s['waves_per_sm']:.2g}" for s in shapes if s.get("waves_per_sm") is not None)
    launch = f" with grids of {grids} blocks" + (f" on {sms} SMs" if sms else "") + \
        (f" ({waves} waves)" if waves else "") if grids else ""
    timed = ""
    if e.time_a_ms is not None and e.time_b_ms is not None:
        timed = f"; timed {e.time_a_ms:.4g} ms vs {e.time_b_ms:.4g} ms (B/A {e.time_b_ms / e.time_a_ms:.3f})"
    return (f"{e.graph}: {slower} is slower by {abs(delta) / 1e6:.4g} ms of profiled kernel time{timed}. "
            f"{len(group)} kernel(s) of {slower}{launch}, limiter {name}, account for {total / 1e6:.4g} ms, "
            f"{100 * total / abs(delta):.0f}% of the difference: {', '.join(c.kernel for c in group)}."
            + _over(e, total))


def render(e: Explanation, top: int = 8) -> str:
    """The summary and a table of the kernels that contribute most."""
    lines = [summary(e)]
    if e.note:
        return lines[0]
    lines.append(f"  {'kernel':48s} {'A':>10s} {'B':>10s} {'A-B':>10s} {'share':>6s}  A | B")
    for c in e.changes[:top]:
        share = 100 * c.contribution_ns / e.delta_ns if e.delta_ns else 0.0
        lines.append(f"  {c.kernel[:48]:48s} {_ms(c.a_ns):>10s} {_ms(c.b_ns):>10s} {_ms(c.contribution_ns):>10s} "
                     f"{share:5.0f}%  {_shape(c.a)} | {_shape(c.b)}")
    if len(e.changes) > top:
        lines.append(f"  ... {len(e.changes) - top} more kernel(s)")
    return "\n".join(lines)


TABLE_COLUMNS = ["kernel", "A", "B", "A-B", "share %", "A: launch, occupancy, limiter, stalls",
                 "B: launch, occupancy, limiter, stalls"]


def table_rows(e: Explanation, top: int = 8) -> list[list[str]]:
    """The kernels that contribute most, as text cells (TABLE_COLUMNS): the report's explanation table."""
    rows = []
    for c in e.changes[:top]:
        share = 100 * c.contribution_ns / e.delta_ns if e.delta_ns else 0.0
        rows.append([c.kernel, _ms(c.a_ns), _ms(c.b_ns), _ms(c.contribution_ns), f"{share:.0f}", _shape(c.a),
                     _shape(c.b)])
    return rows


def side_rows(metrics: pl.DataFrame, graph_id: str, config: str) -> pl.DataFrame:
    """One side's kernel_metrics rows (one graph on one configuration)."""
    if metrics.is_empty() or not {"graph_id", "config"} <= set(metrics.columns):
        return metrics.clear()
    return metrics.filter((pl.col("graph_id").cast(pl.String) == graph_id) & (pl.col("config") == config))

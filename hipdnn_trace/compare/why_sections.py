"""``--why`` sections: which pairs of one or two runs to explain (compare/why.py does the explaining)
and the text around them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from hipdnn_trace.compare.verdict import FASTER, SLOWER
from hipdnn_trace.compare.why import Explanation, explain, render, side_rows
from hipdnn_trace.results.profile_frames import load_profile_frame

NOT_PROFILED = ("{run}: no kernel_metrics, so no kernel-level explanation; profile the run with --profile ncu "
                "(NVIDIA) or --profile rocprofv3 --profile-set why (AMD)")


def _metrics(run: Any) -> pl.DataFrame | None:
    folder = getattr(run, "path", None)
    return load_profile_frame(Path(folder), "kernel_metrics") if folder is not None else None


def two_runs(comparison: Any, run_a: Any, run_b: Any) -> str:
    """Each SLOWER / FASTER graph of ``compare RUN_A RUN_B``, explained kernel by kernel."""
    return two_runs_explained(comparison, run_a, run_b)[0]


def two_runs_explained(comparison: Any, run_a: Any, run_b: Any) -> tuple[str, list[Explanation]]:
    """two_runs's text and the explanations behind it (the report tabulates them)."""
    ma, mb = _metrics(run_a), _metrics(run_b)
    missing = [NOT_PROFILED.format(run=r.path) for r, m in ((run_a, ma), (run_b, mb)) if m is None]
    if missing:
        return "\n\nwhy:\n" + "\n".join(missing) + "\n", []
    found = []
    for r in comparison.table.filter(pl.col("verdict").is_in([SLOWER, FASTER])).iter_rows(named=True):
        e = explain(side_rows(ma, str(r["graph_id"]), r["config_a"]), side_rows(mb, str(r["graph_id"]), r["config_b"]),
                    graph=r["graph"], label_a=f"A ({r['config_a']})", label_b=f"B ({r['config_b']})",
                    time_a_ms=r.get("median_a"), time_b_ms=r.get("median_b"))
        found.append(e)
    text = "\n\n".join(render(e) for e in found) if found else "no graph is SLOWER or FASTER: nothing to explain"
    return "\n\nwhy:\n" + text + "\n", found


def _oracle_pairs(run: Any, threshold: float) -> list[tuple[str, str, str, str, float, float]]:
    df = getattr(run, "oracle", None)
    if df is None or df.is_empty():
        return []
    keep = df.filter((pl.col("regret") > 1 + threshold) | (pl.col("regret") < 1 / (1 + threshold)))
    return [(str(r["graph"]), str(r["graph_id"]), r["config"], r["tuned_config"], r["ootb_ms"], r["tuned_ms"])
            for r in keep.iter_rows(named=True)]


def _ab_pairs(run: Any) -> list[tuple[str, str, str, str, float | None, float | None]]:
    df = getattr(run, "ab", None)
    if df is None or df.is_empty():
        return []
    keep = df.filter(pl.col("verdict").is_in([SLOWER, FASTER]))
    return [(str(r["graph"]), str(r["graph_id"]), r["config"], r["config_b"], None, None)
            for r in keep.iter_rows(named=True)]


def one_run(run: Any, threshold: float) -> tuple[str, list[Explanation]]:
    """The oracle's out-of-the-box vs tuned plans and the interleaved A/B pairs of one run, explained."""
    pairs = _oracle_pairs(run, threshold) + _ab_pairs(run)
    if not pairs:
        return (f"{run.path}: no oracle pair with a regret beyond {threshold:.0%} and no SLOWER/FASTER interleaved "
                "A/B pair: nothing to explain\n"), []
    metrics = _metrics(run)
    if metrics is None:
        return NOT_PROFILED.format(run=run.path) + "\n", []
    found = [explain(side_rows(metrics, gid, a), side_rows(metrics, gid, b), graph=graph, label_a=a, label_b=b,
                     time_a_ms=ta, time_b_ms=tb) for graph, gid, a, b, ta, tb in pairs]
    return "why:\n" + "\n\n".join(render(e) for e in found) + "\n", found

"""Per graph: the share of its kernel time under each limiter (the ``graph_limiters`` frame).

Input: ``kernel_metrics`` rows with ``limiter`` and ``duration_ns`` (harness kernels already
gone). One row per graph x config x limiter: ``kernel_time_ns`` (per iteration), ``share_pct``
of the graph's profiled kernel time, the ``dominant_kernel`` under that limiter and its share
of the graph's time, and the graph's counter FLOPs (``flops``, per iteration) over the
analytical FLOPs of the summary, flagged above :data:`FLOPS_FLAG_RATIO`.
"""

from __future__ import annotations

import polars as pl

KEY = ("run_id", "graph", "graph_id", "config")
FLOPS_FLAG_RATIO = 1.5
FLAG_TEXT = "kernels do much more work than the graph needs"
SCHEMA = {"run_id": pl.String, "graph": pl.String, "graph_id": pl.String, "config": pl.String,
          "limiter": pl.String, "kernel_time_ns": pl.Float64, "share_pct": pl.Float64,
          "dominant_kernel": pl.String, "dominant_share_pct": pl.Float64, "counter_flops": pl.Float64,
          "analytical_flops": pl.Float64, "flops_ratio": pl.Float64, "flops_flag": pl.String}


def graph_limiters(kernel_metrics: pl.DataFrame, analytical: pl.DataFrame | None = None) -> pl.DataFrame:
    """See the module docstring; ``analytical``: graph_id[, config], flops (e.g. the summary)."""
    if kernel_metrics.is_empty() or "limiter" not in kernel_metrics.columns:
        return pl.DataFrame(schema=SCHEMA)
    df = kernel_metrics
    for col in KEY:
        if col not in df.columns:
            df = df.with_columns(pl.lit(None, dtype=pl.String).alias(col))
    key = list(KEY)
    iters = pl.col("iteration").n_unique().clip(lower_bound=1) if "iteration" in df.columns else pl.lit(1)
    df = df.with_columns(pl.col("limiter").fill_null("unclassified"), pl.col("duration_ns").cast(pl.Float64),
                         iters.over(key).alias("_iters"))
    flops = (pl.col("flops").sum() / pl.col("_iters").first()) if "flops" in df.columns else pl.lit(None)
    graph = df.group_by(key).agg((pl.col("duration_ns").sum() / pl.col("_iters").first()).alias("_total"),
                                 flops.cast(pl.Float64).alias("counter_flops"))
    by_kernel = df.group_by([*key, "limiter", "kernel"]).agg(
        (pl.col("duration_ns").sum() / pl.col("_iters").first()).alias("_t"))
    dominant = by_kernel.sort("_t", descending=True).group_by([*key, "limiter"]).agg(
        pl.first("kernel").alias("dominant_kernel"), pl.first("_t").alias("_dt"))
    rows = by_kernel.group_by([*key, "limiter"]).agg(pl.col("_t").sum().alias("kernel_time_ns"))
    out = rows.join(dominant, on=[*key, "limiter"], nulls_equal=True).join(graph, on=key, nulls_equal=True)
    out = out.with_columns((100 * pl.col("kernel_time_ns") / pl.col("_total")).alias("share_pct"),
                           (100 * pl.col("_dt") / pl.col("_total")).alias("dominant_share_pct"))
    out = _with_analytical(out, analytical)
    return out.select(list(SCHEMA)).cast(SCHEMA).sort([*key, "share_pct"], descending=[False] * 4 + [True],
                                                      nulls_last=True)


def _with_analytical(out: pl.DataFrame, analytical: pl.DataFrame | None) -> pl.DataFrame:
    if analytical is None or analytical.is_empty() or "flops" not in analytical.columns:
        out = out.with_columns(pl.lit(None, dtype=pl.Float64).alias("analytical_flops"))
    else:
        on = [c for c in ("graph_id", "config") if c in analytical.columns]
        ref = analytical.select(*on, pl.col("flops").cast(pl.Float64).alias("analytical_flops")).unique(
            subset=on, keep="first")
        out = out.join(ref, on=on, how="left", nulls_equal=True)
    ratio = pl.when(pl.col("analytical_flops") > 0).then(pl.col("counter_flops") / pl.col("analytical_flops"))
    return out.with_columns(ratio.alias("flops_ratio")).with_columns(
        pl.when(pl.col("flops_ratio") > FLOPS_FLAG_RATIO).then(
            pl.format("{}: counter FLOPs {}x the graph's", pl.lit(FLAG_TEXT), pl.col("flops_ratio").round(2)))
        .otherwise(None).alias("flops_flag"))


def dominant_limiter(limiters: pl.DataFrame) -> pl.DataFrame:
    """graph_id, config, bottleneck: the limiter with the largest share of each graph's time
    (summary.csv's ``bottleneck`` column)."""
    if limiters.is_empty():
        return pl.DataFrame(schema={"graph_id": pl.String, "config": pl.String, "bottleneck": pl.String})
    return limiters.sort("share_pct", descending=True).group_by(["graph_id", "config"], maintain_order=True).agg(
        pl.first("limiter").alias("bottleneck"))


def graphs_by_limiter(graphs: pl.DataFrame, limiters: pl.DataFrame) -> pl.DataFrame:
    """Where kernels have limiters, the per-graph ``verdict`` is the dominant one and
    ``kernel_verdicts`` the limiters' shares of kernel time (not the FLOP/DRAM verdict)."""
    limiters = limiters.filter(pl.col("limiter") != "unclassified") if limiters.height else limiters
    if graphs.is_empty() or limiters.is_empty() or "graph_id" not in graphs.columns:
        return graphs
    key = [c for c in ("graph_id", "config") if c in graphs.columns]
    mix = limiters.sort("share_pct", descending=True).group_by(key, maintain_order=True).agg(
        pl.first("limiter").alias("_v"),
        pl.format("{} {}%", pl.col("limiter"), pl.col("share_pct").round(0).cast(pl.Int64)).str.join(", ")
        .alias("_mix"))
    out = graphs.join(mix, on=key, how="left", nulls_equal=True)
    return out.with_columns(
        pl.coalesce("_v", "verdict").alias("verdict"),
        pl.when(pl.col("_v").is_not_null()).then(pl.format("kernel time by limiter: {}", pl.col("_mix")))
        .otherwise(pl.col("verdict_reason")).alias("verdict_reason"),
        pl.coalesce("_mix", "kernel_verdicts").alias("kernel_verdicts") if "kernel_verdicts" in out.columns
        else pl.col("_mix").alias("kernel_verdicts"),
    ).drop("_v", "_mix")

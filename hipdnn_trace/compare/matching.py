"""Pair the measurements of run A with those of run B.

A *unit* is one graph x config (x engine) of one run with its raw timed samples.
Units pair by ``graph_id`` (a hash of the canonical graph, so runs from different
machines join; the graph name stands in when a run has no ids) and config, plus:

- ``by="graph"``: one unit per graph x config; a run with several engines per graph
  and config is refused (pooling engines would mix distributions).
- ``by="engine"``: engine is part of the key.
- ``by="best"``: each run's fastest engine (lowest median) per graph x config.

When each run has exactly one config and their names differ (``torch`` vs
``hipdnn``), the config is dropped from the key: that is the backend A/B a user means.

A unit's samples are those its summary statistic used: samples flagged ``throttled`` are left out
unless the run kept them (run.json ``clocks.throttle.keep``) or every one was throttled. ``metric``
``cycles`` pairs GPU cycles (kernel_ms x SM clock) instead of times, for runs taken at different clocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from hipdnn_trace.errors import UserError

MODES = ("graph", "engine", "best")

#: Columns every units frame has, in this order.
UNIT_COLUMNS = [
    "match_id", "graph", "graph_id", "config", "engine", "backend", "status",
    "validation", "tflops", "gbps", "warnings", "samples", "n",
]

#: what ``units`` can pair: kernel time (ms) or GPU cycles (docs/timing.md "Clocks on every sample")
METRICS = ("kernel_ms", "cycles")


def keeps_throttled(meta: Any) -> bool:
    """Whether the run kept throttled samples in its statistic (``run --keep-throttled``)."""
    clocks = meta.get("clocks") if isinstance(meta, dict) else None
    throttle = clocks.get("throttle") if isinstance(clocks, dict) else None
    return bool(isinstance(throttle, dict) and throttle.get("keep"))


def units(run: Any, metric: str = "kernel_ms") -> pl.DataFrame:
    """One row per graph x config x engine of a run, with its timed ``metric`` samples (the module
    docstring says which)."""
    keys = ["match_id", "config", "engine"]
    identity = pl.coalesce("graph_id", "graph").alias("match_id")
    fill = [pl.col("config").fill_null(""), pl.col("engine").fill_null("")]
    iterations = run.iterations
    for name, dtype in (("throttled", pl.Boolean()), ("cycles", pl.Float64())):   # runs from before clocks
        if name not in iterations.columns:
            iterations = iterations.with_columns(pl.lit(None, dtype=dtype).alias(name))
    flagged = pl.col("throttled").fill_null(False)
    used = pl.lit(True) if keeps_throttled(run.meta) else (~flagged | flagged.all().over(keys))
    timed = (
        iterations.lazy()
        .filter(
            (pl.col("phase") == "timed")
            & pl.col(metric).is_not_null()
            & pl.col(metric).is_finite()
            & (pl.col(metric) > 0)
        )
        .with_columns(identity, *fill)
        .filter(used)
        .sort("iteration", nulls_last=True, maintain_order=True)
        .group_by(keys, maintain_order=True)
        .agg(
            pl.col("graph").first().alias("graph_it"),
            pl.col("graph_id").first().alias("graph_id_it"),
            pl.col("backend").first().alias("backend_it"),
            pl.col(metric).alias("samples"),
        )
    )
    summary = run.summary if "warnings" in run.summary.columns else run.summary.with_columns(
        pl.lit(None, dtype=pl.String()).alias("warnings"))
    summary = (
        summary.lazy()
        .with_columns(identity, *fill)
        .select(*keys, "graph", "graph_id", "backend", "status", "validation", "tflops", "gbps", "warnings")
        .unique(subset=keys, keep="first", maintain_order=True)
    )
    joined = summary.join(timed, on=keys, how="full", coalesce=True, nulls_equal=True)
    out = joined.select(
        "match_id",
        pl.coalesce("graph", "graph_it").alias("graph"),
        pl.coalesce("graph_id", "graph_id_it").alias("graph_id"),
        "config",
        "engine",
        pl.coalesce("backend", "backend_it").alias("backend"),
        pl.when(pl.col("status").is_null() & pl.col("samples").is_not_null())
        .then(pl.lit("ok"))
        .otherwise(pl.col("status"))
        .alias("status"),
        "validation",
        "tflops",
        "gbps",
        "warnings",
        pl.col("samples").fill_null(pl.lit([], dtype=pl.List(pl.Float64))),
    ).with_columns(pl.col("samples").list.len().cast(pl.Int64).alias("n"))
    return out.filter(pl.col("match_id").is_not_null()).sort(keys).collect().select(UNIT_COLUMNS)


def _pick_best(frame: pl.DataFrame) -> pl.DataFrame:
    """The lowest-median engine per graph x config (units without samples only if alone)."""
    return (
        frame.with_columns(
            pl.col("samples").list.median().alias("_median"),
        )
        .sort(["match_id", "config", "_median"], nulls_last=True)
        .unique(subset=["match_id", "config"], keep="first", maintain_order=True)
        .drop("_median")
    )


def _check_one_engine(frame: pl.DataFrame, label: str) -> None:
    counts = frame.group_by(["match_id", "config"]).agg(pl.len().alias("k"), pl.col("graph").first())
    several = counts.filter(pl.col("k") > 1)
    if several.height:
        example = several.row(0, named=True)
        raise UserError(
            f"run {label} has {example['k']} engines for graph {example['graph']!r} config "
            f"{example['config']!r}; use --by engine (pair engines) or --by best (fastest each)"
        )


@dataclass
class Matched:
    """Paired units (suffix _a/_b), the units of each run without a partner, and notes."""

    pairs: pl.DataFrame
    only_a: pl.DataFrame
    only_b: pl.DataFrame
    notes: list[str]
    configs_paired: bool  # the config was dropped from the key (one config per run)


def match(units_a: pl.DataFrame, units_b: pl.DataFrame, by: str, labels: tuple[str, str]) -> Matched:
    """Pair two runs' units according to ``by`` (see the module docstring)."""
    if by not in MODES:
        raise UserError(f"--by must be one of {', '.join(MODES)}, not {by!r}")
    notes: list[str] = []
    if by == "best":
        units_a, units_b = _pick_best(units_a), _pick_best(units_b)
    elif by == "graph":
        _check_one_engine(units_a, labels[0])
        _check_one_engine(units_b, labels[1])
    key = ["match_id", "config"] + (["engine"] if by == "engine" else [])
    configs_a = units_a["config"].unique().to_list()
    configs_b = units_b["config"].unique().to_list()
    if len(configs_a) == 1 and len(configs_b) == 1 and configs_a != configs_b:
        key.remove("config")
        notes.append(
            f"each run has one config ({configs_a[0]!r} vs {configs_b[0]!r}): paired by graph"
        )
    a = units_a.rename({c: f"{c}_a" for c in units_a.columns if c not in key})
    b = units_b.rename({c: f"{c}_b" for c in units_b.columns if c not in key})
    pairs = a.join(b, on=key, how="inner", nulls_equal=True)
    only_a = units_a.join(units_b.select(key), on=key, how="anti", nulls_equal=True)
    only_b = units_b.join(units_a.select(key), on=key, how="anti", nulls_equal=True)
    if "config" not in key:
        pairs = pairs.with_columns(
            pl.concat_str([pl.col("config_a"), pl.col("config_b")], separator=" vs ").alias("config")
        )
    if "engine" in key:
        pairs = pairs.with_columns(pl.col("engine").alias("engine_a"), pl.col("engine").alias("engine_b"))
    pairs = pairs.with_columns(
        pl.coalesce("graph_a", "graph_b").alias("graph"),
        pl.coalesce("graph_id_a", "graph_id_b").alias("graph_id"),
    )
    if "config_a" not in pairs.columns:
        pairs = pairs.with_columns(pl.col("config").alias("config_a"), pl.col("config").alias("config_b"))
    return Matched(
        pairs=pairs, only_a=only_a, only_b=only_b, notes=notes, configs_paired="config" not in key
    )

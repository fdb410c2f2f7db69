"""Counters -> derived metrics -> roofline point -> bottleneck verdict. Vendor-neutral.

Input is the long ``counters`` frame (one row per dispatch x counter) from any profiler
(rocprofv3, rocprof, rocpd, ncu); the arithmetic comes from an arch profile
(profiles/<arch>.toml: ``[flops]``, ``[bytes]``, ``[metrics]``) and the peaks from
profiles/peaks.toml, so nothing here knows a vendor's counter names.

Units: durations ns; FLOPs / ns = GFLOP/s, so TFLOPS = FLOPs / ns / 1e3; bytes / ns = GB/s.

Verdict per kernel dispatch (thresholds in :class:`Thresholds`, documented in
docs/amd-profiling.md):

* ``compute %`` = sum over FLOP classes of achieved / peak of that class (a kernel doing
  FP16 MFMA and FP32 VALU work spends time on both); ``DRAM %`` = achieved / peak bandwidth.
* ``latency-bound`` when both are below ``busy_pct`` (neither unit is the limit: launch
  latency, dependencies, too little parallelism);
* else ``compute-bound`` if compute % >= DRAM %, otherwise ``memory-bound``.

The reason string carries the numbers (both percentages, the peaks used, the arithmetic
intensity and the ridge point). Per graph the same rule runs on the kernels' summed FLOPs,
bytes and busy time, and a graph whose GPU sits idle between kernels for at least
``gpu_idle_pct`` of its iterations is ``latency-bound`` (launch-bound) whatever its kernels do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from hipdnn_trace.errors import UserError
from hipdnn_trace.profilers.profiles import GpuSpec, Profile

#: Columns that label a dispatch in the wide view, in output order (those present are kept).
LABEL_COLUMNS = ("run_id", "graph", "graph_id", "config", "phase", "iteration", "capture")
GRAPH_KEY = ("run_id", "graph", "graph_id", "config")


@dataclass(frozen=True)
class Thresholds:
    """Verdict thresholds, in percent."""

    busy_pct: float = 30.0      # below this share of both compute and DRAM peak: latency-bound
    gpu_idle_pct: float = 50.0  # graph: GPU idle between kernels this share of the time: latency-bound


def _present(df: pl.DataFrame, names) -> list[str]:
    return [n for n in names if n in df.columns]


#: columns of a counters_wide frame with no counters (every wide frame starts with these)
WIDE_EMPTY_SCHEMA = {"capture": pl.String, "device": pl.Int64, "dispatch_id": pl.Int64, "kernel": pl.String,
                     "duration_ns": pl.Float64, "passes": pl.UInt32}


def wide_counters(counters: pl.DataFrame, kernels: pl.DataFrame | None = None) -> pl.DataFrame:
    """Long counters -> one row per dispatch, one column per counter.

    A dispatch is ``dispatch_id`` (else ``correlation_id``) within a capture and device;
    counters collected in several passes (separate application runs) land on one row, the
    way rocprof-compute merges passes, and a counter read in more than one pass is
    averaged. ``duration_ns`` is the mean of the passes' dispatch durations (from the
    counter rows' timestamps, else from ``kernels``); ``passes`` counts them. A dispatch
    that is a different kernel in different passes means the passes did not replay the
    same work: that is an error, not something to average over.
    """
    if counters.is_empty():   # the key and label columns still, so the CSV has a header readers accept
        return pl.DataFrame(schema=WIDE_EMPTY_SCHEMA)
    df = counters
    if "dispatch_id" not in df.columns:
        df = df.with_columns(pl.lit(None, dtype=pl.Int64).alias("dispatch_id"))
    if "correlation_id" in df.columns:
        df = df.with_columns(pl.coalesce("dispatch_id", "correlation_id").alias("dispatch_id"))
    for col, dtype in (("capture", pl.String), ("device", pl.Int64), ("pass", pl.Int64)):
        if col not in df.columns:
            df = df.with_columns(pl.lit(None, dtype=dtype).alias(col))
    key = ["capture", "device", "dispatch_id"]

    clash = df.group_by(key).agg(pl.col("kernel").n_unique().alias("n"), pl.col("kernel").unique().alias("names"))
    clash = clash.filter(pl.col("n") > 1)
    if clash.height:
        row = clash.row(0, named=True)
        raise UserError(
            f"dispatch {row['dispatch_id']} (capture {row['capture'] or '-'}) is "
            f"{' / '.join(map(str, row['names'][:2]))} "
            "in different counter passes: the passes did not replay the same work"
        )

    labels = _present(df, LABEL_COLUMNS)
    per_pass = df.group_by(key + ["pass"]).agg(
        pl.first("kernel"),
        *[pl.first(c) for c in labels if c != "capture"],
        ((pl.col("end_ns") - pl.col("start_ns")).first() if {"start_ns", "end_ns"} <= set(df.columns)
         else pl.lit(None, dtype=pl.Int64)).alias("duration_ns"),
    )
    if kernels is not None and not kernels.is_empty() and "dispatch_id" in kernels.columns:
        k = kernels
        for col, dtype in (("capture", pl.String), ("pass", pl.Int64)):
            if col not in k.columns:
                k = k.with_columns(pl.lit(None, dtype=dtype).alias(col))
        kdur = k.select("capture", "device", "dispatch_id", "pass", pl.col("duration_ns").alias("_kdur")).unique(
            subset=["capture", "device", "dispatch_id", "pass"], keep="first"
        )
        per_pass = per_pass.join(kdur, on=key + ["pass"], how="left", nulls_equal=True).with_columns(
            pl.coalesce("duration_ns", "_kdur").alias("duration_ns")
        ).drop("_kdur")
    meta = per_pass.group_by(key).agg(
        pl.first("kernel"),
        *[pl.col(c).drop_nulls().first().alias(c) for c in labels if c != "capture"],
        pl.col("duration_ns").mean().alias("duration_ns"),
        pl.col("pass").n_unique().alias("passes"),
    )
    values = df.group_by(key + ["counter"]).agg(pl.col("value").mean())
    out = meta.join(_pivot(values, key), on=key, how="left", nulls_equal=True)
    front = ([c for c in LABEL_COLUMNS if c in out.columns]
             + ["kernel", "dispatch_id", "device", "duration_ns", "passes"])
    counters_cols = sorted(c for c in out.columns if c not in front)
    return out.select(front + counters_cols).sort([c for c in ("capture", "dispatch_id") if c in out.columns],
                                                  nulls_last=True)


def _pivot(values: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    """key + counter + value -> key + one column per counter (sorted names).

    Done with numpy: polars' pivot is slow for the thousands of columns a
    rocprof-compute workload has.
    """
    rows = values.select(key).unique(maintain_order=True).with_row_index("_r")
    names = sorted(values["counter"].unique().to_list())
    cols = pl.DataFrame({"counter": names, "_c": list(range(len(names)))},
                        schema={"counter": pl.String, "_c": pl.Int64})
    idx = values.join(rows, on=key, how="left", nulls_equal=True).join(cols, on="counter", how="left")
    grid = np.full((rows.height, len(names)), np.nan)
    grid[idx["_r"].to_numpy(), idx["_c"].to_numpy()] = idx["value"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    data = pl.from_numpy(grid, schema=names, orient="row").fill_nan(None)
    return pl.concat([rows.drop("_r"), data], how="horizontal")


def _computable(expr, columns: set[str], constants: Mapping[str, float]) -> bool:
    return expr.names <= columns and all(c in constants for c in expr.constants)


def derive(
    wide: pl.DataFrame,
    profile: Profile,
    gpu: GpuSpec | None = None,
    constants: Mapping[str, float] | None = None,
    thresholds: Thresholds = Thresholds(),
) -> pl.DataFrame:
    """Per-dispatch FLOPs, bytes, named metrics, TFLOPS, GB/s, % of peak, roofline, verdict.

    Formulas whose counters are missing are skipped (their columns are absent);
    ``constants`` (e.g. ``num_xcd`` from the agent info) override the peak table's.
    """
    if wide.is_empty():
        return wide
    consts = dict(gpu.constants() if gpu else {})
    consts.update({k: float(v) for k, v in (constants or {}).items() if v is not None})
    df = wide
    if "duration_ns" not in df.columns:
        df = df.with_columns(pl.lit(None, dtype=pl.Float64).alias("duration_ns"))
    cols = set(df.columns)
    if profile.duration is not None and _computable(profile.duration, cols, consts):
        df = df.with_columns(
            pl.coalesce(profile.duration.to_polars(consts), pl.col("duration_ns")).alias("duration_ns"))
    df = df.with_columns(pl.col("duration_ns").cast(pl.Float64))

    flop_cols = [f"flops_{k}" for k, e in profile.flops.items() if _computable(e, cols, consts)]
    df = df.with_columns(
        [e.to_polars(consts).alias(f"flops_{k}") for k, e in profile.flops.items() if _computable(e, cols, consts)]
        + [e.to_polars(consts).alias(f"iops_{k}") for k, e in profile.iops.items() if _computable(e, cols, consts)]
        + [e.to_polars(consts).alias(f"{k}_bytes") for k, e in profile.bytes.items() if _computable(e, cols, consts)]
        + [m.expr.to_polars(consts).alias(name) for name, m in profile.metrics.items()
           if _computable(m.expr, cols, consts)]
    )
    dur = pl.col("duration_ns")
    if flop_cols:
        df = df.with_columns(pl.sum_horizontal(flop_cols).alias("flops"))
        df = df.with_columns(pl.when(dur > 0).then(pl.col("flops") / dur / 1e3).alias("tflops"))
    if "dram_bytes" in df.columns:
        df = df.with_columns(pl.when(dur > 0).then(pl.col("dram_bytes") / dur).alias("dram_gbps"))
        if flop_cols:
            df = df.with_columns(
                pl.when(pl.col("dram_bytes") > 0).then(pl.col("flops") / pl.col("dram_bytes"))
                .alias("arithmetic_intensity")
            )
    if gpu is not None:
        df = _against_peaks(df, flop_cols, gpu)
    return _verdicts(df, thresholds)


def _against_peaks(df: pl.DataFrame, flop_cols: list[str], gpu: GpuSpec) -> pl.DataFrame:
    dur = pl.col("duration_ns")
    classes = [(c, c.removeprefix("flops_")) for c in flop_cols if c.removeprefix("flops_") in gpu.tflops]
    df = df.with_columns(pl.lit(gpu.name).alias("gpu"), pl.lit(gpu.dram_gbps).alias("peak_dram_gbps"))
    if classes:
        utils = [
            pl.when(dur > 0).then(pl.col(c).fill_null(0.0) / dur / 1e3 / gpu.tflops[k]).otherwise(None).alias(f"_u_{k}")
            for c, k in classes
        ]
        df = df.with_columns(utils)
        names = [k for _, k in classes]
        util_cols = [f"_u_{k}" for k in names]
        peaks = pl.Series([gpu.tflops[k] for k in names], dtype=pl.Float64)
        idx = pl.concat_list(util_cols).list.arg_max()
        df = df.with_columns(
            (100 * pl.sum_horizontal(util_cols)).alias("pct_peak_compute"),
            pl.when(pl.max_horizontal(util_cols) > 0).then(
                idx.replace_strict(list(range(len(names))), names, default=None)
            ).alias("peak_class"),
        )
        df = df.with_columns(
            pl.col("peak_class").replace_strict(names, peaks.to_list(), default=None, return_dtype=pl.Float64)
            .alias("peak_tflops")
        ).drop(util_cols)
    if "dram_gbps" in df.columns:
        df = df.with_columns((100 * pl.col("dram_gbps") / gpu.dram_gbps).alias("pct_peak_dram"))
    if "peak_tflops" in df.columns:
        df = df.with_columns((pl.col("peak_tflops") * 1e3 / gpu.dram_gbps).alias("ridge_intensity"))
        if "arithmetic_intensity" in df.columns:
            df = df.with_columns(
                pl.min_horizontal(pl.col("peak_tflops"), pl.col("arithmetic_intensity") * gpu.dram_gbps / 1e3).alias(
                    "roofline_tflops"
                )
            )
    return df


def verdict(
    pct_compute: float | None,
    pct_dram: float | None,
    *,
    peak_class: str | None = None,
    peak_tflops: float | None = None,
    peak_dram_gbps: float | None = None,
    intensity: float | None = None,
    ridge: float | None = None,
    thresholds: Thresholds = Thresholds(),
) -> tuple[str | None, str]:
    """(verdict, reason with the numbers) from the two utilisations; see the module docstring."""
    if pct_compute is None or pct_dram is None:
        missing = "FLOP" if pct_compute is None else "DRAM"
        return None, f"no verdict: {missing} counters or peak missing"
    peak_txt = f" of {peak_tflops:g} TFLOPS {peak_class}" if peak_tflops else ""
    dram_txt = f" of {peak_dram_gbps:g} GB/s" if peak_dram_gbps else ""
    ai_txt = ""
    if intensity is not None and ridge is not None:
        side = "<" if intensity < ridge else ">="
        ai_txt = f"; intensity {intensity:.3g} FLOP/B {side} ridge {ridge:.3g}"
    numbers = f"compute {pct_compute:.1f}%{peak_txt}, DRAM {pct_dram:.1f}%{dram_txt}{ai_txt}"
    if max(pct_compute, pct_dram) < thresholds.busy_pct:
        return "latency-bound", f"both below {thresholds.busy_pct:g}% of peak: {numbers}"
    if pct_compute >= pct_dram:
        return "compute-bound", numbers
    return "memory-bound", numbers


def _verdicts(df: pl.DataFrame, thresholds: Thresholds) -> pl.DataFrame:
    fields = ["pct_peak_compute", "pct_peak_dram", "peak_class", "peak_tflops", "peak_dram_gbps",
              "arithmetic_intensity", "ridge_intensity"]
    rows = df.select([pl.col(f) if f in df.columns else pl.lit(None).alias(f) for f in fields]).iter_rows()
    pairs = [
        verdict(c, d, peak_class=k, peak_tflops=p, peak_dram_gbps=b, intensity=ai, ridge=r, thresholds=thresholds)
        for c, d, k, p, b, ai, r in rows
    ]
    return df.with_columns(
        pl.Series("verdict", [v for v, _ in pairs], dtype=pl.String),
        pl.Series("verdict_reason", [r for _, r in pairs], dtype=pl.String),
    )


def graph_verdicts(
    derived: pl.DataFrame,
    gpu: GpuSpec | None = None,
    *,
    kernels: pl.DataFrame | None = None,
    analytical: pl.DataFrame | None = None,
    thresholds: Thresholds = Thresholds(),
) -> pl.DataFrame:
    """One row per graph x config: per-iteration FLOPs / bytes / busy time, % of peak,
    verdict, the kernels' verdict mix by time, GPU idle share and, with ``analytical``
    (graph_id[, config], flops per execution), the counter / analytical FLOP ratio."""
    if derived.is_empty():
        return pl.DataFrame()
    df = derived
    if "phase" in df.columns and df["phase"].eq("timed").any():
        df = df.filter(pl.col("phase") == "timed")
    key = _present(df, GRAPH_KEY)
    if not key:
        df = df.with_columns(pl.lit(None, dtype=pl.String).alias("graph_id"))
        key = ["graph_id"]
    flop_cols = [c for c in df.columns if c.startswith("flops_")]
    iters = pl.col("iteration").n_unique() if "iteration" in df.columns else pl.lit(1)
    aggs = [
        pl.len().alias("kernels"),
        iters.clip(lower_bound=1).alias("iterations"),
        pl.col("duration_ns").sum().alias("busy_ns"),
        *[pl.col(c).sum().alias(c) for c in flop_cols],
    ]
    if flop_cols:
        aggs.append(pl.col("flops").sum().alias("flops"))
    if "dram_bytes" in df.columns:
        aggs.append(pl.col("dram_bytes").sum().alias("dram_bytes"))
    if "verdict" in df.columns:
        aggs.append(pl.struct("verdict", "duration_ns").alias("_mix"))
    g = df.group_by(key, maintain_order=True).agg(aggs)
    per_iter = [c for c in ["busy_ns", "flops", "dram_bytes", *flop_cols] if c in g.columns]
    g = g.with_columns([(pl.col(c) / pl.col("iterations")).alias(c) for c in per_iter])
    g = g.rename({"busy_ns": "duration_ns"})
    if flop_cols:
        g = g.with_columns((pl.col("flops") / pl.col("duration_ns") / 1e3).alias("tflops"))
    if "dram_bytes" in g.columns:
        g = g.with_columns((pl.col("dram_bytes") / pl.col("duration_ns")).alias("dram_gbps"))
        if flop_cols:
            g = g.with_columns(
                pl.when(pl.col("dram_bytes") > 0).then(pl.col("flops") / pl.col("dram_bytes"))
                .alias("arithmetic_intensity")
            )
    if gpu is not None:
        g = _against_peaks(g, flop_cols, gpu)
    g = _verdicts(g, thresholds)
    if "_mix" in g.columns:
        g = g.with_columns(pl.Series("kernel_verdicts", [_mix(m) for m in g["_mix"].to_list()], dtype=pl.String))
        g = g.drop("_mix")
    if kernels is not None and not kernels.is_empty():
        g = _with_idle(g, kernels, key, thresholds)
    if analytical is not None:
        g = compare_flops(g, analytical)
    return g


def _mix(items: list[dict]) -> str:
    total: dict[str, float] = {}
    for item in items:
        verdict = item["verdict"] or "no verdict"
        total[verdict] = total.get(verdict, 0.0) + (item["duration_ns"] or 0.0)
    whole = sum(total.values()) or 1.0
    return ", ".join(f"{k} {100 * v / whole:.0f}%" for k, v in sorted(total.items(), key=lambda kv: -kv[1]))


def _with_idle(g: pl.DataFrame, kernels: pl.DataFrame, key: list[str], thresholds: Thresholds) -> pl.DataFrame:
    k = kernels
    if "phase" in k.columns and k["phase"].eq("timed").any():
        k = k.filter(pl.col("phase") == "timed")
    if "iteration" not in k.columns or k["iteration"].is_null().all() or not set(key) <= set(k.columns):
        return g
    spans = (
        k.filter(pl.col("iteration").is_not_null())
        .group_by(key + ["iteration"])
        .agg((pl.col("end_ns").max() - pl.col("start_ns").min()).alias("span"),
             pl.col("duration_ns").sum().alias("busy"))
        .group_by(key)
        .agg((100 * (1 - pl.col("busy").sum() / pl.col("span").sum())).clip(lower_bound=0).alias("gpu_idle_pct"))
    )
    g = g.join(spans, on=key, how="left", nulls_equal=True)
    idle = pl.col("gpu_idle_pct")
    launch = idle >= thresholds.gpu_idle_pct
    return g.with_columns(
        pl.when(launch).then(pl.lit("latency-bound")).otherwise(pl.col("verdict")).alias("verdict"),
        pl.when(launch)
        .then(pl.format("GPU idle {}% of the iterations between kernels (launch/latency-bound); ", idle.round(1))
              + pl.col("verdict_reason"))
        .otherwise(pl.col("verdict_reason"))
        .alias("verdict_reason"),
    )


def compare_flops(graph_table: pl.DataFrame, analytical: pl.DataFrame | Mapping[str, float]) -> pl.DataFrame:
    """Add ``analytical_flops`` and ``flops_ratio`` = counter FLOPs / analytical FLOPs.

    ``analytical``: a frame with ``graph_id``, ``flops`` (and optionally ``config``), e.g.
    the summary frame, or a mapping graph_id -> FLOPs. A ratio near 1 says the counters
    see the math the graph defines; far above 1: VALU counting of inactive lanes, padding
    or redundant work; below 1: FLOP classes the profile does not count.
    """
    if isinstance(analytical, Mapping):
        analytical = pl.DataFrame({"graph_id": list(analytical), "flops": [float(v) for v in analytical.values()]})
    on = [c for c in ("graph_id", "config") if c in analytical.columns and c in graph_table.columns]
    if not on:
        raise UserError("compare_flops: analytical FLOPs need a graph_id column")
    ref = analytical.select(*on, pl.col("flops").cast(pl.Float64).alias("analytical_flops"))
    ref = ref.unique(subset=on, keep="first")
    out = graph_table.join(ref, on=on, how="left", nulls_equal=True)
    if "flops" not in out.columns:
        return out.with_columns(pl.lit(None, dtype=pl.Float64).alias("flops_ratio"))
    return out.with_columns(
        pl.when(pl.col("analytical_flops") > 0).then(pl.col("flops") / pl.col("analytical_flops")).alias("flops_ratio")
    )

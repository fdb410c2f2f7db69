"""AMD derived metrics -> the ``kernel_metrics`` "why" columns, then the vendor-neutral verdict.

The counters' arithmetic lives in profiles/gfx942.toml and gfx950.toml (``sol_*`` and ``spi_*``
metrics, each the row of rocprof-compute's System Speed-of-Light or workgroup-manager panel it
copies); this module only names them the way the NVIDIA side does, adds the launch shape from
the dispatch records, and asks ``profilers/why.py`` ``classify`` for the limiter. The mapping and
what AMD cannot tell (theoretical occupancy, warp-stall reasons) are in docs/amd-profiling.md
"Why on AMD".
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from hipdnn_trace.profilers.why import with_limiters

#: rocprof-compute workgroup-manager rows (panel 600) -> the contract's occupancy_limiter words.
SPI_LIMITERS = {
    "spi_vgprs_pct": "registers",
    "spi_sgprs_pct": "registers",
    "spi_lds_pct": "shared_memory",
    "spi_barriers_pct": "barriers",
    "spi_workgroups_pct": "blocks",
    "spi_waves_pct": "warps",
    "spi_waveslots_pct": "warps",
}
#: a resource counts as the occupancy limiter when new waves waited on it this share of CU cycles.
LIMITER_MIN_PCT = 1.0
#: the compute unit's pipes (System Speed-of-Light utilisation rows); sm_throughput_pct is the busiest.
CU_PIPES = ("sol_valu_util", "sol_mfma_util", "sol_salu_util", "sol_vmem_util", "sol_branch_util", "sol_ipc_pct")


def _col(df: pl.DataFrame, name: str) -> pl.Expr:
    return pl.col(name) if name in df.columns else pl.lit(None, dtype=pl.Float64)


def _max_of(df: pl.DataFrame, names: tuple[str, ...]) -> pl.Expr:
    present = [pl.col(n) for n in names if n in df.columns]
    return pl.max_horizontal(present) if present else pl.lit(None, dtype=pl.Float64)


def occupancy_limiter(row: Mapping[str, float | None]) -> str | None:
    """The resource(s) new wavefronts waited on most (ties comma-joined), or None below the floor."""
    best: dict[str, float] = {}
    for col, word in SPI_LIMITERS.items():
        value = row.get(col)
        if value is not None and value >= LIMITER_MIN_PCT:
            best[word] = max(best.get(word, 0.0), value)
    if not best:
        return None
    top = max(best.values())
    return ",".join(sorted(w for w, v in best.items() if round(v, 1) == round(top, 1)))


def _launch(kernels: pl.DataFrame) -> pl.DataFrame:
    """Per dispatch: workgroups and work-items per workgroup (rocprof's Grid_Size counts work-items)."""
    key = ["capture", "device", "dispatch_id"]
    if "capture" not in kernels.columns:
        kernels = kernels.with_columns(pl.lit(None, dtype=pl.String).alias("capture"))
    if kernels.is_empty() or not set(key) <= set(kernels.columns):
        return pl.DataFrame(schema={"capture": pl.String, "device": pl.Int64, "dispatch_id": pl.Int64,
                                    "grid_size": pl.Int64, "block_size": pl.Int64, "_items": pl.Int64})
    dims = [pl.col(c).fill_null(1) for c in ("grid_x", "grid_y", "grid_z")]
    block = [pl.col(c).fill_null(1) for c in ("block_x", "block_y", "block_z")]
    items, size = dims[0] * dims[1] * dims[2], block[0] * block[1] * block[2]
    return kernels.filter(pl.col("dispatch_id").is_not_null() & pl.col("grid_x").is_not_null()).select(
        *key,
        ((items + size - 1) // size).cast(pl.Int64).alias("grid_size"),
        size.cast(pl.Int64).alias("block_size"),
        items.cast(pl.Int64).alias("_items"),
    ).unique(subset=key, keep="first")


def why_columns(metrics: pl.DataFrame, kernels: pl.DataFrame, constants: Mapping[str, float]) -> pl.DataFrame:
    """``metrics`` (from counters.derive with an AMD profile) + the contract's why columns."""
    if metrics.is_empty():
        return metrics
    df = metrics
    for col, dtype in (("capture", pl.String), ("device", pl.Int64), ("dispatch_id", pl.Int64)):
        if col not in df.columns:
            df = df.with_columns(pl.lit(None, dtype=dtype).alias(col))
    df = df.join(_launch(kernels), on=["capture", "device", "dispatch_id"], how="left", nulls_equal=True)
    dram = _col(df, "sol_fabric_read_pct") + _col(df, "sol_fabric_write_pct")
    df = df.with_columns(
        _max_of(df, CU_PIPES).alias("sm_throughput_pct"),
        dram.alias("dram_throughput_pct"),
        _col(df, "sol_vl1d_pct").alias("l1_throughput_pct"),
        _col(df, "sol_lds_pct").alias("lds_throughput_pct"),
        _col(df, "sol_l2_pct").alias("l2_throughput_pct"),
        _col(df, "sol_mfma_util").alias("tensor_pipe_pct"),
        _col(df, "sol_ipc_pct").alias("issue_active_pct"),
        _col(df, "sol_wave_occupancy_pct").alias("achieved_occupancy_pct"),
        pl.lit(None, dtype=pl.Float64).alias("theoretical_occupancy_pct"),
    )
    df = df.with_columns(
        _max_of(df, ("l1_throughput_pct", "lds_throughput_pct", "l2_throughput_pct", "dram_throughput_pct"))
        .alias("memory_throughput_pct"))
    cu, slots, wave = constants.get("cu_count"), constants.get("max_waves_per_cu"), constants.get("wave_size") or 64
    waves = ((pl.col("_items") + wave - 1) // wave) / (cu * slots) if cu and slots else pl.lit(None)
    df = df.with_columns(
        waves.cast(pl.Float64).alias("waves_per_sm"),
        pl.lit(int(cu) if cu else None, dtype=pl.Int64).alias("sm_count"),
        pl.lit(None, dtype=pl.Int64).alias("registers_per_thread"),
        pl.lit(None, dtype=pl.Int64).alias("shared_memory_per_block"),
        pl.lit(None, dtype=pl.String).alias("top_stalls"),
        pl.Series("occupancy_limiter", [occupancy_limiter(r) for r in df.iter_rows(named=True)], dtype=pl.String),
    ).drop("_items")
    return _classified(df)


def _classified(df: pl.DataFrame) -> pl.DataFrame:
    """limiter, why and est_speedup_pct from the one vendor-neutral rule (profilers/why.py); the
    FLOP/DRAM verdict columns go where a limiter replaces them."""
    out = with_limiters(df)
    if out["limiter"].is_null().all():   # no why counters (an older preset): the FLOP/DRAM verdict stays
        return out
    return out.drop([c for c in ("verdict", "verdict_reason") if c in out.columns])

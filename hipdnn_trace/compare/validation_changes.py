"""Which output checks changed outcome between two runs.

A timing win means nothing if the outputs went wrong, so ``compare`` lists every
output whose check passed in A and fails in B (or fails in B and was not checked in
A), and the reverse for completeness.
"""

from __future__ import annotations

import polars as pl

COLUMNS: dict[str, pl.DataType] = {
    "graph": pl.String(),
    "graph_id": pl.String(),
    "config": pl.String(),
    "output": pl.String(),
    "against": pl.String(),
    "passed_a": pl.Boolean(),
    "passed_b": pl.Boolean(),
    "max_rel_a": pl.Float64(),
    "max_rel_b": pl.Float64(),
    "change": pl.String(),  # newly failing | newly passing
}


def _checks(validation: pl.DataFrame, pair_configs: bool) -> pl.DataFrame:
    return validation.select(
        pl.coalesce("graph_id", "graph").alias("match_id"),
        "graph",
        "graph_id",
        (pl.lit("") if pair_configs else pl.col("config").fill_null("")).alias("config_key"),
        pl.col("config"),
        pl.coalesce(pl.col("output"), pl.col("output_uid").cast(pl.String)).fill_null("").alias("output"),
        pl.col("against").fill_null(""),
        "passed",
        "max_rel",
    ).unique(subset=["match_id", "config_key", "output", "against"], keep="last", maintain_order=True)


def validation_changes(
    validation_a: pl.DataFrame, validation_b: pl.DataFrame, *, pair_configs: bool = False
) -> pl.DataFrame:
    """Outputs whose check changed outcome from A to B (newly failing first)."""
    key = ["match_id", "config_key", "output", "against"]
    a = _checks(validation_a, pair_configs)
    b = _checks(validation_b, pair_configs)
    joined = a.join(b, on=key, how="full", coalesce=True, suffix="_b", nulls_equal=True)
    failing_b = pl.col("passed_b").fill_null(True).not_()
    failing_a = pl.col("passed").fill_null(True).not_()
    out = (
        joined.with_columns(
            pl.when(failing_b & pl.col("passed").fill_null(True))
            .then(pl.lit("newly failing"))
            .when(failing_a & pl.col("passed_b").fill_null(False))
            .then(pl.lit("newly passing"))
            .otherwise(None)
            .alias("change")
        )
        .filter(pl.col("change").is_not_null())
        .select(
            pl.coalesce("graph_b", "graph").alias("graph"),
            pl.coalesce("graph_id_b", "graph_id").alias("graph_id"),
            pl.coalesce("config_b", "config").alias("config"),
            "output",
            "against",
            pl.col("passed").alias("passed_a"),
            "passed_b",
            pl.col("max_rel").alias("max_rel_a"),
            "max_rel_b",
            "change",
        )
        .sort(["change", "graph", "config", "output"])  # "newly failing" < "newly passing"
    )
    return out.cast(COLUMNS)  # type: ignore[arg-type]

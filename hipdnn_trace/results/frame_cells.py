"""A run folder's frame file read in its schema's types, every cell checked.

Type inference cannot read a run's CSV files: about one graph in 600 has a ``graph_id`` of 16 hex digits
that reads as a number (``22249969e7143242`` is ``inf``, ``0346223320663351`` loses its zero), so where
it is the only row the column came back as a float and the graph no longer matched its iterations,
its resume or its merge. So the schema's columns are read as text and cast here by the schema
(results/schemas.py): text stays text, and a cell the column's type cannot hold (``passed = maybe``,
``n = many``) is one line naming the file, the line or row and the column, never a traceback (polars
cannot cast text to a boolean) nor a silent null. Columns outside the schema (a profiler's extras)
keep polars' inference.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

from hipdnn_trace.errors import UserError
from hipdnn_trace.results.schemas import Schema

#: how a cell of each type is named in a refusal
_WANTED = {pl.Boolean(): "true or false", pl.Int64(): "an integer", pl.Float64(): "a number"}
_BOOLEANS = {"true": True, "false": False}


def read_csv(path: Path, schema: Schema) -> pl.DataFrame:
    """``path`` with the schema's columns as text (cast them with :func:`typed`), the others inferred."""
    return pl.read_csv(path, schema_overrides={name: pl.String() for name in schema}, infer_schema_length=None)


def csv_line(row: int) -> str:
    """Where row ``row`` (0-based) of a CSV file is, as an editor shows it (the header is line 1)."""
    return f"line {row + 2}"


def table_row(row: int) -> str:
    """Where row ``row`` (0-based) of a Parquet or JSON frame is."""
    return f"row {row + 1}"


def _cast(values: pl.Series, dtype: pl.DataType) -> pl.Series:
    if values.dtype == dtype:
        return values
    if dtype == pl.Boolean() and values.dtype == pl.String():   # polars has no text -> boolean cast
        return values.str.strip_chars().str.to_lowercase().replace_strict(
            _BOOLEANS, default=None, return_dtype=pl.Boolean())
    if values.dtype == pl.Null():
        return values.cast(dtype)
    try:
        return values.cast(dtype, strict=False)
    except pl.exceptions.PolarsError:   # e.g. a list or struct column where a number belongs
        return pl.Series(values.name, [None] * len(values), dtype=dtype)


def typed(path: Path, raw: pl.DataFrame, schema: Schema, where: Callable[[int], str] = csv_line) -> pl.DataFrame:
    """``raw`` with exactly the schema's columns in its types (absent ones null, in schema order, extra
    columns last); UserError naming the first cell whose value the type cannot hold."""
    columns = []
    for name, dtype in schema.items():
        if name not in raw.columns:
            columns.append(pl.Series(name, [None] * raw.height, dtype=dtype))
            continue
        cast = _cast(raw[name], dtype)
        lost = raw[name].is_not_null() & cast.is_null()
        if lost.any():
            row = int(lost.arg_max() or 0)
            raise UserError(f"{path}: {where(row)}: column {name!r} holds {raw[name][row]!r}, not "
                            f"{_WANTED.get(dtype, f'of type {dtype}')} (damaged or edited)")
        columns.append(cast.alias(name))
    extra = [raw[c] for c in raw.columns if c not in schema]
    return pl.DataFrame(columns + extra)

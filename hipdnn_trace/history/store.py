"""One connection to the results store: a DuckDB file (the embedded default) or a PostgreSQL database given
by URL (a team's). Both hold the same schema (history/schema.py) and answer the same queries; bulk rows go
in through each engine's fast path (DuckDB reads a Parquet file in place; PostgreSQL takes COPY)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from hipdnn_trace.errors import ToolMissingError, UserError
from hipdnn_trace.history.schema import SCHEMA_VERSION, pending

POSTGRES_PREFIXES = ("postgresql://", "postgres://")


def is_postgres(target: str) -> bool:
    return target.startswith(POSTGRES_PREFIXES)


class Store:
    """The store behind ``--db``: SQL with ``?`` parameters on either engine, one transaction per import."""

    def __init__(self, target: str, *, create: bool = True) -> None:
        self.target = target
        self.postgres = is_postgres(target)
        self.conn = _connect_postgres(target) if self.postgres else _connect_duckdb(target, create)
        self.version = self._migrate()

    # -- queries -----------------------------------------------------------------------------------------
    def sql(self, statement: str, params: Sequence[Any] = ()) -> list[tuple]:
        cur = self.conn.cursor()
        cur.execute(statement.replace("?", "%s") if self.postgres else statement, list(params))
        return cur.fetchall() if cur.description else []

    def frame(self, statement: str, params: Sequence[Any] = ()) -> pl.DataFrame:
        cur = self.conn.cursor()
        cur.execute(statement.replace("?", "%s") if self.postgres else statement, list(params))
        names = [d[0] for d in cur.description]
        return pl.DataFrame(cur.fetchall(), schema=names, orient="row", infer_schema_length=None)

    def insert(self, table: str, frame: pl.DataFrame) -> None:
        """Append ``frame`` (columns in the table's order) to ``table``."""
        if frame.is_empty():
            return
        if self.postgres:
            columns = ", ".join(frame.columns)
            with self.conn.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in frame.iter_rows():
                    copy.write_row(row)
            return
        fd, path = tempfile.mkstemp(suffix=".parquet", prefix="hipdnn-trace-db-")
        os.close(fd)
        try:
            frame.write_parquet(path)
            self.conn.execute(f"INSERT INTO {table} ({', '.join(frame.columns)}) SELECT * FROM read_parquet(?)",
                              [path])
        finally:
            os.unlink(path)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All or nothing: an import that fails half way leaves the store as it was."""
        if self.postgres:
            with self.conn.transaction():
                yield
            return
        self.conn.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()

    # -- schema ------------------------------------------------------------------------------------------
    def _current_version(self) -> int:
        tables = {r[0] for r in self.sql("SELECT table_name FROM information_schema.tables")}
        if "schema_version" not in tables:
            if {"runs", "results"} & tables:
                raise UserError(f"--db {self.target}: holds tables runs/results but no schema_version: not a "
                                "hipdnn-trace store")
            return 0
        rows = self.sql("SELECT max(version) FROM schema_version")
        return int(rows[0][0] or 0)

    def _migrate(self) -> int:
        current = self._current_version()
        if current > SCHEMA_VERSION:
            raise UserError(f"--db {self.target}: schema version {current} is newer than this hipdnn-trace reads "
                            f"({SCHEMA_VERSION}); upgrade hipdnn-trace")
        steps = pending(current)
        if steps:
            with self.transaction():
                for version, statements in steps:
                    for statement in statements:
                        self.sql(statement)
                    self.sql("DELETE FROM schema_version")
                    self.sql("INSERT INTO schema_version VALUES (?)", [version])
        return SCHEMA_VERSION if steps else current


def _connect_duckdb(target: str, create: bool) -> Any:
    try:
        import duckdb
    except ImportError:
        raise ToolMissingError("--db FILE needs DuckDB (pip install duckdb)") from None
    path = Path(target)
    if not create and not path.exists():
        raise UserError(f"--db {target}: no such store (make one with 'hipdnn-trace db import RUN --db {target}')")
    if path.exists() and not path.is_file():
        raise UserError(f"--db {target}: not a regular file")
    try:
        return duckdb.connect(str(path))
    except duckdb.Error as exc:
        raise UserError(f"--db {target}: not a DuckDB database ({' '.join(str(exc).split())[:160]})") from None


def _connect_postgres(url: str) -> Any:
    try:
        import psycopg
    except ImportError:
        raise ToolMissingError("--db postgresql://... needs psycopg (pip install 'psycopg[binary]')") from None
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise UserError(f"--db {_redacted(url)}: cannot connect ({' '.join(str(exc).split())[:160]})") from None


def _redacted(url: str) -> str:
    """The URL without its password (it is printed)."""
    head, sep, tail = url.partition("@")
    if not sep or ":" not in head.split("//", 1)[-1]:
        return url
    scheme, _, auth = head.partition("//")
    return f"{scheme}//{auth.split(':', 1)[0]}:***@{tail}"


def check_store(target: str) -> None:
    """Open (and for a new DuckDB file, create) the store and close it: ``run --db`` refuses a store it
    cannot use before any work."""
    Store(target).close()

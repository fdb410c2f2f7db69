"""The store's schema, versioned: each migration takes the database one version up, in order, inside the
import's transaction. The same SQL runs on DuckDB and PostgreSQL (types and statements both speak)."""

from __future__ import annotations

#: (version, statements): version N is what a database holds after applying migrations 1..N.
MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (1, (
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
        """CREATE TABLE IF NOT EXISTS runs (
            run_id TEXT PRIMARY KEY, created TIMESTAMP, status TEXT, path TEXT, tool_version TEXT,
            host TEXT, cpu TEXT, gpu TEXT, driver TEXT, sm_clock_mhz DOUBLE PRECISION,
            versions_json TEXT, imported_at TIMESTAMP)""",
        """CREATE TABLE IF NOT EXISTS results (
            run_id TEXT NOT NULL, graph TEXT NOT NULL, graph_id TEXT NOT NULL, config TEXT NOT NULL,
            backend TEXT, engine TEXT, dtype TEXT, n BIGINT, median_ms DOUBLE PRECISION,
            ci_low_ms DOUBLE PRECISION, ci_high_ms DOUBLE PRECISION, mean_ms DOUBLE PRECISION,
            std_ms DOUBLE PRECISION, status TEXT, validation TEXT, error TEXT,
            PRIMARY KEY (run_id, graph_id, config))""",
    )),
    (2, (
        # where the run's time came from (kernel, events, host): a series never mixes two sources
        "ALTER TABLE results ADD COLUMN kernel_source TEXT",
        # what the clocks did during the run (run.json clocks: the lock held, or NVML's sampling)
        "ALTER TABLE runs ADD COLUMN clocks_json TEXT",
        "CREATE INDEX IF NOT EXISTS results_series ON results (graph_id, config)",
    )),
)

SCHEMA_VERSION = MIGRATIONS[-1][0]

#: the columns of ``results`` the import writes, in order (the latest schema)
RESULT_COLUMNS = ("run_id", "graph", "graph_id", "config", "backend", "engine", "dtype", "n", "median_ms",
                  "ci_low_ms", "ci_high_ms", "mean_ms", "std_ms", "status", "validation", "error", "kernel_source")
RUN_COLUMNS = ("run_id", "created", "status", "path", "tool_version", "host", "cpu", "gpu", "driver",
               "sm_clock_mhz", "versions_json", "imported_at", "clocks_json")


def pending(current: int) -> list[tuple[int, tuple[str, ...]]]:
    """The migrations a database at ``current`` still needs, in order."""
    return [(v, sql) for v, sql in MIGRATIONS if v > current]

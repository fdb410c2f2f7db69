"""Values a run never writes in its summary, ab, oracle and validation tables, refused as compare, report, merge
and repro read them (``load_run(strict=True)``).

Each cell already has its column's type (results/frame_cells.py); these are the values the writers
(bench/ab.py and bench/paired.py, results/oracle.py, bench/records.py, validate/) can never produce: a
B/A ratio at or below 0, a NaN ratio beside a decided verdict, a verdict outside
FASTER/SLOWER/SAME/UNDECIDED or one its own interval and band do not give, a status or validation word
no run writes, a negative time, count or tolerance, a regret at or below 0 or NaN, a regret that is not
ootb_ms / tuned_ms, a flag no run writes, and a graph's A/B, oracle or validation row twice. Read as
they stood, an edited ab.csv's SLOWER turned SAME hid a regression at exit 0 and a NaN regret became the
report's geomean. Each is one line naming the file, the line (header = line 1), the graph and the column.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import polars as pl

from hipdnn_trace.bench.paired import UNDECIDED, VERDICTS, verdict as interval_verdict
from hipdnn_trace.bench.records import ERROR, FAILED, OK, UNSUPPORTED
from hipdnn_trace.errors import UserError
from hipdnn_trace.results.oracle import BOTH_WRONG, FASTER_BUT_WRONG, NOT_COMPARED, OOTB_WRONG, TUNED_WRONG

ORACLE_FLAGS = ("", FASTER_BUT_WRONG, TUNED_WRONG, OOTB_WRONG, BOTH_WRONG, NOT_COMPARED)
#: a regret further than this from ootb_ms / tuned_ms was not computed from them (CSV keeps 17 digits)
_REGRET_RTOL = 1e-9

#: (column, rule as an expression true on the rows that break it, what a run writes there) per table
_Rules = list[tuple[str, pl.Expr, str]]


def _finite(column: str) -> pl.Expr:
    return pl.col(column).is_not_null() & pl.col(column).is_finite()


def _ab_rules() -> _Rules:
    nan_ratio = pl.col("ratio").is_nan()
    return [
        ("verdict", ~pl.col("verdict").is_in(VERDICTS) | pl.col("verdict").is_null(), "one of " + ", ".join(VERDICTS)),
        ("ratio", pl.col("ratio").is_null() | (nan_ratio & (pl.col("verdict") != UNDECIDED))
         | (~nan_ratio & ~(_finite("ratio") & (pl.col("ratio") > 0))),
         "a finite B/A ratio above 0 (NaN only beside UNDECIDED: no round measured)"),
        ("ci_low", pl.col("ci_low").is_null() | (pl.col("ci_low") < 0), "at least 0 (NaN: no interval)"),
        ("ci_high", pl.col("ci_high").is_null() | (pl.col("ci_high") <= 0) | (pl.col("ci_high") < pl.col("ci_low")),
         "above 0 and ci_low (NaN: no interval)"),
        ("confidence", ~(_finite("confidence") & (pl.col("confidence") > 0) & (pl.col("confidence") < 1)),
         "a level between 0 and 1"),
        ("band", ~(_finite("band") & (pl.col("band") >= 0)), "a finite band of at least 0"),
        *((c, pl.col(c).is_null() | (pl.col(c) < 0), "a count of at least 0")
          for c in ("rounds", "blocks", "block_iters", "recreated")),
    ]


def _oracle_rules() -> _Rules:
    rules = [(c, ~(pl.col(c).is_null() | (_finite(c) & (pl.col(c) >= 0))), "empty or a finite time of at least 0")
             for c in ("ootb_ms", "tuned_ms")]
    return [*rules,
            ("regret", ~(pl.col("regret").is_null() | (_finite("regret") & (pl.col("regret") > 0))),
             "empty or a finite ratio above 0 (ootb_ms / tuned_ms)"),
            ("regret", ((pl.col("regret") - pl.col("ootb_ms") / pl.col("tuned_ms")).abs()
                        > _REGRET_RTOL * pl.col("regret").abs()).fill_null(False), "ootb_ms / tuned_ms"),
            ("flag", ~(pl.col("flag").is_null() | pl.col("flag").is_in(ORACLE_FLAGS)),
             "empty or one of " + ", ".join(f for f in ORACLE_FLAGS if f))]


def _validation_rules() -> _Rules:
    counts = [(c, pl.col(c) < 0, "at least 0") for c in ("mismatches", "nonfinite", "total", "max_abs", "max_rel")]
    tolerances = [(c, ~(pl.col(c).is_null() | (_finite(c) & (pl.col(c) >= 0))), "empty or a finite tolerance of at "
                   "least 0") for c in ("rtol", "atol")]
    return [*counts, *tolerances, ("mismatches", pl.col("mismatches") > pl.col("total"), "at most total"),
            ("passed", pl.col("passed").is_null(), "true or false")]


STATUSES = (OK, FAILED, UNSUPPORTED, ERROR)
#: summary columns no run writes below 0 (NaN is left to results/summary_checks.py: median_ci_* are NaN at n = 0)
NON_NEGATIVE = ("n", "n_throttled", "mean", "std", "min", "p5", "p25", "median", "p75", "p95", "p99", "max", "iqr",
                "cv", "median_ci_low", "median_ci_high", "host_median", "span_ms", "latency_ms", "first_call_ms",
                "init_ms", "e2e_ms", "flops", "bytes", "tflops", "gbps", "sol_ms", "sol_share")
VALIDATIONS = ("passed", "failed", "skipped")


def _summary_rules() -> _Rules:
    """The words compare and report sort and count rows by (its statistics: results/summary_checks.py)."""
    return [("status", ~pl.col("status").is_in(STATUSES) | pl.col("status").is_null(), "one of " + ", ".join(STATUSES)),
            ("validation", ~(pl.col("validation").is_null() | pl.col("validation").is_in(VALIDATIONS)),
             "empty or one of " + ", ".join(VALIDATIONS)),
            *((c, pl.col(c) < 0, "at least 0: times, counts and rates are never negative") for c in NON_NEGATIVE)]


#: table -> (its rules, the columns that name one of its rows once; summary's: results/summary_checks.py)
RULES: dict[str, tuple[Callable[[], _Rules], tuple[str, ...]]] = {
    "summary": (_summary_rules, ()),
    "ab": (_ab_rules, ("source", "graph_id", "config", "config_b")),
    "oracle": (_oracle_rules, ("source", "graph_id", "config", "tuned_config")),
    "validation": (_validation_rules, ("source", "graph_id", "config", "output_uid", "against")),
}


def _show(value: object) -> str:
    return repr(value) if not isinstance(value, float) or math.isfinite(value) else str(value)


def check(name: str, path: Path, df: pl.DataFrame) -> None:
    """Refuse the first row of table ``name`` holding a value its writer never writes, or a row twice."""
    if name not in RULES or not df.height:
        return
    rules, key = RULES[name]
    indexed = df.with_row_index("_row")
    for column, broken, wanted in rules():
        bad = indexed.filter(broken.fill_null(False)).head(1)
        if bad.height:
            row = bad.row(0, named=True)
            raise UserError(f"{path}: line {row['_row'] + 2} (graph {row.get('graph')!r}): column {column!r} is "
                            f"{_show(row[column])}, not {wanted} (damaged or edited)")
    if name == "ab":
        _interval_verdicts(path, df)
    if key:
        _check_once(path, indexed, key)


def _check_once(path: Path, indexed: pl.DataFrame, key: tuple[str, ...]) -> None:
    joined = pl.concat_str([pl.col(c).cast(pl.Utf8).fill_null("\x01") for c in key], separator="\x00")
    twice = indexed.with_columns(joined.alias("_key")).filter(pl.col("_key").is_duplicated())
    if twice.height:
        first = twice.row(0, named=True)
        again = twice.filter(pl.col("_key") == first["_key"]).row(1, named=True)
        what = f", output {first['output']!r} against {first.get('against')!r}" if "output" in first else ""
        raise UserError(f"{path}: graph {first.get('graph')!r} on config {first.get('config')!r}{what} is recorded "
                        f"twice (lines {first['_row'] + 2} and {again['_row'] + 2}); a run writes it once (damaged or "
                        "edited)")


def _interval_verdicts(path: Path, df: pl.DataFrame) -> None:
    """A decided verdict is the one its interval and band give (bench/paired.py ``verdict``)."""
    for i, row in enumerate(df.iter_rows(named=True)):
        said = row["verdict"]
        if said == UNDECIDED or None in (row["ci_low"], row["ci_high"], row["band"]):
            continue
        given = interval_verdict(row["ci_low"], row["ci_high"], row["band"])
        if given != said:
            raise UserError(f"{path}: line {i + 2} (graph {row['graph']!r}): column 'verdict' is {said!r}, but "
                            f"its interval [{row['ci_low']:g}, {row['ci_high']:g}] and band {row['band']:g} give "
                            f"{given} (damaged or edited)")

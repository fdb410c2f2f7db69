"""Compare against ROCm dnn-benchmarking result files (schema version 2), on either side.

Those files hold per-row statistics (n, median, quartiles), not samples, so the bootstrap and
Mann-Whitney path cannot run. Instead, each side's median gets the notch interval of McGill,
Tukey and Larsen (1978): ``median +- 1.57 IQR / sqrt(n)``, roughly a 95% interval; the ratio's
interval combines both sides on the log scale, Bonferroni-widened over the compared rows (there is
no p-value for Holm). The verdict rule is the usual one without the p gate: SLOWER when the whole
interval lies above ``1 + t``, FASTER below ``1 / (1 + t)``, SAME inside the band, INCONCLUSIVE
otherwise or with fewer than 5 samples a side. Our side's statistics come from its timed samples
with dnn-benchmarking's definitions (upper median, numpy percentiles). Rows pair by graph name when
each side has one row for it, else by graph name and config/engine name.

Both schema-v2 layouts are read: the older one (``provider``, the plan's ``kernel``/``timing`` at the
row's top level) and the newest (ROCm/dnn-benchmarking @ 03382e30 ``reporting/suite_results.py``:
``runtime``, the plan in ``ootb``, ``timing.samples``). A malformed field is one error naming the file
and the field's path.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import polars as pl

from hipdnn_trace import read_gate
from hipdnn_trace.compare.result import RATIO_DEFINITION, TABLE_SCHEMA, UNMATCHED_SCHEMA, Z95, Comparison
from hipdnn_trace.compare.verdict import MIN_SAMPLES
from hipdnn_trace.errors import UserError
from hipdnn_trace.results.dnnbench import SCHEMA_VERSION, kernel_stats

NOTCH = 1.57          # half-width of the median's ~95% interval, in IQR / sqrt(n)


def is_dnnbench(source: Any) -> bool:
    if not isinstance(source, (str, Path)) or not str(source).endswith(".json") or not Path(source).is_file():
        return False
    raw = read_gate.read_bytes(source, read_gate.DNB_RESULTS)   # a FIFO or an oversized file: refused by name
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):   # not JSON: not such a file (the run loader says what it is)
        return False
    if not (isinstance(data, dict) and "graphs" in data and "tool" in data):
        return False
    version = data.get("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):   # a DNB file, of a layout we do not read
        raise UserError(f"{source}: dnn-benchmarking results of schema version {version!r:.40}; "
                        f"this tool reads schema version {SCHEMA_VERSION}")
    return True


STATS_SCHEMA = {"graph": pl.String, "config": pl.String, "status": pl.String, "n": pl.Int64,
                "median": pl.Float64, "p25": pl.Float64, "p75": pl.Float64}


def _field(path: Path, where: str, value: Any, kinds: tuple[type, ...], what: str) -> Any:
    """``value`` when it is one of ``kinds`` or null, else one line naming the file and the field."""
    if value is None or (isinstance(value, kinds) and not isinstance(value, bool)):
        return value
    raise UserError(f"{path}: {where}: expected {what}, got {value!r}")


#: above these a sample count or a time is not a measurement (n must also fit the Int64 column)
MAX_SAMPLES = 2**63 - 1
MAX_MS = 1e12   # about 32 years


def _count(path: Path, where: str, value: Any) -> int | None:
    """A sample count: an integer 0..MAX_SAMPLES or null (10**30 overflowed polars' Int64 with a traceback)."""
    value = _field(path, where, value, (int,), "an integer")
    if value is not None and not 0 <= value <= MAX_SAMPLES:
        raise UserError(f"{path}: {where}: expected a sample count 0..{MAX_SAMPLES}, got {value!r}")
    return value


def _ms(path: Path, where: str, value: Any) -> float | None:
    """A time in ms: a finite number 0..MAX_MS or null, so a garbage value is not compared as a timing."""
    value = _field(path, where, value, (int, float), "a number")
    if value is not None and not (math.isfinite(value) and 0 <= value <= MAX_MS):
        raise UserError(f"{path}: {where}: expected a time in ms 0..{MAX_MS:g}, got {value!r}")
    return value


def _plan(path: Path, where: str, row: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(where the plan sits, its kernel stats, its timing) in either layout: the newest
    (dnn-benchmarking @ 03382e30) keeps the plan in ``ootb`` (null unless the row ran), the older
    one at the row's top level."""
    plan, where = (row.get("ootb"), f"{where}.ootb") if "ootb" in row else (row, where)
    plan = _field(path, where, plan, (dict,), "an object") or {}
    kernel = _field(path, f"{where}.kernel", plan.get("kernel"), (dict,), "an object") or {}
    timing = _field(path, f"{where}.timing", plan.get("timing"), (dict,), "an object") or {}
    return where, kernel, timing


def _stats_row(path: Path, where: str, name: Any, row: dict[str, Any]) -> dict[str, Any]:
    at, kernel, timing = _plan(path, where, row)
    number = lambda key: _ms(path, f"{at}.kernel.{key}", kernel.get(key))
    n = kernel.get("n", timing.get("samples"))   # the newest layout also counts them in timing.samples
    engine = _field(path, f"{where}.engine", row.get("engine"), (dict,), "an object") or {}
    return {"graph": name,
            "config": _field(path, f"{where}.engine.name", engine.get("name"), (str,), "a string")
            or _field(path, f"{where}.runtime", row.get("runtime"), (str,), "a string")
            or _field(path, f"{where}.provider", row.get("provider"), (str,), "a string"),
            "status": _field(path, f"{where}.verdict", row.get("verdict"), (str,), "a string"),
            "n": _count(path, f"{at}.kernel.n", n),
            "median": number("median_ms"), "p25": number("p25_ms"), "p75": number("p75_ms")}


def _engine_rows(path: Path, data: dict[str, Any]) -> list[dict[str, Any]]:
    graphs = _field(path, "graphs", data.get("graphs"), (list,), "a list")
    rows = []
    for i, graph in enumerate(graphs or []):
        graph = _field(path, f"graphs[{i}]", graph, (dict,), "an object") or {}
        name = _field(path, f"graphs[{i}].graph_name", graph.get("graph_name"), (str,), "a string")
        results = _field(path, f"graphs[{i}].results", graph.get("results"), (list,), "a list")
        for j, row in enumerate(results or []):
            where = f"graphs[{i}].results[{j}]"
            row = _field(path, where, row, (dict,), "an object") or {}
            if row.get("role", "engine") == "engine":   # reference rows are not pass/fail combinations
                rows.append(_stats_row(path, where, name, row) | {"where": where})
    _refuse_repeats(path, rows)
    return [{k: v for k, v in r.items() if k != "where"} for r in rows]


def _refuse_repeats(path: Path, rows: list[dict[str, Any]]) -> None:
    """One graph on one engine is one result: a second is a damaged or concatenated file, and pairing
    either copy with run A's row would be a guess."""
    seen: dict[tuple[Any, Any], str] = {}
    for r in rows:
        key = (r["graph"], r["config"])
        if key in seen:
            raise UserError(f"{path}: {r['where']}: graph {key[0]!r} on engine {key[1]!r} is already at "
                            f"{seen[key]}; a results file holds each graph and engine once")
        seen[key] = r["where"]


def dnnbench_label(path: Path) -> str:
    """A file's name in tables: the run id of the run directory it was written into (ours), else
    the file's stem (what its owner named it)."""
    run_json = Path(path).with_name("run.json")
    try:
        run_id = read_gate.read_json(run_json, read_gate.RUN_JSON).get("run_id")
    except (read_gate.ReadRefused, AttributeError):
        run_id = None
    return str(run_id) if run_id else Path(path).stem


def dnnbench_rows(path: Path) -> tuple[str, pl.DataFrame]:
    """(label, one row per engine row: graph, config, status, n, median, p25, p75), from either the
    older or the newest schema-v2 layout."""
    data = read_gate.read_json(path, read_gate.DNB_RESULTS)
    return dnnbench_label(Path(path)), pl.DataFrame(_engine_rows(Path(path), data), schema=STATS_SCHEMA)


def run_rows(run: Any) -> pl.DataFrame:
    """The same statistics from one of our runs' timed samples (dnn-benchmarking's definitions)."""
    timed = run.iterations.filter((pl.col("phase") == "timed") & pl.col("kernel_ms").is_not_null())
    status = {(r["graph"], r["config"]): r["status"] for r in run.summary.iter_rows(named=True)}
    rows = []
    for (graph, config), group in timed.group_by(["graph", "config"], maintain_order=True):
        st = kernel_stats(group["kernel_ms"].to_list())   # the writer's own definitions
        rows.append({"graph": graph, "config": config, "status": status.get((graph, config)), "n": st["n"],
                     "median": st["median_ms"], "p25": st["p25_ms"], "p75": st["p75_ms"]})
    return pl.DataFrame(rows, schema=STATS_SCHEMA)


def _pairs(a: pl.DataFrame, b: pl.DataFrame) -> tuple[list[tuple[dict, dict]], list[dict], list[dict]]:
    pairs, used_b = [], set()
    by_graph_b: dict[str, list[int]] = {}
    rows_b = b.to_dicts()
    for i, r in enumerate(rows_b):
        by_graph_b.setdefault(r["graph"], []).append(i)
    rows_a = a.to_dicts()
    count_a: dict[str, int] = {}
    for r in rows_a:
        count_a[r["graph"]] = count_a.get(r["graph"], 0) + 1
    only_a = []
    for r in rows_a:
        candidates = [i for i in by_graph_b.get(r["graph"], []) if i not in used_b]
        if count_a[r["graph"]] > 1 or len(by_graph_b.get(r["graph"], [])) > 1:
            candidates = [i for i in candidates if rows_b[i]["config"] == r["config"]]
        if candidates:
            used_b.add(candidates[0])
            pairs.append((r, rows_b[candidates[0]]))
        else:
            only_a.append(r)
    only_b = [r for i, r in enumerate(rows_b) if i not in used_b]
    return pairs, only_a, only_b


def _log_se(row: dict) -> float | None:
    n, med, p25, p75 = row["n"], row["median"], row["p25"], row["p75"]
    if not n or not med or med <= 0 or p25 is None or p75 is None:
        return None

    return NOTCH * (p75 - p25) / math.sqrt(n) / Z95 / med



def compare_stats(rows_a: pl.DataFrame, rows_b: pl.DataFrame, label_a: str, label_b: str, *,
                  threshold: float, alpha: float, min_coverage: float) -> Any:
    """A Comparison whose intervals come from the rows' quartiles (see the module docstring)."""
    from hipdnn_trace.compare.verdict import FASTER, INCONCLUSIVE, SAME, SLOWER

    pairs, only_a, only_b = _pairs(rows_a, rows_b)
    z = NormalDist().inv_cdf(1 - alpha / (2 * max(1, len(pairs))))   # Bonferroni over the compared rows
    table, logs, ses = [], [], []
    for a, b in pairs:
        row = {k: None for k in TABLE_SCHEMA}
        row.update(graph=a["graph"],
                   config=a["config"] if a["config"] == b["config"] else f"{a['config']} / {b['config']}",
                   config_a=a["config"], config_b=b["config"], status_a=a["status"], status_b=b["status"],
                   n_a=a["n"], n_b=b["n"], median_a=a["median"], median_b=b["median"])
        sa, sb = _log_se(a), _log_se(b)
        if a["median"] and b["median"] and sa is not None and sb is not None:
            log_ratio = math.log(b["median"] / a["median"])
            se = math.hypot(sa, sb)
            low, high = math.exp(log_ratio - z * se), math.exp(log_ratio + z * se)
            row.update(ratio=math.exp(log_ratio), ci_low=low, ci_high=high)
            if min(a["n"], b["n"]) < MIN_SAMPLES:
                row.update(verdict=INCONCLUSIVE, note=f"fewer than {MIN_SAMPLES} samples")
            elif low > 1 + threshold:
                row["verdict"] = SLOWER
            elif high < 1 / (1 + threshold):
                row["verdict"] = FASTER
            elif 1 / (1 + threshold) <= low and high <= 1 + threshold:
                row["verdict"] = SAME
            else:
                row["verdict"] = INCONCLUSIVE
            logs.append(log_ratio)
            ses.append(se)
        else:
            row.update(verdict=INCONCLUSIVE, note="no timing statistics on a side")
        table.append(row)
    geomean, geo_ci = float("nan"), (float("nan"), float("nan"))
    if logs:
        mean = float(np.mean(logs))
        half = NormalDist().inv_cdf(0.975) * math.sqrt(sum(s * s for s in ses)) / len(logs)
        geomean, geo_ci = math.exp(mean), (math.exp(mean - half), math.exp(mean + half))
    unmatched = pl.DataFrame(
        [{"only_in": side, "graph": r["graph"], "graph_id": None, "config": r["config"], "engine": None,
          "status": r["status"], "n": r["n"]} for side, rows in (("A", only_a), ("B", only_b)) for r in rows],
        schema=UNMATCHED_SCHEMA)
    return Comparison(
        table=pl.DataFrame({k: [r[k] for r in table] for k in TABLE_SCHEMA}, schema=TABLE_SCHEMA),
        geomean=geomean, geomean_ci=geo_ci,
        validation_changes=pl.DataFrame(schema={"change": pl.String, "graph": pl.String, "config": pl.String,
                                                "output": pl.String, "against": pl.String,
                                                "max_rel_a": pl.Float64, "max_rel_b": pl.Float64}),
        unmatched=unmatched, label_a=label_a, label_b=label_b,
        settings={"min_coverage": min_coverage, "by": "graph", "threshold": threshold, "alpha": alpha,
                  "seed": None, "n_boot": None, "min_samples": MIN_SAMPLES,
                  "test": "none (statistics only: a dnn-benchmarking file has no samples)", "ratio": RATIO_DEFINITION,
                  "ci": f"median notch intervals (1.57 IQR/sqrt(n)) combined on the log scale, Bonferroni over "
                        f"{len(pairs)} rows", "drift": 0.0, "drift_source": "given (not estimated: statistics only)",
                  "relative_to": None},
        notes=["statistics-only comparison: one side is a dnn-benchmarking result file (quartiles, no samples); "
               "intervals from the medians' notches, no p-values"],
    )


def load_side(source: Any) -> tuple[str, pl.DataFrame]:
    """A dnn-benchmarking file or one of our runs, as (label, statistics rows)."""
    if is_dnnbench(source):
        return dnnbench_rows(Path(source))
    from hipdnn_trace.compare.loading import load_input, run_label

    run = load_input(source)
    if not run.iterations.height:
        raise UserError(f"{source}: no timed samples to compare")
    return run_label(run), run_rows(run)

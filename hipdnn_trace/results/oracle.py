"""``run --oracle``'s frame: per graph the out-of-the-box plan against its tuned twin.

``regret`` = ootb median / tuned median: how much faster the backend could have run the graph had
it been tuned (ROCm dnn-benchmarking's ``oracle_speedup``, ``src/dnn_benchmarking/reporting/
suite_results.py`` @ 03382e30). As upstream, a ratio needs two valid operands: it is null when either
plan did not run or failed validation, and the ``flag`` says why. What upstream does not check, the
tuned plan's correctness against the float64 reference, is checked here: a tuned plan that fails
while the ootb plan passes is flagged ``faster-but-wrong`` (``tuned-wrong`` when it is not even
faster). The suite's figure is the geometric mean of the regrets that exist, leaving out graphs
where nothing could be tuned (``tuning_available`` false), as upstream keeps "no-search" rows out of
its averages.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from hipdnn_trace.bench.records import GraphRun
from hipdnn_trace.results.run_record import Oracle, RunRecord

FASTER_BUT_WRONG, TUNED_WRONG, OOTB_WRONG, BOTH_WRONG, NOT_COMPARED = (
    "faster-but-wrong", "tuned-wrong", "ootb-wrong", "both-wrong", "not-compared")


def pairs_of(meta: RunRecord | Mapping[str, Any]) -> list[tuple[str, str]]:
    """(ootb config, tuned config) pairs of a run's record or run.json (none: not an --oracle run)."""
    if isinstance(meta, RunRecord):
        return meta.oracle.pair_names() if meta.oracle is not None else []
    block = meta.get("oracle")
    return Oracle.from_json(block).pair_names() if isinstance(block, Mapping) else []


def _tuning(info: Mapping[str, Any]) -> tuple[str, bool | None]:
    """(what tuning did, whether there was anything to tune) from the tuned session's info."""
    tried = info.get("autotune")
    if isinstance(tried, list):   # the autotune path (bench/engines.py) records each candidate
        built = sum(1 for t in tried if t.get("median_ms") is not None)
        return f"autotune: {built} of {len(tried)} candidate plan(s) built and timed", built > 1
    tuned = info.get("tuning")
    if isinstance(tuned, dict):   # a backend that tunes itself says what it switched on
        return str(tuned.get("detail") or ""), tuned.get("available")
    return "", None


def _flag(ootb: Mapping[str, Any], tuned: Mapping[str, Any]) -> str:
    wrong_ootb, wrong_tuned = ootb.get("validation") == "failed", tuned.get("validation") == "failed"
    if wrong_ootb and wrong_tuned:
        return BOTH_WRONG
    if wrong_tuned:
        faster = (tuned.get("median") or math.inf) < (ootb.get("median") or 0.0)
        return FASTER_BUT_WRONG if faster else TUNED_WRONG
    if wrong_ootb:
        return OOTB_WRONG
    if not (ootb.get("median") and tuned.get("median")):
        return NOT_COMPARED   # one of them did not run (error, unsupported)
    return ""


def oracle_rows(run_id: str, g: GraphRun, summary: Sequence[Mapping[str, Any]],
                pairs: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """One row per (ootb, tuned) pair of this graph, from its summary rows and sessions."""
    by_config = {str(r.get("config")): r for r in summary if r.get("config")}
    infos = {c.config.name: c.info for c in g.configs}
    rows = []
    for ootb_name, tuned_name in pairs:
        ootb, tuned = by_config.get(ootb_name), by_config.get(tuned_name)
        if ootb is None or tuned is None:
            continue
        flag = _flag(ootb, tuned)
        detail, available = _tuning(infos.get(tuned_name, {}))
        rows.append({"run_id": run_id, "graph": ootb.get("graph"), "graph_id": ootb.get("graph_id"),
                     "config": ootb_name, "source": ootb.get("source"), "backend": ootb.get("backend"),
                     "ootb_engine": ootb.get("engine"), "tuned_config": tuned_name,
                     "tuned_engine": tuned.get("engine"), "tuning": detail, "tuning_available": available,
                     "ootb_ms": ootb.get("median"), "tuned_ms": tuned.get("median"),
                     "regret": None if flag else ootb["median"] / tuned["median"],
                     "ootb_validation": ootb.get("validation"), "tuned_validation": tuned.get("validation"),
                     "flag": flag})
    return rows


def geomean_regret(frame: pl.DataFrame) -> tuple[float | None, int]:
    """(geometric mean of the suite's regrets, how many graphs it is over); None when none."""
    if not frame.height:
        return None, 0
    usable = frame.filter(pl.col("regret").is_not_null() & (pl.col("regret") > 0)
                          & (pl.col("tuning_available").fill_null(True)))
    values = usable.get_column("regret").to_list()
    if not values:
        return None, 0
    return math.exp(sum(math.log(v) for v in values) / len(values)), len(values)


def summary_lines(frame: pl.DataFrame) -> list[str]:
    """The console's last lines of an --oracle run: the geomean, the worst graph, the flags."""
    if not frame.height:
        return ["oracle: no graph ran on both its out-of-the-box and its tuned plan"]
    mean, n = geomean_regret(frame)
    head = (f"oracle: geomean regret {mean:.3f}x over {n} graph(s) (ootb median / tuned median; "
            "> 1: the tuned plan is faster)" if mean is not None
            else "oracle: no graph has a regret (no pair ran and validated on both plans)")
    lines = [head]
    ranked = frame.filter(pl.col("regret").is_not_null()).sort("regret", descending=True)
    if ranked.height:
        top = ranked.row(0, named=True)
        lines.append(f"oracle: largest regret {top['regret']:.3f}x on {top['graph']} "
                     f"({top['ootb_engine'] or 'default'} {top['ootb_ms']:.4g} ms -> "
                     f"{top['tuned_engine'] or 'tuned'} {top['tuned_ms']:.4g} ms)")
    for flag in (FASTER_BUT_WRONG, TUNED_WRONG, BOTH_WRONG, OOTB_WRONG, NOT_COMPARED):
        names = frame.filter(pl.col("flag") == flag).get_column("graph").to_list()
        if names:
            shown = ", ".join(str(n) for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            lines.append(f"oracle: {len(names)} graph(s) {flag}: {shown}")
    return lines

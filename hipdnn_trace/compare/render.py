"""A comparison as a console table, CSV or JSON (the three ``compare`` outputs)."""

from __future__ import annotations

import json
import math
from typing import Any

import polars as pl

from hipdnn_trace.compare.comparison import Comparison, fmt_change
from hipdnn_trace.compare.result import RATIO_LABEL, RATIO_NAME, SEVERITY, display_order  # noqa: F401 - re-exported
from hipdnn_trace.compare.verdict import FASTER, SLOWER
from hipdnn_trace.console import escape


def fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.3f}"


def fmt_ci(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "-"
    return f"[{low:.3f}, {high:.3f}]"


def fmt_p(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return "<1e-4" if value < 1e-4 else f"{value:.2g}"


def row_warnings(row: dict[str, Any]) -> str:
    """Each side's row warnings (dnn-benchmarking's words), e.g. ``A: noisy: IQR 6.2% of median``."""
    return "; ".join(f"{side}: {row[key]}" for side, key in (("A", "warnings_a"), ("B", "warnings_b"))
                     if row.get(key))


def _aligned(header: list[str], rows: list[list[str]]) -> list[str]:
    rows = [[escape(c) for c in r] for r in rows]   # names are data: escaped before the widths are measured
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
    return [line(header), line(["-" * w for w in widths])] + [line(r) for r in rows]


def _row_name(row: dict[str, Any]) -> str:
    engines = {row.get("engine_a"), row.get("engine_b")} - {None, ""}
    suffix = f" [{'/'.join(sorted(engines))}]" if engines else ""
    return f"{row['graph']} ({row['config']}){suffix}"


def console(comparison: Comparison, top: int = 5) -> str:
    """The human-readable comparison: verdict table, totals, highlights, warnings."""
    c = comparison
    s = c.settings
    method = (f"alpha {s['alpha']}, Holm over {int(c.table['p_holm'].is_not_null().sum())} rows, "
              f"drift {s['drift']:.1%} {'estimated' if s['drift_source'].startswith('estimated') else 'given'}"
              + (f", relative to the suite's centre {s['relative_to']:.3f})" if s.get("relative_to") else ")")
              if not str(s.get("test", "")).startswith("none") else f"alpha {s['alpha']}, {s['ci']})")
    out = [
        f"A = {c.label_a}   B = {c.label_b}   (by {s['by']}, threshold {s['threshold']:.0%}, " + method,
        "",
    ]
    unit = "cycles" if s.get("metric") == "cycles" else "ms"
    header = ["graph", "config", "engine", "n_a", "n_b", f"median A {unit}", f"median B {unit}",
              RATIO_LABEL, "95% CI", "p(Holm)", "verdict"]
    rows = []
    for r in c.table.iter_rows(named=True):   # already in display order (compare/result.py)
        engine = r["engine_a"] if r["engine_a"] == r["engine_b"] else f"{r['engine_a']}->{r['engine_b']}"
        rows.append([
            r["graph"] or "", r["config"] or "", engine or "", str(r["n_a"]), str(r["n_b"]),
            fmt_ms(r["median_a"]), fmt_ms(r["median_b"]), fmt_ratio(r["ratio"]),
            fmt_ci(r["ci_low"], r["ci_high"]), fmt_p(r["p_holm"]),
            r["verdict"] + "".join(f"  ({t})" for t in (r["note"], row_warnings(r)) if t),
        ])
    out += _aligned(header, rows) if rows else ["(no graph appears in both runs)"]
    counts = c.counts
    out += ["", "verdicts: " + ", ".join(f"{n} {v}" for v, n in counts.items())]
    lo, hi = c.geomean_ci
    matched, total = c.coverage
    if not c.overall_claim:
        out.append(f"no overall claim: only {matched} of {total} graph rows are in both runs (below "
                   f"--min-coverage {c.settings.get('min_coverage', 0):.0%}); the per-row verdicts above stand")
    elif not math.isnan(c.geomean):
        out.append(
            f"geomean {RATIO_NAME} over {matched} of {total} graph rows: {c.geomean:.3f} [{lo:.3f}, {hi:.3f}]  "
            f"({fmt_change(c.geomean)} overall)"
        )
    for verdict, title in ((SLOWER, "top regressions"), (FASTER, "top improvements")):
        best = c.top(verdict, top)
        if best.height:
            out.append(f"{title} ({RATIO_NAME}):")
            out += [
                f"  {_row_name(r)}: {fmt_ratio(r['ratio'])} {fmt_ci(r['ci_low'], r['ci_high'])}"
                f"  {fmt_change(r['ratio'])}"
                for r in best.iter_rows(named=True)
            ]
    if c.validation_changes.height:
        out.append("validation changes:")
        out += [
            f"  {r['change']}: {r['graph']} ({r['config']}) output {r['output']} vs {r['against']}"
            f"  max_rel {fmt_ms(r['max_rel_a'])} -> {fmt_ms(r['max_rel_b'])}"
            for r in c.validation_changes.iter_rows(named=True)
        ]
    for side in ("A", "B"):
        only = c.unmatched.filter(pl.col("only_in") == side)
        if only.height:
            names = ", ".join(f"{r['graph']} ({r['config']})" for r in only.head(10).iter_rows(named=True))
            more = f" and {only.height - 10} more" if only.height > 10 else ""
            out.append(f"only in {side} ({only.height}): {names}{more}")
    out += [f"note: {n}" for n in c.notes]
    return "\n".join(out) + "\n"


def to_csv(comparison: Comparison) -> str:
    """The table in the console's order (regressions first), every column."""
    return comparison.table.write_csv()


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def to_dict(comparison: Comparison) -> dict[str, Any]:
    c = comparison
    records = lambda df: [{k: _clean(v) for k, v in r.items()} for r in df.iter_rows(named=True)]
    return {
        "a": c.label_a,
        "b": c.label_b,
        "settings": c.settings,
        "counts": c.counts,
        "coverage": {"matched": c.coverage[0], "total": c.coverage[1], "overall_claim": c.overall_claim},
        "geomean": _clean(c.geomean),
        "geomean_ci": [_clean(v) for v in c.geomean_ci],
        "exit_code": c.exit_code,
        "rows": records(c.table),
        "validation_changes": records(c.validation_changes),
        "unmatched": records(c.unmatched),
        "method_differences": c.method_differences,
        "notes": c.notes,
    }


def to_json(comparison: Comparison) -> str:
    return json.dumps(to_dict(comparison), indent=2) + "\n"


__all__ = ["console", "to_csv", "to_json", "to_dict", "display_order"]

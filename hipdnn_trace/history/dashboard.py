"""``history --html PAGE``: one self-contained page (no script, no network at view time): the regression and
improvement table first (what a team reads in the morning), then one trend per series with its runs'
confidence intervals as a band and its steps marked, each run linked to its folder's report."""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import polars as pl

from hipdnn_trace.atomic import write_text_atomic
from hipdnn_trace.history.series import SERIES_KEY, Change

WIDTH, HEIGHT, PAD = 560, 120, 28
STYLE = """body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}th{background:#f3f3f3}.reg{color:#b00020}
.imp{color:#00701a}.series{display:inline-block;margin:6px;vertical-align:top}svg{background:#fafafa}
h3{font-size:13px;margin:2px 0}"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _link(path: str) -> str:
    """The run's report if it has one, else its folder (relative links break when the page moves)."""
    folder = Path(path)
    report = folder / "report.html"
    return (report if report.exists() else folder).as_uri() if folder.is_absolute() else _e(path)


def _table(changes: Sequence[Change]) -> str:
    if not changes:
        return "<p id='no-changes'>No step change in any series.</p>"
    head = ("<tr><th>kind</th><th>graph</th><th>config</th><th>GPU</th><th>first run after</th><th>date</th>"
            "<th>after/before</th><th>95% CI</th><th>noise units</th><th>what changed</th></tr>")
    rows = []
    for c in changes:
        cls = "reg" if c.kind == "regression" else "imp"
        rows.append(
            f"<tr class='{cls}'><td>{c.kind}</td><td>{_e(c.graph)}</td><td>{_e(c.config)}</td><td>{_e(c.gpu)}</td>"
            f"<td><a href='{_link(c.path)}'>{_e(c.run_id)}</a></td><td>{_e(c.created)}</td>"
            f"<td>{c.ratio:.4f}</td><td>[{c.ratio_low:.4f}, {c.ratio_high:.4f}]</td><td>{c.sigmas:.1f}</td>"
            f"<td>{_e(c.versions_changed or '-')}</td></tr>")
    return f"<table id='changes'>{head}{''.join(rows)}</table>"


def _scale(values: list[float], lo: float, hi: float, size: int, flip: bool) -> list[float]:
    span = (hi - lo) or 1.0
    return [(size - PAD - (v - lo) / span * (size - 2 * PAD)) if flip else (PAD + (v - lo) / span * (size - 2 * PAD))
            for v in values]


def _trend(points: pl.DataFrame, steps: set[str]) -> str:
    """One series as an SVG: the CI band, the medians, a red rule at each step's first run."""
    rows = points.to_dicts()
    med = [r["median_ms"] for r in rows]
    low = [r["ci_low_ms"] or r["median_ms"] for r in rows]
    high = [r["ci_high_ms"] or r["median_ms"] for r in rows]
    lo, hi = min(low), max(high)
    xs = _scale(list(range(len(rows))), 0, max(1, len(rows) - 1), WIDTH, False)
    band = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, _scale(high, lo, hi, HEIGHT, True)))
    band += " " + " ".join(f"{x:.1f},{y:.1f}" for x, y in reversed(list(zip(xs, _scale(low, lo, hi, HEIGHT, True)))))
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, _scale(med, lo, hi, HEIGHT, True)))
    marks = "".join(f"<line class='step' x1='{x:.1f}' x2='{x:.1f}' y1='{PAD}' y2='{HEIGHT - PAD}' stroke='#b00020'/>"
                    for x, r in zip(xs, rows) if r["run_id"] in steps)
    dots = "".join(f"<a href='{_link(r['path'])}'><circle cx='{x:.1f}' cy='{y:.1f}' r='2'><title>{_e(r['run_id'])} "
                   f"{r['median_ms']:.4g} ms</title></circle></a>"
                   for x, y, r in zip(xs, _scale(med, lo, hi, HEIGHT, True), rows))
    return (f"<svg width='{WIDTH}' height='{HEIGHT}' role='img'><polygon points='{band}' fill='#cde'/>"
            f"<polyline points='{line}' fill='none' stroke='#246'/>{marks}{dots}"
            f"<text x='{PAD}' y='12' font-size='10'>{hi:.4g} ms</text>"
            f"<text x='{PAD}' y='{HEIGHT - 4}' font-size='10'>{lo:.4g} ms</text></svg>")


def render(points: pl.DataFrame, changes: Sequence[Change], *, title: str = "hipdnn-trace history") -> str:
    """The page's HTML: changed series first, then the rest."""
    ok = points.filter((pl.col("status") == "ok") & (pl.col("median_ms") > 0))
    stepped = {(c.graph_id, c.config, c.gpu): set() for c in changes}
    for c in changes:
        stepped[(c.graph_id, c.config, c.gpu)].add(c.run_id)
    blocks = []
    groups = sorted(ok.group_by(list(SERIES_KEY), maintain_order=True), key=lambda kv: (kv[0] not in stepped,))
    for key, group in groups:
        group = group.sort("created", "run_id")
        name = group["graph"][0]
        blocks.append(f"<div class='series' data-series='{_e(name)}'><h3>{_e(name)} · {_e(key[1])} · {_e(key[2])}"
                      f"</h3>{_trend(group, stepped.get(tuple(key), set()))}</div>")
    runs = ok["run_id"].n_unique() if ok.height else 0
    made = datetime.now().isoformat(timespec="seconds")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)}</title><style>{STYLE}</style>"
            f"</head><body><h1>{_e(title)}</h1><p>{runs} runs, {len(groups)} series, {len(changes)} step changes; "
            f"made {made}. Steps: PELT over each series' log medians, judged against the runs' own noise "
            f"(docs/history.md).</p><h2>Regressions and improvements</h2>{_table(changes)}"
            f"<h2>Series</h2>{''.join(blocks)}</body></html>")


def write_dashboard(path: Path, points: pl.DataFrame, changes: Sequence[Change]) -> Path:
    write_text_atomic(path, render(points, changes))
    return path


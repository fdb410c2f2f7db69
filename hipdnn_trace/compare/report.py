"""Write the HTML + Markdown report of one run, or of run B against run A."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hipdnn_trace.compare.comparison import compare_runs
from hipdnn_trace.compare.html_report import to_html
from hipdnn_trace.compare.loading import load_input, run_label
from hipdnn_trace.compare.markdown_report import to_markdown
from hipdnn_trace.compare.report_model import build_report
from hipdnn_trace.errors import UserError


def default_output(run: Any, other: Any | None) -> Path:
    """``<run>/report.html``, or ``<run B>/report-vs-<A>.html`` for an A/B report."""
    target = other if other is not None else run
    folder = Path(target.path)
    if folder.is_file():
        folder = folder.parent
    if other is None:
        return folder / "report.html"
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", run_label(run))
    return folder / f"report-vs-{safe}.html"


def write_report(
    run: Any,
    run_b: Any | None = None,
    *,
    output: str | Path | None = None,
    top: int = 12,
    **compare_options: Any,
) -> tuple[Path, Path]:
    """Write ``report.html`` (self-contained) and ``report.md``; return both paths.

    With ``run_b`` the report compares B against A with ``compare_runs(**compare_options)``
    (by, threshold, alpha, allow_mismatch, seed, n_boot).
    """
    if top < 1:
        raise UserError(f"--top must be >= 1, got {top}")
    first = load_input(run)
    second = load_input(run_b) if run_b is not None else None
    comparison = compare_runs(first, second, **compare_options) if second is not None else None
    runs = [first] if second is None else [first, second]
    html_path = Path(output) if output is not None else default_output(first, second)
    if html_path.suffix.lower() not in (".html", ".htm"):
        html_path = html_path.with_suffix(".html")
    md_path = html_path.with_suffix(".md")
    report = build_report(runs, comparison, top=top)
    try:
        html_path.parent.mkdir(parents=True, exist_ok=True)
        html_path.write_text(to_html(report), encoding="utf-8")
        md_path.write_text(to_markdown(report, html_path.name), encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{html_path}: cannot write the report: {exc.strerror or exc}") from exc
    return html_path, md_path

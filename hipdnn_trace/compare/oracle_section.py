"""The report's oracle section: a ``run --oracle`` run's out-of-the-box plan against its tuned twin
per graph (results/oracle.py), with the suite's geomean regret and the flagged tuned plans. Text and
table cells only; ``report_model`` wraps them in its Section (so neither module imports the other)."""

from __future__ import annotations

from typing import Any

from hipdnn_trace.compare.loading import run_label
from hipdnn_trace.compare.render import fmt_ms
from hipdnn_trace.results.oracle import geomean_regret

COLUMNS = ["graph", "ootb engine", "tuned engine", "ootb ms", "tuned ms", "regret", "tuned validation", "flag",
           "tuning"]


def _row(r: dict[str, Any]) -> list[str]:
    regret = r["regret"]
    return [str(r["graph"] or ""), str(r["ootb_engine"] or ""), str(r["tuned_engine"] or ""),
            fmt_ms(r["ootb_ms"]) if r["ootb_ms"] is not None else "-",
            fmt_ms(r["tuned_ms"]) if r["tuned_ms"] is not None else "-",
            f"{regret:.3f}x" if regret is not None else "-", str(r["tuned_validation"] or ""),
            str(r["flag"] or ""), str(r["tuning"] or "")]


#: one table: columns, rows, caption, a CSS class per row
TableCells = tuple[list[str], list[list[str]], str, list[str]]


def oracle_cells(runs: list[Any]) -> tuple[list[str], list[TableCells]]:
    """(paragraphs, tables) of the section; no tables when no run of the report is an --oracle run."""
    paragraphs: list[str] = []
    blocks: list[TableCells] = []
    for tag, run in zip(("A: ", "B: ") if len(runs) == 2 else ("",), runs, strict=False):
        frame = getattr(run, "oracle", None)
        if frame is None or not frame.height:
            continue
        mean, n = geomean_regret(frame)
        flagged = frame.filter(frame["flag"].fill_null("") != "").height
        paragraphs.append(f"{tag}{run_label(run)}: geomean regret "
                          + (f"{mean:.3f}x over {n} graph(s)" if mean is not None else "- (no graph compared)")
                          + f"; {flagged} graph(s) flagged. Regret = out-of-the-box median / tuned median "
                            "(> 1: tuning would have made the graph faster); a tuned plan that fails validation "
                            "while the out-of-the-box one passes is flagged faster-but-wrong and has no regret.")
        rows = [_row(r) for r in frame.iter_rows(named=True)]
        classes = ["failed" if r["flag"] else "" for r in frame.iter_rows(named=True)]
        blocks.append((list(COLUMNS), rows, f"{tag}{run_label(run)}", classes))
    return paragraphs, blocks

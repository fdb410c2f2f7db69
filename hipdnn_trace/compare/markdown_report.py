"""A report as Markdown: the same sections and tables, figures left to the HTML file.

Markdown is what lands in a pull request or a CI summary, where images cannot be
embedded reliably; each figure becomes a pointer to the HTML report.
"""

from __future__ import annotations

from hipdnn_trace.compare.report_model import Image, Report, Table


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _table(table: Table) -> list[str]:
    lines = [f"**{_cell(table.caption)}**", ""] if table.caption else []
    lines.append("| " + " | ".join(_cell(c) for c in table.columns) + " |")
    lines.append("|" + "|".join("---" for _ in table.columns) + "|")
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in table.rows]
    return lines + [""]


def to_markdown(report: Report, html_name: str | None = None) -> str:
    lines = [f"# {report.title}", ""]
    for section in report.sections:
        lines += [f"## {section.title}", ""]
        for paragraph in section.paragraphs:
            lines += [paragraph, ""]
        for block in section.blocks:
            if isinstance(block, Table):
                lines += _table(block)
            elif isinstance(block, Image):
                where = f" in [{html_name}]({html_name})" if html_name else " in the HTML report"
                lines += [f"*Figure: {block.alt}{where}.*", ""]
    return "\n".join(lines).rstrip() + "\n"

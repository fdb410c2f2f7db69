"""A report as one self-contained HTML file: inline CSS, PNGs as data: URIs, no script.

Nothing is fetched when it opens, so it works offline, attached to a ticket or
served from an artifact store.
"""

from __future__ import annotations

import base64
import re
from html import escape

from hipdnn_trace import __version__
from hipdnn_trace.compare.report_model import Image, Report, Section, Table

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto;
       max-width: 1200px; padding: 1em 2em; color: #222; background: #fff; }
h1 { font-size: 1.5em; border-bottom: 2px solid #2e86c1; padding-bottom: .3em; }
h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
nav a { margin-right: 1em; }
table { border-collapse: collapse; font-size: .85em; margin: .5em 0 1.5em; }
caption { text-align: left; font-weight: 600; padding: .3em 0; }
/* A cell never breaks inside a word ("referenc e", "bfloat1 6"): short cells stay on one line and
   a table too wide for the page scrolls sideways inside .table-wrap instead of squeezing. */
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: left; vertical-align: top;
         white-space: nowrap; overflow-wrap: normal; word-break: keep-all; }
td.prose { white-space: normal; min-width: 20em; }  /* messages wrap, at spaces only */
td.prose .nw { white-space: nowrap; }  /* a token a browser may break after - or / (1e-05) */
th { background: #f4f6f7; position: sticky; top: 0; }
tr.slower td { background: #fdecea; }
tr.faster td { background: #e9f7ef; }
tr.inconclusive td, tr.undecided td { background: #fff8e1; }
tr.failed td { background: #fdecea; }
tr.differs td { background: #fff8e1; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .85em; color: #555; }
.table-wrap { max-height: 40em; overflow: auto; }
#headline { background: #f8fbfd; border: 1px solid #d6eaf8; padding: 0 1em .5em; }
#headline h2 { margin-top: .5em; border: none; }
details summary { cursor: pointer; color: #2e86c1; }
footer { margin-top: 3em; font-size: .8em; color: #777; }
"""


#: A column whose longest cell is at least this long and has a space is prose (a message, a
#: reason): it wraps at its spaces instead of widening the table to one very long line.
PROSE_CHARS = 48

#: A token holding a character after which browsers may break a line (-, /, ...): anything
#: other than letters, digits and underscores.
_BREAKABLE = re.compile(r"\S*[^\w\s]\S*")


def _is_prose(cells: list[str]) -> bool:
    return any(len(c) >= PROSE_CHARS and " " in c for c in cells)


def _prose(text: str) -> str:
    """Escaped text whose punctuated tokens are kept whole, so it wraps only at spaces."""
    out, last = [], 0
    for m in _BREAKABLE.finditer(text):
        out += [escape(text[last:m.start()]), f'<span class="nw">{escape(m.group())}</span>']
        last = m.end()
    return "".join(out) + escape(text[last:])


def _table(table: Table) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in table.columns)
    prose = [_is_prose([row[i] for row in table.rows]) for i in range(len(table.columns))]
    body = []
    for i, row in enumerate(table.rows):
        cls = table.row_classes[i] if i < len(table.row_classes) else ""
        cells = "".join(f'<td class="prose">{_prose(v)}</td>' if wrap else f"<td>{escape(v)}</td>"
                        for v, wrap in zip(row, prose))
        body.append(f'<tr class="{escape(cls)}">{cells}</tr>' if cls else f"<tr>{cells}</tr>")
    caption = f"<caption>{escape(table.caption)}</caption>" if table.caption else ""
    return (f'<div class="table-wrap"><table>{caption}<thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>")


def _image(image: Image) -> str:
    data = base64.b64encode(image.png).decode("ascii")
    caption = f"<figcaption>{escape(image.caption)}</figcaption>" if image.caption else ""
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{escape(image.alt)}">'
            f"{caption}</figure>")


def _section(section: Section) -> str:
    parts = [f'<section id="{escape(section.id)}"><h2>{escape(section.title)}</h2>']
    inner = [f"<p>{escape(p)}</p>" for p in section.paragraphs]
    inner += [_table(b) if isinstance(b, Table) else _image(b) for b in section.blocks]
    if section.collapsed:   # <details> folds without a script
        inner = [f"<details><summary>show {escape(section.title.lower())}</summary>", *inner, "</details>"]
    parts += inner
    parts.append("</section>")
    return "\n".join(parts)


def to_html(report: Report) -> str:
    nav = " ".join(f'<a href="#{escape(s.id)}">{escape(s.title)}</a>' for s in report.sections)
    body = "\n".join(_section(s) for s in report.sections)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(report.title)}</title>
<style>{CSS}</style>
</head>
<body>
<h1>{escape(report.title)}</h1>
<nav>{nav}</nav>
{body}
<footer>Written by hipdnn-trace {escape(__version__)}. Self-contained: no network needed.</footer>
</body>
</html>
"""

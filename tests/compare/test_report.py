"""``hipdnn-trace report``: self-contained HTML + Markdown, sections that follow the data."""

from __future__ import annotations

import base64
import re

import numpy as np
import polars as pl
import pytest

from hipdnn_trace.cli import main
from hipdnn_trace.compare import plots
from hipdnn_trace.compare.loading import load_input
from hipdnn_trace.compare.markdown_report import to_markdown
from hipdnn_trace.compare.report_model import Image, Report, Section, Table, build_report
from hipdnn_trace.results import schemas

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _embedded_pngs(html: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"', html)]


def test_single_run_report_is_self_contained(make_run, timings, capsys) -> None:
    names = [f"g{i}" for i in range(5)]
    run = make_run("solo", {n: timings(0.5 + i, 0.05, 30) for i, n in enumerate(names)},
                   warmup={n: [9.0, 4.0] for n in names},
                   validation=[{"graph": "g1", "passed": False, "max_rel": 0.4,
                                "message": "x|y bad"}])
    assert main(["report", str(run)]) == 0
    html_path, md_path = run / "report.html", run / "report.md"
    assert f"wrote {html_path}" in capsys.readouterr().out
    html = html_path.read_text()
    assert "<script" not in html and "http://" not in html and "https://" not in html
    assert re.findall(r'<(?:img|link)[^>]+(?:src|href)="(?!data:|#)', html) == []
    pngs = _embedded_pngs(html)
    assert len(pngs) == 3  # distributions, time series, throughput (no A/B bars)
    assert all(p.startswith(PNG_MAGIC) for p in pngs)
    for section in ("runs", "summary", "distributions", "iterations", "throughput", "validation"):
        assert f'<section id="{section}">' in html
    assert 'id="verdicts"' not in html
    markdown = md_path.read_text()
    assert markdown.startswith("# hipdnn-trace: solo\n")
    assert all(f"| {n} | cpu |" in markdown for n in names)
    assert "x\\|y bad" in markdown  # pipes in cells are escaped
    assert "*Figure: kernel time per iteration in [report.html](report.html).*" in markdown


def test_ab_report_has_verdicts_and_lands_beside_b(make_run, timings) -> None:
    a = make_run("base", {"g": timings(1.0, 0.03, 40), "h": timings(2.0, 0.03, 40)})
    b = make_run("head", {"g": timings(1.3, 0.03, 40), "h": timings(2.0, 0.03, 40)})
    assert main(["report", str(a), str(b), "--top", "1"]) == 0
    html = (b / "report-vs-base.html").read_text()
    assert '<section id="verdicts">' in html
    assert '<tr class="slower"><td>g</td>' in html
    assert "<th>B/A time (&gt;1: B slower)</th>" in html and "Geometric mean of B/A time (&gt;1: B slower)" in html
    header = re.search(r"<tr>((?:<th>[^<]*</th>)+)</tr>", html[html.index('id="verdicts"'):]).group(1)
    column = re.findall(r"<th>([^<]*)</th>", header).index("B/A time (&gt;1: B slower)")
    cells = re.findall(r"<td>([^<]*)</td>", html[html.index('<tr class="slower"><td>g</td>'):].split("</tr>")[0])
    assert float(cells[column]) == pytest.approx(1.3, abs=0.05)   # B 30% slower reads above 1
    assert len(_embedded_pngs(html)) == 4
    markdown = (b / "report-vs-base.md").read_text()
    assert "| g | cpu | default | 40 / 40 |" in markdown and "SLOWER" in markdown


def test_report_refuses_mismatched_runs(make_run, timings, capsys, tmp_path) -> None:
    a = make_run("A", {"g": timings(1.0, 0.03, 10)})
    b = make_run("B", {"g": timings(1.0, 0.03, 10)}, timing={"cache": "cold"})
    assert main(["report", str(a), str(b), "-o", str(tmp_path / "r.html")]) == 1
    assert "--allow-mismatch" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_figures_show_the_slowest_graphs_and_tables_show_all(make_run, timings) -> None:
    run = load_input(make_run("many", {f"g{i:02d}": timings(1.0 + i, 0.05, 10)
                                       for i in range(20)}))
    report = build_report([run], None, top=3)
    summary = next(s for s in report.sections if s.id == "summary")
    assert len(summary.blocks[0].rows) == 20
    from hipdnn_trace.compare.report_model import _selected

    assert [u["graph"] for u in _selected([run], None, 3)] == ["g19", "g18", "g17"]


def test_throughput_section_follows_the_data(make_run, timings) -> None:
    plain = load_input(make_run("noflops", {"g": timings(1.0, 0.05, 10)}, flops=None))
    assert "throughput" not in [s.id for s in build_report([plain], None).sections]

    with_counters = load_input(make_run("counters", {"g": timings(1.0, 0.05, 10)}, flops=None))
    with_counters.counters = schemas.frame(
        [{"graph": "g", "config": "cpu", "iteration": i, "kernel": "k", "counter": c, "value": v}
         for i in range(3) for c, v in (("SQ_WAVES", 64.0 + i), ("GRBM_COUNT", 1000.0))],
        schemas.COUNTERS)
    with_counters.meta["gpu"] = {"name": "test", "peak_tflops": 100.0, "peak_gbps": 2000.0}
    section = next(s for s in build_report([with_counters], None).sections if s.id == "throughput")
    table = next(b for b in section.blocks if isinstance(b, Table))
    assert table.columns == ["graph", "config", "GRBM_COUNT", "SQ_WAVES"]
    assert table.rows == [["g", "cpu", "1000", "65"]]


def test_roofline_caption_says_whether_peaks_are_known(make_run, timings) -> None:
    run = load_input(make_run("roof", {"g": timings(1.0, 0.05, 10)}))
    captions = lambda r: [b.caption for s in build_report([r], None).sections
                          if s.id == "throughput" for b in s.blocks if isinstance(b, Image)]
    assert captions(run) == ["Achieved compute (no roof: the GPU's peaks are not in run.json)"]
    run.meta["gpu"] = {"peak_tflops": 50.0, "peak_gbps": 1000.0}
    assert captions(run) == ["Roofline"]


def test_failed_graphs_have_no_figures_but_stay_in_tables(make_run) -> None:
    run = load_input(make_run("broken", {"g": None}))
    report = build_report([run], None)
    figures = [b for s in report.sections for b in s.blocks if isinstance(b, Image)]
    assert figures == []
    summary = next(s for s in report.sections if s.id == "summary")
    assert summary.blocks[0].row_classes == ["failed"]


def test_plots_draw_nothing_without_data() -> None:
    assert plots.distributions([], ("a", None)) is None
    assert plots.time_series([], ("a", None)) is None
    assert plots.ratio_bars([], [], [], [], [], 0.05, None) is None
    assert plots.roofline([("", "cpu", 0.0, 1.0)], None, None) is None


def test_markdown_renders_tables_and_figure_pointers() -> None:
    report = Report("t", [Section("s", "S", ["p"], [
        Table(["a", "b"], [["1", "2|3"]], "cap"), Image(b"", "fig")])])
    assert to_markdown(report, "r.html") == (
        "# t\n\n## S\n\np\n\n**cap**\n\n| a | b |\n|---|---|\n| 1 | 2\\|3 |\n\n"
        "*Figure: fig in [r.html](r.html).*\n")


@pytest.mark.parametrize("flag", [["--top", "0"]])
def test_bad_report_flags_exit_1(make_run, timings, flag, capsys) -> None:
    run = make_run("A", {"g": timings(1.0, 0.03, 10)})
    assert main(["report", str(run), *flag]) == 1
    assert "--top must be >= 1" in capsys.readouterr().err


def test_time_series_marks_flagged_iterations(make_run, timings) -> None:
    run = load_input(make_run("flags", {"g": timings(1.0, 0.05, 10)},
                              warmup={"g": [3.0, 2.0]}, clock_flags={"g": [False] * 8 + [True] * 2}))
    from hipdnn_trace.compare.report_model import _iterations_of, _series

    series = _series(_iterations_of(run, "id-g", "g", "cpu", "default"))
    assert series.warmup.tolist() == [True, True] + [False] * 10
    assert series.flagged.tolist() == [False] * 10 + [True, True]
    assert np.allclose(series.values[:2], [3.0, 2.0])
    assert isinstance(run.iterations, pl.DataFrame)


def test_roofline_names_the_extreme_points() -> None:
    """The scatter's fastest and slowest points carry their graph names (matplotlib text artists)."""
    from hipdnn_trace.compare import plots

    points = [("", "cudnn", 10.0 * (i + 1), 1.0 + i, f"graph_{i:02d}") for i in range(20)]
    drawn: list[str] = []
    original = plots.Figure.add_subplot

    def spy(self, *args, **kwargs):
        ax = original(self, *args, **kwargs)
        real = ax.annotate
        ax.annotate = lambda text, *a, **k: (drawn.append(text), real(text, *a, **k))[1]
        return ax

    plots.Figure.add_subplot = spy
    try:
        assert plots.roofline(points, None, None)
    finally:
        plots.Figure.add_subplot = original
    assert sorted(drawn) == [f"graph_{i:02d}" for i in (0, 1, 2, 3, 16, 17, 18, 19)]


def test_columns_empty_in_every_row_are_dropped() -> None:
    table = Table(["graph", "engine", "n", "note"], [["g", "", "5", ""], ["h", "", "6", ""]])
    assert table.columns == ["graph", "n"] and table.rows == [["g", "5"], ["h", "6"]]
    kept = Table(["graph", "note"], [["g", ""], ["h", "slow"]])
    assert kept.columns == ["graph", "note"]
    assert Table(["graph", "note"], []).columns == ["graph", "note"]   # no rows: the header stays


def test_ab_verdict_table_has_no_empty_engine_or_note_column(make_run, timings) -> None:
    a = make_run("base", {("g", "cpu", ""): timings(1.0, 0.03, 20)})
    b = make_run("head", {("g", "cpu", ""): timings(1.0, 0.03, 20)})
    runs = [load_input(a), load_input(b)]
    from hipdnn_trace.compare.comparison import compare_runs

    report = build_report(runs, compare_runs(runs[0], runs[1]))
    verdicts = next(s for s in report.sections if s.id == "verdicts")
    table = next(b for b in verdicts.blocks if isinstance(b, Table))
    assert "engine" not in table.columns and "note" not in table.columns
    assert table.columns[:3] == ["graph", "config", "n A / B"]


def test_summary_numbers_read_as_the_console_writes_them(make_run) -> None:
    """Rates in SI units and cv in percent, by the console's own formatters."""
    from hipdnn_trace.console import fmt_share, si_rate

    run = load_input(make_run("units", {"g": [0.1, 0.1, 0.1, 0.2]}, flops=3.9e6, bytes_moved=1.2e6))
    summary = next(s for s in build_report([run], None).sections if s.id == "summary").blocks[0]
    row = dict(zip(summary.columns, summary.rows[0]))
    assert row["compute"] == "39 GFLOPS" == si_rate(3.9e6 / 1e-4, "FLOPS")
    assert row["memory"] == "12 GB/s"
    assert row["cv"] == fmt_share(run.summary["cv"][0]) and row["cv"].endswith("%")
    assert "TFLOPS" not in summary.columns and "e-0" not in " ".join(summary.rows[0])


def test_long_messages_wrap_only_at_spaces_in_html() -> None:
    """A message column wraps (class prose); its punctuated tokens (1e-05, a/b) are kept whole,
    since a browser may break a line after - or /; short cells are plain (nowrap by CSS)."""
    from hipdnn_trace.compare.html_report import CSS, _table

    message = "max abs 2.38e-07, max rel 5.89e-08 within atol 1.18779e-05 rtol 1e-05 (a/b)"
    html = _table(Table(["graph", "message"], [["gelu_bf16", message], ["relu", "ok"]]))
    assert "<td>gelu_bf16</td>" in html
    assert ('<td class="prose">max abs <span class="nw">2.38e-07,</span> max rel '
            '<span class="nw">5.89e-08</span> within') in html
    assert '<span class="nw">1e-05</span> <span class="nw">(a/b)</span></td>' in html
    assert '<td class="prose">ok</td>' in html
    assert "overflow-wrap: anywhere" not in CSS and "word-break: keep-all" in CSS
    escaped = _table(Table(["m"], [["<b> & " + "x " * 30 + "1-2"]]))
    assert ('<span class="nw">&lt;b&gt;</span> <span class="nw">&amp;</span> x' in escaped
            and '<span class="nw">1-2</span>' in escaped)

"""Two real CPU runs of the bundled graphs, compared and reported through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from hipdnn_trace.cli import main
from hipdnn_trace.compare import SLOWER, VERDICTS

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"


def _run(out: Path) -> Path:
    code = main(["run", str(GRAPHS), "--iters", "20", "--warmup", "2", "--out", str(out),
                 "--quiet", "--no-trace"])
    assert code in (0, 2), code  # 2: an output failed validation; timings are still there
    (run_dir,) = [p.parent for p in out.glob("*/run.json")]
    return run_dir


@pytest.mark.slow
def test_two_cpu_runs_compare_and_report(tmp_path: Path, capsys) -> None:
    if not GRAPHS.is_dir():
        pytest.skip("no graphs/ folder in this checkout")
    a, b = _run(tmp_path / "A"), _run(tmp_path / "B")
    capsys.readouterr()

    table_path = tmp_path / "verdicts.json"
    code = main(["compare", str(a), str(b), "--json", str(table_path)])
    result = json.loads(table_path.read_text())
    verdicts = [row["verdict"] for row in result["rows"]]
    newly_failing = any(c["change"] == "newly failing" for c in result["validation_changes"])
    expected = 3 if SLOWER in verdicts else 2 if newly_failing else 0
    assert code == expected == result["exit_code"]
    summary = pl.read_csv(a / "summary.csv")
    assert len(result["rows"]) == summary.height  # every graph x config matched
    assert set(verdicts) <= set(VERDICTS)
    assert all(row["n_a"] == 20 and row["n_b"] == 20 for row in result["rows"]
               if row["status_a"] == "ok" and row["status_b"] == "ok")
    assert result["unmatched"] == []
    out = capsys.readouterr().out
    assert out.startswith(f"A = {a.name}   B = {b.name}")
    assert "geomean B/A time over " in out

    assert main(["report", str(a), str(b)]) == 0
    html = (b / f"report-vs-{a.name}.html").read_text()
    assert '<section id="verdicts">' in html and 'data:image/png;base64,' in html
    assert (b / f"report-vs-{a.name}.md").read_text().count("\n| ") > summary.height

"""The history dashboard renders in a real headless Chromium (Debian's chromium; .ci/run installs it) with
the injected steps in its table, and the page fetches nothing (self-contained: no script, no network)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from synthetic_history import Injected, graph_name, write_history

from hipdnn_trace.cli import main

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions"]
STEPS = (Injected(1, 20, 1.02), Injected(4, 35, 1.05), Injected(6, 48, 1 / 1.2))


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("dash")
    runs = write_history(folder / "runs", nights=60, graphs=12, steps=STEPS)
    db = str(folder / "h.duckdb")
    assert main(["db", "import", *map(str, runs), "--db", db, "-q"]) == 0
    html = folder / "history.html"
    assert main(["history", "--db", db, "--html", str(html)]) == 3   # a regression: exit 3, as compare
    return html


def test_the_page_is_self_contained(page: Path) -> None:
    text = page.read_text()
    assert "<script" not in text and "http://" not in text and "https://" not in text


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (apt-get install chromium)")
def test_dashboard_renders_in_headless_chromium_with_the_steps_in_its_table(page: Path, tmp_path: Path) -> None:
    profile = tmp_path / "profile"
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    table = dom[dom.index("<table id=\"changes\">"):]
    table = table[:table.index("</table>")]
    rows = re.findall(r"<tr class=\"(reg|imp)\">(.*?)</tr>", table)
    found = {(kind, re.findall(r"<td>(.*?)</td>", cells)[1]) for kind, cells in rows}
    for s in STEPS:
        assert ("reg" if s.ratio > 1 else "imp", graph_name(s.graph)) in found, found
    assert dom.count("<svg") == 12
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={shot}", "--window-size=1200,900",
                    page.as_uri()], capture_output=True, timeout=120)
    assert shot.stat().st_size > 10_000   # a drawn page, not a blank one

"""Open the report in a real headless Chromium and check it loads cleanly.

Chromium is driven over its DevTools protocol on a pipe (``--remote-debugging-pipe``:
JSON messages separated by NUL on fds 3 and 4), so the test sees what a user's browser
would: script errors, failed or network requests, broken images, and a screenshot.
Skips when no Chromium is installed (Debian: ``apt-get install chromium``).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import io
import json
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hipdnn_trace.cli import main

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))
                 if p), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--hide-scrollbars", "--remote-debugging-pipe"]

PLACE_FDS_AND_EXEC = (
    "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); "
    "os.execv(sys.argv[3], sys.argv[3:])"
)


class DevTools:
    """The smallest DevTools client: send a command, wait for its reply, keep the events."""

    def __init__(self, user_data: Path) -> None:
        self.log_path = user_data.with_name("chromium.log")
        self._log = self.log_path.open("wb")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        for_child = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child_r, from_child_w)]
        os.close(to_child_r)
        os.close(from_child_w)
        to_child_r, from_child_w = for_child  # >= 10, so the shell's 3< and 4> cannot clash
        # Chromium reads commands on fd 3 and answers on fd 4; a tiny exec wrapper puts them
        # there (dash cannot redirect fds above 9, and Popen would close 3 and 4 itself).
        self._proc = subprocess.Popen(
            [sys.executable, "-c", PLACE_FDS_AND_EXEC, str(to_child_r), str(from_child_w),
             CHROMIUM, *FLAGS, f"--user-data-dir={user_data}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log,
            pass_fds=(to_child_r, from_child_w),
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_child], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise RuntimeError(f"chromium closed the DevTools pipe: {self.log_tail()}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, session: str | None = None, timeout: float = 30,
             **params: Any) -> dict[str, Any]:
        self._next_id += 1
        request: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            request["sessionId"] = session
        try:
            os.write(self._to_child, json.dumps(request).encode() + b"\0")
        except BrokenPipeError as exc:
            self._proc.wait(timeout=10)
            raise RuntimeError(f"chromium exited {self._proc.returncode}: {self.log_tail()}") from exc
        deadline = time.monotonic() + timeout
        while True:
            message = self._read_message(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, method: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            message = self._read_message(deadline)
            self.events.append(message)
            if message.get("method") == method:
                return message

    def log_tail(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-2000:]

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except Exception:  # it may be gone already
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        os.close(self._to_child)
        os.close(self._from_child)
        self._log.close()


@contextlib.contextmanager
def page_in_chromium(html: Path, tmp: Path, width: int = 1280, height: int = 900
                     ) -> Iterator[tuple[DevTools, str]]:
    """``html`` loaded in a fresh headless Chromium of the given viewport: (client, session)."""
    browser = DevTools(tmp / "chromium-profile")
    try:
        target = next(t for t in browser.send("Target.getTargets")["targetInfos"]
                      if t["type"] == "page")
        session = browser.send("Target.attachToTarget", targetId=target["targetId"],
                               flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.send(f"{domain}.enable", session)
        browser.send("Emulation.setDeviceMetricsOverride", session, width=width, height=height,
                     deviceScaleFactor=1, mobile=False)
        browser.send("Page.navigate", session, url=html.resolve().as_uri())
        browser.wait_for("Page.loadEventFired")
        yield browser, session
    finally:
        browser.close()


def evaluate(browser: DevTools, session: str, expression: str) -> Any:
    """The JSON value an expression returns in the page (it must return JSON.stringify(...))."""
    reply = browser.send("Runtime.evaluate", session, returnByValue=True, expression=expression)
    if "exceptionDetails" in reply:
        raise RuntimeError(f"script failed: {reply['exceptionDetails']}")
    return json.loads(reply["result"]["value"])


def screenshot(browser: DevTools, session: str) -> bytes:
    shot = browser.send("Page.captureScreenshot", session, format="png", captureBeyondViewport=True)
    return base64.b64decode(shot["data"])


def open_in_chromium(html: Path, tmp: Path, width: int = 1280, height: int = 900
                     ) -> tuple[dict[str, Any], bytes, list[dict[str, Any]]]:
    """Load ``html``; return page facts (from JS after load), a full-page PNG, all events."""
    with page_in_chromium(html, tmp, width, height) as (browser, session):
        facts = evaluate(browser, session, """
            JSON.stringify({
              title: document.title,
              sections: [...document.querySelectorAll('section')].map(s => s.id),
              images: [...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight]),
              tables: document.querySelectorAll('table').length,
              scripts: document.scripts.length,
              height: document.documentElement.scrollHeight,
              headline: (() => { const h = document.getElementById('headline');
                                 if (!h) return null;
                                 const r = h.getBoundingClientRect();
                                 return {top: r.top, bottom: r.bottom, text: h.innerText}; })(),
            })""")
        return facts, screenshot(browser, session), browser.events


#: Every word (run of non-space characters) of every table cell, measured as laid out: a Range over
#: the word whose client rects sit on more than one line was broken inside the word. Folded
#: <details> are opened first so their tables are laid out too.
SPLIT_WORDS_JS = """
JSON.stringify((() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const split = [];
  let words = 0;
  for (const cell of document.querySelectorAll('td, th')) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].filter(r => r.width > 0)
                             .map(r => Math.round(r.top)));
        words += 1;
        if (tops.size > 1) split.push(m[0]);
      }
    }
  }
  return {words, split};
})())"""


def split_words(browser: DevTools, session: str) -> tuple[int, list[str]]:
    """(words measured, words a line break cut) over every table cell of the page."""
    found = evaluate(browser, session, SPLIT_WORDS_JS)
    return found["words"], found["split"]


def _errors(events: list[dict[str, Any]]) -> list[str]:
    found = []
    for e in events:
        method, params = e.get("method"), e.get("params", {})
        if method == "Runtime.exceptionThrown":
            found.append(f"exception: {params['exceptionDetails'].get('text')}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            found.append(f"console: {params.get('args')}")
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            found.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        elif method == "Network.loadingFailed":
            found.append(f"load failed: {params.get('errorText')}")
    return found


def _requested_urls(events: list[dict[str, Any]]) -> list[str]:
    return [e["params"]["request"]["url"] for e in events
            if e.get("method") == "Network.requestWillBeSent"]


@pytest.fixture
def ab_report(make_run, timings, tmp_path: Path) -> Path:
    names = [f"graph_{i:02d}" for i in range(8)]
    a = make_run("base", {n: timings(0.2 + i, 0.04, 40) for i, n in enumerate(names)},
                 warmup={n: [5.0, 3.0] for n in names},
                 validation=[{"graph": n, "passed": True, "max_rel": 1e-6} for n in names])
    b = make_run("head", {n: timings((0.2 + i) * (1.2 if i == 2 else 1.0), 0.04, 40)
                          for i, n in enumerate(names)},
                 warmup={n: [5.0, 3.0] for n in names},
                 clock_flags={names[0]: [False] * 30 + [True] * 10},
                 validation=[{"graph": n, "passed": n != names[5], "max_rel": 1e-6}
                             for n in names])
    out = tmp_path / "report" / "ab.html"
    assert main(["report", str(a), str(b), "-o", str(out)]) == 0
    return out


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (apt-get install chromium)")
def test_ab_report_renders_in_headless_chromium(ab_report: Path, tmp_path: Path) -> None:
    facts, png, events = open_in_chromium(ab_report, tmp_path)
    assert _errors(events) == []
    assert [u for u in _requested_urls(events) if not u.startswith(("file:", "data:"))] == []
    assert facts["title"] == "hipdnn-trace: head vs base"
    assert facts["sections"] == ["headline", "verdicts", "summary", "distributions", "iterations",
                                 "throughput", "validation", "runs"]
    assert facts["scripts"] == 0
    assert len(facts["images"]) == 4  # A/B bars, distributions, time series, throughput
    assert all(complete and width > 100 and height > 100
               for complete, width, height in facts["images"])
    from matplotlib.image import imread

    pixels = imread(io.BytesIO(png), format="png")
    assert pixels.shape[1] == 1280 and pixels.shape[0] == facts["height"]
    not_white = (pixels[..., :3] < 0.9).any(axis=-1)
    assert not_white.mean() > 0.02  # text, tables and figures were painted
    rgb = (pixels[..., :3] * 255).astype(np.int64)
    colours = np.unique(rgb[..., 0] * 65536 + rgb[..., 1] * 256 + rgb[..., 2])
    assert len(colours) > 50  # and in colour (figures, highlighted rows)
    (tmp_path / "report" / "ab.png").write_bytes(png)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (apt-get install chromium)")
def test_broken_image_is_caught_by_the_browser_check(ab_report: Path, tmp_path: Path) -> None:
    """The check above can fail: a truncated embedded image shows up as broken."""
    html = ab_report.read_text()
    start = html.index("data:image/png;base64,") + len("data:image/png;base64,")
    broken = ab_report.with_name("broken.html")
    broken.write_text(html[:start] + "AAAA" + html[start + 4000:])
    facts, _, _ = open_in_chromium(broken, tmp_path)
    assert not all(complete and width > 0 for complete, width, _ in facts["images"])


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (apt-get install chromium)")
def test_headline_is_visible_without_scrolling_at_1400x900(ab_report: Path, tmp_path: Path) -> None:
    """The first screen says what happened: counts, what failed, the largest regression with its CI."""
    facts, png, _ = open_in_chromium(ab_report, tmp_path, width=1400, height=900)
    headline = facts["headline"]
    assert headline is not None and 0 <= headline["top"] and headline["bottom"] <= 900
    text = headline["text"]
    assert "8 graph rows" in text and "head vs base" in text and "Largest regressions: graph_02" in text
    assert "Newly failing validation (1): graph_05 (cpu)" in text
    (tmp_path / "report" / "first-screen.png").write_bytes(png)


POINTWISE = Path(__file__).resolve().parents[2] / "graphs" / "pointwise"


@pytest.fixture(scope="module")
def real_ab_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of two real runs of the pointwise graphs: long graph names, "reference",
    "bfloat16", INCONCLUSIVE verdicts, empty engine/note columns and long validation messages,
    everything that was squeezed into broken words at 1400 px."""
    root = tmp_path_factory.mktemp("real")
    runs = []
    for name in ("a", "b"):
        assert main(["run", str(POINTWISE), "-i", "5", "-w", "1", "--quiet",
                     "--out", str(root / name)]) == 0
        runs += [str(p) for p in (root / name).iterdir() if p.is_dir()]
    out = root / "ab.html"
    assert main(["report", *runs, "-o", str(out)]) == 0
    return out


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (apt-get install chromium)")
def test_no_table_cell_breaks_inside_a_word_at_1400px(real_ab_report: Path, tmp_path: Path) -> None:
    with page_in_chromium(real_ab_report, tmp_path, width=1400, height=900) as (browser, session):
        words, split = split_words(browser, session)
        (tmp_path / "real-1400.png").write_bytes(screenshot(browser, session))
    assert words > 1000   # every table was measured: 18 graphs x (verdicts, 2 summaries, checks)
    assert split == []


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (apt-get install chromium)")
def test_word_split_check_catches_a_squeezed_table(real_ab_report: Path, tmp_path: Path) -> None:
    """The check above can fail: the old rule (break anywhere) in narrow cells splits names."""
    html = real_ab_report.read_text()
    squeezed = real_ab_report.with_name("squeezed.html")
    squeezed.write_text(html.replace("</style>", "td { white-space: normal; overflow-wrap: anywhere;"
                                                 " max-width: 4em; }</style>", 1))
    with page_in_chromium(squeezed, tmp_path, width=1400, height=900) as (browser, session):
        _, split = split_words(browser, session)
    assert "bias_add_broadcast_nhwc_bf16" in split and "INCONCLUSIVE" in split


WHY_RUN = Path(__file__).resolve().parents[1] / "data" / "ncu" / "why_ln_oracle_run"

#: the Why section as laid out: its images (loaded, drawn size), its tables (caption, first body row)
WHY_JS = """
JSON.stringify((() => {
  const s = document.getElementById('why');
  if (!s) return null;
  return {
    images: [...s.querySelectorAll('img')].map(i => [i.alt, i.complete, i.naturalWidth,
                                                     i.getBoundingClientRect().width]),
    tables: [...s.querySelectorAll('table')].map(t => [t.caption ? t.caption.innerText : '',
                                                      [...t.tBodies[0].rows[0].cells].map(c => c.innerText)]),
    text: s.innerText,
  };
})())"""


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (apt-get install chromium)")
def test_why_section_renders_bars_roofline_and_explanation_table(tmp_path: Path) -> None:
    """The real H200 LN-backward oracle run (--profile ncu): the Why section shows the limiter bars and the
    hierarchical roofline as loaded images, the graph_limiters table and the explanation table whose first row
    is the grid-starved kernel, with no table word broken."""
    run = shutil.copytree(WHY_RUN, tmp_path / "why_ln")
    out = tmp_path / "report" / "why.html"
    assert main(["report", str(run), "-o", str(out)]) == 0
    with page_in_chromium(out, tmp_path, width=1400, height=900) as (browser, session):
        why = evaluate(browser, session, WHY_JS)
        words, split = split_words(browser, session)
        (tmp_path / "report" / "why.png").write_bytes(screenshot(browser, session))
        sections = evaluate(browser, session, "JSON.stringify([...document.querySelectorAll('section')]"
                                              ".map(s => s.id))")
    assert "why" in sections and sections.index("why") == sections.index("oracle") + 1
    assert [alt for alt, *_ in why["images"]] == ["limiter bars", "hierarchical roofline"]
    assert all(done and natural > 100 and drawn > 100 for _, done, natural, drawn in why["images"])
    captions = [caption for caption, _ in why["tables"]]
    assert captions[0] == "limiters by kernel time (graph_limiters)"
    explanation = next(row for caption, row in why["tables"] if "kernels by contribution" in caption)
    assert explanation[0] == "LayerNormGradBetaGammaInToTemp" and explanation[4] == "103"
    assert "grid 64x128, 0.03 waves" in explanation[5] and "parallelism" in explanation[5]
    assert "2 kernel(s) of cudnn#ootb with grids of 64 and 32 blocks on 132 SMs" in why["text"]
    assert words > 100 and split == []

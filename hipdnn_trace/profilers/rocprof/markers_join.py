"""Assign each kernel dispatch to the harness iteration (and graph, config, phase) it ran in.

Marker contract (roctx has no domains, so names carry a prefix; see docs/amd-profiling.md):

* ``hipdnn_trace:graph <graph_id> <config>`` encloses everything done for one graph x
  config; ``graph_id`` is the first word after ``graph``, ``config`` is the rest of the
  name (may contain spaces; empty -> null).
* ``hipdnn_trace:init``, ``hipdnn_trace:warmup``, ``hipdnn_trace:execute`` nest inside it
  (phases ``init``, ``warmup``, ``timed``).
* ``hipdnn_trace:iter <i>`` (``i`` = 0-based integer) nests inside ``execute`` (or
  ``warmup``); ``iteration`` is ``i`` and ``phase`` tells which loop.

Ranges are thread ranges (roctxRangePush/Pop) and must nest properly per thread.

How a kernel finds its range, best evidence first (the ``join`` column says which):

``api``
    A host API trace (``--hip-runtime-trace``) has the call that launched the kernel:
    rocprofv3's kernel Correlation_Id *is* that call's internal correlation id
    (generateCSV.cpp writes ``correlation_id.internal`` in both). The launch time is the
    call's start on its thread, and the innermost harness range containing it wins. Exact.
``correlation``
    No API trace, but the kernel has Thread_Id and Correlation_Id (ROCm >= 6.2.4).
    rocprofiler-sdk draws every correlation id from one process-wide counter at API
    entry (``context/correlation_id.cpp``), markers included, so on the launching thread
    the launch happened after the start of the last marker with a smaller id (``lo``) and
    before both the first marker with a larger id and the kernel's own GPU start (``hi``,
    same CLOCK_BOOTTIME clock). The kernel belongs to the innermost range that contains
    all of ``[lo, hi]``. This is exact when the harness synchronises each iteration
    before closing its range; a kernel that starts on the GPU after its ``iter`` range
    closed is, correctly but less precisely, given the enclosing range (iteration null).
``time``
    Neither (ROCm 6.2.0 has no Thread_Id; rocprof v1 / v2 have no correlation to
    markers): the innermost harness range, on any thread, that contains the kernel's GPU
    start. Asynchronous launches can start after their range ended; then this is wrong
    by construction, which is why the two methods above come first.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass

import polars as pl

from hipdnn_trace.markers import ROCTX_PREFIX as PREFIX

PHASES = {"init": "init", "warmup": "warmup", "execute": "timed"}

#: Columns :func:`join_iterations` fills.
LABELS = ("graph_id", "config", "phase", "iteration", "join")


@dataclass(frozen=True)
class HarnessMarker:
    """What one harness range name says."""

    kind: str                      # graph | phase | iter
    graph_id: str | None = None
    config: str | None = None
    phase: str | None = None
    iteration: int | None = None


def parse_marker(name: str | None) -> HarnessMarker | None:
    """``"hipdnn_trace:iter 3"`` -> HarnessMarker("iter", iteration=3); other names -> None."""
    if not name or not name.startswith(PREFIX):
        return None
    body = name[len(PREFIX):].strip()
    word, _, rest = body.partition(" ")
    rest = rest.strip()
    if word == "graph":
        graph_id, _, config = rest.partition(" ")
        if not graph_id:
            return None
        return HarnessMarker("graph", graph_id=graph_id, config=config.strip() or None)
    if word in PHASES and not rest:
        return HarnessMarker("phase", phase=PHASES[word])
    if word == "iter" and rest.isdigit():
        return HarnessMarker("iter", iteration=int(rest))
    return None


@dataclass
class _Range:
    start: int
    end: int
    marker: HarnessMarker
    parent: int | None = None
    depth: int = 0


class _Forest:
    """Properly nested harness ranges of one thread, queryable by time."""

    def __init__(self, ranges: list[_Range]) -> None:
        ranges.sort(key=lambda r: (r.start, -r.end))
        self.ranges: list[_Range] = []
        stack: list[int] = []
        for r in ranges:
            while stack and self.ranges[stack[-1]].end <= r.start:
                stack.pop()
            if stack and r.end > self.ranges[stack[-1]].end:
                continue  # overlaps its would-be parent without nesting: not a thread range
            r.parent = stack[-1] if stack else None
            r.depth = len(stack)
            self.ranges.append(r)
            stack.append(len(self.ranges) - 1)
        # Elementary segments [bounds[k], bounds[k+1]) -> innermost open range (or None).
        self.bounds = sorted({x for r in self.ranges for x in (r.start, r.end)})
        self.owner: list[int | None] = []
        open_: list[int] = []
        nxt = 0
        for t in self.bounds:
            while open_ and self.ranges[open_[-1]].end <= t:
                open_.pop()
            while nxt < len(self.ranges) and self.ranges[nxt].start <= t:
                open_.append(nxt)
                nxt += 1
            while open_ and self.ranges[open_[-1]].end <= t:
                open_.pop()
            self.owner.append(open_[-1] if open_ else None)

    def at(self, t: int) -> int | None:
        k = bisect.bisect_right(self.bounds, t) - 1
        return None if k < 0 else self.owner[k]

    def ancestors(self, i: int | None) -> list[int]:
        chain = []
        while i is not None:
            chain.append(i)
            i = self.ranges[i].parent
        return chain

    def covering(self, lo: int, hi: int) -> int | None:
        """Innermost range containing all of [lo, hi]."""
        a, b = self.ancestors(self.at(lo)), set(self.ancestors(self.at(hi)))
        return next((i for i in a if i in b), None)

    def labels(self, i: int | None) -> dict[str, object]:
        out: dict[str, object] = {"graph_id": None, "config": None, "phase": None, "iteration": None}
        for j in self.ancestors(i):
            m = self.ranges[j].marker
            if m.kind == "iter" and out["iteration"] is None:
                out["iteration"] = m.iteration
            elif m.kind == "phase" and out["phase"] is None:
                out["phase"] = m.phase
            elif m.kind == "graph" and out["graph_id"] is None:
                out["graph_id"], out["config"] = m.graph_id, m.config
        return out


class _Bracket:
    """All marker events of one thread ordered by correlation id (for ``lo``/``hi``)."""

    def __init__(self, corr: list[int], start: list[int]) -> None:
        order = sorted(range(len(corr)), key=lambda i: corr[i])
        self.corr = [corr[i] for i in order]
        self.start = [start[i] for i in order]
        # Latest start among ids <= k, earliest start among ids >= k.
        self.max_prefix, m = [], None
        for s in self.start:
            m = s if m is None or s > m else m
            self.max_prefix.append(m)
        self.min_suffix: list[int | None] = [None] * len(self.start)
        m = None
        for k in range(len(self.start) - 1, -1, -1):
            s = self.start[k]
            m = s if m is None or s < m else m
            self.min_suffix[k] = m

    def window(self, c: int) -> tuple[int | None, int | None]:
        k = bisect.bisect_left(self.corr, c)
        lo = self.max_prefix[k - 1] if k > 0 else None
        j = k + 1 if k < len(self.corr) and self.corr[k] == c else k
        hi = self.min_suffix[j] if j < len(self.corr) else None
        return lo, hi


def _harness_ranges(markers: pl.DataFrame) -> dict[int | None, list[_Range]]:
    by_thread: dict[int | None, list[_Range]] = defaultdict(list)
    for name, thread, start, end in markers.select("name", "thread_id", "start_ns", "end_ns").iter_rows():
        m = parse_marker(name)
        if m is None or start is None or end is None or end < start:
            continue
        by_thread[thread].append(_Range(start, end, m))
    return by_thread


def has_harness_markers(markers: pl.DataFrame) -> bool:
    return any(parse_marker(n) is not None for n in markers["name"].to_list())


def join_iterations(
    dispatches: pl.DataFrame, markers: pl.DataFrame, api: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Return ``dispatches`` with graph_id, config, phase, iteration and join filled.

    ``dispatches`` needs ``start_ns``; ``correlation_id`` and ``thread_id`` are used when
    present (see the module docstring for the three methods). Rows outside every harness
    range keep nulls. Works for the kernels frame and the long counters frame alike.
    """
    if dispatches.is_empty():
        return _with_labels(dispatches, [])
    forests = {t: _Forest(r) for t, r in _harness_ranges(markers).items()}
    if not forests:
        return _with_labels(dispatches, [None] * dispatches.height)
    brackets = _brackets(markers)
    launches = _launches(api)
    cols = {c: (dispatches[c].to_list() if c in dispatches.columns else [None] * dispatches.height)
            for c in ("start_ns", "correlation_id", "thread_id")}
    cache: dict[tuple, dict | None] = {}
    labels: list[dict | None] = []
    for start, corr, thread in zip(cols["start_ns"], cols["correlation_id"], cols["thread_id"]):
        key = (start, corr, thread)
        if key not in cache:
            cache[key] = _label_one(start, corr, thread, forests, brackets, launches)
        labels.append(cache[key])
    return _with_labels(dispatches, labels)


def _brackets(markers: pl.DataFrame) -> dict[int | None, _Bracket]:
    per: dict[int | None, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for thread, corr, start in markers.select("thread_id", "correlation_id", "start_ns").iter_rows():
        if corr is not None and start is not None:
            per[thread][0].append(corr)
            per[thread][1].append(start)
    return {t: _Bracket(c, s) for t, (c, s) in per.items()}


def _launches(api: pl.DataFrame | None) -> dict[int, tuple[int | None, int]]:
    if api is None or api.is_empty():
        return {}
    rows = api.filter(pl.col("correlation_id").is_not_null() & pl.col("start_ns").is_not_null())
    return {c: (t, s) for c, t, s in rows.select("correlation_id", "thread_id", "start_ns").iter_rows()}


def _label_one(start, corr, thread, forests, brackets, launches) -> dict | None:
    if corr is not None and corr in launches:
        api_thread, t = launches[corr]
        forest = forests.get(api_thread)
        if forest is not None:
            return {**forest.labels(forest.at(t)), "join": "api"}
    if corr is not None and thread is not None and thread in forests and thread in brackets:
        forest = forests[thread]
        lo, hi = brackets[thread].window(corr)
        if lo is not None:
            if start is not None:
                hi = start if hi is None else min(hi, start)
            if hi is None or hi < lo:
                hi = lo
            return {**forest.labels(forest.covering(lo, hi)), "join": "correlation"}
        return None  # launched before the thread's first marker: outside every range
    if start is None:
        return None
    best: tuple[int, dict] | None = None
    for forest in forests.values():
        i = forest.at(start)
        if i is not None and (best is None or forest.ranges[i].depth > best[0]):
            best = (forest.ranges[i].depth, forest.labels(i))
    return None if best is None else {**best[1], "join": "time"}


def _with_labels(frame: pl.DataFrame, labels: list[dict | None]) -> pl.DataFrame:
    values = {k: [(lab or {}).get(k) for lab in labels] for k in LABELS}
    types = {"graph_id": pl.String, "config": pl.String, "phase": pl.String, "iteration": pl.Int64, "join": pl.String}
    return frame.with_columns([pl.Series(k, values[k], dtype=types[k]) for k in LABELS])

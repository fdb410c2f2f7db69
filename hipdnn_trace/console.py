"""What ``run`` prints: a header, a block per graph (or one line in suites), the
mismatch report, a final table of the rows that did not pass, the count line, and a
progress line on stderr. ``-q`` prints the count line alone.

Results go to stdout, progress to stderr, so ``hipdnn-trace run ... > log`` keeps a
clean log while a terminal still shows progress. Everything printed passes through
:func:`escape`: a graph or file name is the user's data, and one holding a newline or an
ANSI escape must not forge lines or recolour the terminal (the files keep the real name).
"""

from __future__ import annotations

import math
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any

# Records, FLOP counts and statistics load numpy and polars: the functions that use them import them,
# so the CLI (which needs only escape) starts without either.
if TYPE_CHECKING:
    from hipdnn_trace.bench.records import ConfigRun, GraphRun

#: Characters a terminal acts on instead of showing: C0/C1 controls (newline, ESC, ...), DEL, line
#: and paragraph separators, bidirectional overrides, and lone surrogates (undecodable file names).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                     "\ud800-\udfff]")


def escape(text: object) -> str:
    """``text`` for a terminal, one line: each control character shown as its Python escape
    (``\\n``, ``\\x1b``, ``\\u202e``), everything else as is."""
    return _UNSAFE.sub(lambda m: repr(m.group())[1:-1], str(text))


def escape_strings(value: Any) -> Any:
    """``value`` with :func:`escape` applied to every string inside it (dicts, lists, tuples)."""
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, dict):
        return {k: escape_strings(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(escape_strings(v) for v in value)
    return value


def fmt_ms(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.3f}"
    return f"{value:.4f}"


def fmt_share(value: float | None) -> str:
    """A fraction as a percentage with one decimal (cv 3.2%): the unit a reader compares by eye."""
    if value is None or value != value:
        return "-"
    return f"{value:.1%}"


def si_rate(per_second: float, unit: str) -> str:
    """A rate with an SI prefix that keeps 3 significant digits (1.23 TFLOPS, 45.6 GB/s, 812 MFLOPS)."""
    if per_second <= 0:
        return f"0 {unit}"
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if per_second >= scale:
            value = per_second / scale
            return f"{value:.3g} {prefix}{unit}" if value < 1000 else f"{value:.0f} {prefix}{unit}"
    return f"{per_second:.3g} {unit}"


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> list[str]:
    """Left-aligned text columns padded to their widest cell (the last column is not padded)."""
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    fmt = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r[:-1], widths)) + "  " + str(r[-1])
    return [fmt(header).rstrip(), *(fmt(r).rstrip() for r in rows)]


#: seconds of evidence an estimate keeps against the first measured graphs: a suite's first
#: few seconds are too little to rescale every later graph by
ETA_PRIOR_S = 5.0
#: a graph running longer than this shows its own elapsed time next to its stage
SHOW_ELAPSED_S = 2.0


def remaining_s(estimates: Sequence[float], done: int, done_s: float, current_s: float,
                current_left_s: float | None = None) -> float:
    """Seconds the suite still needs: the estimates of the graphs not finished, scaled by how long
    the finished ones took against theirs (and the current one, once it outlasts its estimate, as
    the rest probably will). ``current_left_s``: what the current graph still needs when its own
    iterations tell (timed i of N), instead of its estimate."""
    if done >= len(estimates):
        return 0.0
    est_done, current, rest = sum(estimates[:done]), estimates[done], sum(estimates[done + 1:])
    factor = (done_s + ETA_PRIOR_S) / (est_done + ETA_PRIOR_S)
    if current_s > current * factor:
        factor = (done_s + current_s + ETA_PRIOR_S) / (est_done + current + ETA_PRIOR_S)
    left = current_left_s if current_left_s is not None else max(current * factor - current_s, 0.0)
    return left + rest * factor


def fmt_duration(seconds: float) -> str:
    """42s, 5m20s, 1h05m: what a person reads at a glance on a progress line."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    """One self-overwriting status line on a terminal (for a suite, or a graph expected to take more
    than a few seconds); silent elsewhere.

    It shows the graphs done, the suite's ETA (from per-graph ``estimates`` in seconds, corrected
    by what the finished graphs took), the current graph's stage (``reference: warmup``, ``timed
    3/5``...) and, past a few seconds, how long that graph has run. With ``tick_s`` a thread redraws
    it that often, so a graph that spends minutes in one numpy call still shows time passing."""

    def __init__(self, total: int, stream: IO[str] | None = None, enabled: bool | None = None, *,
                 estimates: Sequence[float] | None = None, iters: int | None = None,
                 tick_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream or sys.stderr
        self.estimates = list(estimates) if estimates is not None and len(estimates) == total else None
        # a lone graph gets the line too when it is expected to take more than a moment
        long = self.estimates is not None and sum(self.estimates) >= SHOW_ELAPSED_S
        self.enabled = (self.stream.isatty() and (total > 1 or long)) if enabled is None else enabled
        self.total = total
        self.iters = iters
        self.clock = clock
        self.done = 0
        self.label = ""
        self.stage_text = ""
        self._iteration: int | None = None
        self._iteration_at = 0.0
        self._timed_since: float | None = None
        self._last = 0.0
        self.started = clock()
        self._graph_started = self.started
        self._done_s = 0.0
        self._lock = threading.Lock()
        self._tick_s = tick_s
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._hidden = False   # cleared for other output: the ticker waits for the next graph

    def graph(self, index: int, label: str) -> None:
        """Graph ``index`` (0-based: the number finished before it) starts."""
        now = self.clock()
        with self._lock:
            if index > self.done:   # the previous graph finished: its time counts as evidence
                self._done_s += now - self._graph_started
            self.done, self.label = index, escape(label)
            self._graph_started = now
            self.stage_text, self._iteration, self._timed_since = "load", None, None
            self._hidden = False
        self._draw(force=True)
        self._start_ticker()

    def stage(self, text: str) -> None:
        """The current graph entered a stage (``inputs``, ``reference``, ``cfg: warmup``...)."""
        shown = _stage_name(escape(text))
        with self._lock:
            if shown == self.stage_text:
                return
            self.stage_text, self._iteration = shown, None
            self._timed_since = self.clock() if shown.endswith("timed") else None
        self._draw(force=True)

    def iteration(self, i: int) -> None:
        if self.enabled:
            with self._lock:
                self._iteration, self._iteration_at = i, self.clock()
            self._draw()

    def line(self) -> str:
        """The status line as it would be drawn now."""
        now = self.clock()
        with self._lock:
            width = 30
            filled = int(width * self.done / max(1, self.total))
            head = f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}"
            eta = self._eta(now)
            stage = self._stage_now(now)
            # the stage before the name: a long name is what the terminal's width cuts
            return " ".join(part for part in (head, "" if eta is None else f"eta {fmt_duration(eta)}",
                                              stage and f"{stage} |", self.label) if part)

    def _eta(self, now: float) -> float | None:
        current_s = now - self._graph_started
        if self.estimates is None:
            if not self.done:
                return None
            return (now - self.started) / self.done * (self.total - self.done)
        left = None
        if self._timed_since is not None and self._iteration and self.iters:
            # the pace of the iterations finished, less what the one running has already taken
            per = (self._iteration_at - self._timed_since) / self._iteration
            left = max(per * max(self.iters - self._iteration, 0) - (now - self._iteration_at), 0.0)
        return remaining_s(self.estimates, self.done, self._done_s, current_s, left)

    def _stage_now(self, now: float) -> str:
        text = self.stage_text
        if text and self._iteration is not None:
            text += f" {self._iteration}/{self.iters}" if self.iters else f" {self._iteration}"
        elapsed = now - self._graph_started
        if elapsed >= SHOW_ELAPSED_S:
            text += f" ({fmt_duration(elapsed)})"
        return text

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if not force and now - self._last < 0.2:
            return
        self._last = now
        line = self.line()
        with self._lock:
            self.stream.write("\r" + line[:120].ljust(120))
            self.stream.flush()

    def _start_ticker(self) -> None:
        if not self.enabled or not self._tick_s or self._ticker is not None:
            return
        self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(self._tick_s):
            if self._hidden:
                continue
            try:
                self._draw(force=True)
            except (OSError, ValueError):   # the terminal went away: stop redrawing
                return

    def clear(self) -> None:
        if self.enabled:
            with self._lock:
                self._hidden = True
                self.stream.write("\r" + " " * 120 + "\r")
                self.stream.flush()

    def close(self) -> None:
        """Stop the redrawing thread and clear the line."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=2.0)
        self.clear()


def _stage_name(text: str) -> str:
    """A stage as the line shows it: the loop's ``execute`` range is the timed iterations."""
    head, sep, tail = text.rpartition(": ")
    tail = "timed" if tail == "execute" else tail
    return f"{head}{sep}{tail}"


class Reporter:
    def __init__(self, out: IO[str] | None = None, *, verbose: bool = False, quiet: bool = False,
                 suite: bool = False, name_width: int = 0, config_width: int = 0) -> None:
        self.out = out or sys.stdout
        self.verbose = verbose
        self.quiet = quiet
        self.suite = suite
        # suite lines pad the graph and config names to these widths (known before the suite starts),
        # so medians and rates line up down the page; longer names just push their own line
        self.name_width = min(name_width, 48)
        self.config_width = min(config_width, 32)

    def print(self, text: str = "") -> None:
        """One line, escaped (a multi-line text is printed line by line by its caller)."""
        self.out.write(escape(text) + "\n")
        self.out.flush()

    def header(self, *, configs: Sequence[str], graphs: int, warmup: int, iters: int, folder: str,
               notes: Sequence[str] = ()) -> None:
        if self.quiet:
            return
        self.print(f"hipdnn-trace: {graphs} graph(s) x {', '.join(configs)} | warmup {warmup}, "
                   f"iters {iters} | results in {folder}")
        for note in notes:
            self.print(f"note: {note}")

    def graph(self, index: int, total: int, g: GraphRun) -> None:
        if self.quiet:
            return
        if self.suite and not self.verbose:
            for line in self.lines(index, total, g):
                self.print(line)
        else:
            self.block(g)
        self.mismatches(g)

    # ------------------------------------------------------------ suite lines

    def lines(self, index: int, total: int, g: GraphRun) -> list[str]:
        prefix = f"[{index:>{len(str(total))}}/{total}]"
        if g.unrunnable:
            return [f"{prefix} ERROR  {g.name}: {g.error}"]
        out = []
        for c in g.configs:
            config = f"{c.config.name}{_engine(c)}"
            out.append(f"{prefix} {_status(c):<7} {g.name:<{self.name_width}}  {config:<{self.config_width}}  "
                       f"{_brief(g, c)}".rstrip())
        if g.saved_tensors and g.saved_tensors.startswith("failed: "):   # a block prints it among its notes
            out.append(f"{prefix} WARNING {g.name}: tensors not saved: {g.saved_tensors.removeprefix('failed: ')}")
        return out

    # ----------------------------------------------------------- graph block

    def block(self, g: GraphRun) -> None:
        from hipdnn_trace.bench.records import ERROR, FAILED, UNSUPPORTED
        from hipdnn_trace.bench.stats import timing_stats
        from hipdnn_trace.graph.ops import graph_bytes, graph_flops

        if g.unrunnable:
            self.print(f"== {g.name}: ERROR {g.error}")
            return
        graph = g.graph
        self.print(f"== {g.name}  ({g.source})  graph_id {g.graph_id}")
        self.print(f"   ops: {' -> '.join(graph.ops)}; {graph_flops(graph):.3g} FLOP, "
                   f"{graph_bytes(graph):.3g} B; load {fmt_ms(g.load_ms)} ms")
        for note in g.notes:
            first, *more = note.splitlines() or [""]
            self.print(f"   note: {first}")
            for line in more:   # e.g. a child's output tail
                self.print(f"         {line}")
        for c in g.configs:
            self.print(f"   [{c.config.name}{_engine(c)}] {_status(c)}")
            if c.status in (UNSUPPORTED, ERROR) and c.samples is None:
                self.print(f"      {c.error}")
                continue
            self.print(f"      init {fmt_ms(c.init_ms)} ms, end-to-end {fmt_ms(c.e2e_ms)} ms ({c.stop_reason})")
            if c.samples is not None and len(c.samples.timed_kernel_ms()):
                st = timing_stats(c.samples.statistic_kernel_ms())
                self.print(f"      kernel ms: median {fmt_ms(st['median'])} "
                           f"[95% CI {fmt_ms(st['median_ci_low'])}, {fmt_ms(st['median_ci_high'])}]  "
                           f"mean {fmt_ms(st['mean'])} +- {fmt_ms(st['std'])}  n {st['n']}")
                self.print(f"                 min {fmt_ms(st['min'])}  p5 {fmt_ms(st['p5'])}  "
                           f"p95 {fmt_ms(st['p95'])}  p99 {fmt_ms(st['p99'])}  max {fmt_ms(st['max'])}  "
                           f"cv {fmt_share(st['cv'] or 0)}")
                self.print(f"      {_throughput(g, st['median'])}")
            said = set()
            for v in g.validation:
                if v.config == c.config.name:
                    verdict = "PASS" if v.passed else "FAIL"
                    self.print(f"      {v.output} vs {v.against}: {verdict} {v.message}")
                    said.add(f"{v.output} vs {v.against}: {v.message}")
            if c.error and c.status == FAILED and c.error not in said:   # a failed check is its FAIL line
                self.print(f"      {c.error}")

    def mismatches(self, g: GraphRun) -> None:
        """The worst elements of each failing comparison, always shown, in the order they were ranked
        (error / allowed error, largest first) with that ratio as the last column. The counts and
        maxima are on the check's own line already; this heading does not repeat them."""
        for v in g.validation:
            if v.passed or not v.worst:
                continue
            order = ("by abs error (no error allowed: atol 0, rtol 0)" if not (v.atol or v.rtol)
                     else f"by error / allowed error (allowed: atol {v.atol:g} + rtol {v.rtol:g} * |expected|)")
            self.print(f"   MISMATCH {g.name} [{v.config}] {v.output} vs {v.against}: the {len(v.worst)} worst of "
                       f"{v.mismatches + v.nonfinite} failing element(s), {order}, largest first")
            one = v.against in ("reference", "golden")   # expected is the reference itself: one column
            expected = v.against if one else ("A" if v.against.startswith("A:") else v.against)
            reference = "" if one else f"{'reference':>14}"
            self.print(f"      {'index':<22}{'actual':>14}{expected:>14}{reference}"
                       f"{'abs err':>12}{'rel err':>12}{'err/allowed':>13}")
            for e in v.worst:
                ref = "" if one else ("-" if e["reference"] is None else f"{e['reference']:.6g}")
                self.print(f"      {str(list(e['index'])):<22}{e['actual']:>14.6g}{e['expected']:>14.6g}"
                           f"{ref:>{0 if one else 14}}{e['abs_err']:>12.3g}{e['rel_err']:>12.3g}{_over(e):>13}")

    def ab(self, line: str) -> None:
        if not self.quiet:
            self.print(line)

    REASON_WIDTH = 240

    def final(self, runs: Sequence[GraphRun], folder: str, elapsed_s: float) -> None:
        """The rows that did not pass (graph, config, status, median, throughput, the reason), then one
        count line; -q: the count line alone. Passed rows were each printed as they finished and are
        all in summary.csv: repeating them would bury the reasons, at any suite size."""
        from hipdnn_trace.bench.records import ERROR, FAILED, OK, UNSUPPORTED

        counts: Counter[str] = Counter()
        rows: list[tuple[str, ...]] = []
        for g in runs:
            if g.unrunnable:
                counts[ERROR] += 1
                rows.append((g.name, "-", "ERROR", "-", "-", "-", _one_line(g.error, self.REASON_WIDTH)))
            for c in g.configs:
                counts[c.status] += 1
                rows.append(_final_row(g, c, self.REASON_WIDTH))
        shown = [r for r in rows if r[2] != "ok"]
        if shown and not self.quiet:
            self.print()
            for line in table(shown, ("graph", "config", "status", "median ms", "compute", "memory",
                                      "reason")):
                self.print(line)
            if len(shown) < len(rows):
                self.print(f"({len(rows) - len(shown)} passed row(s) not repeated here: see summary.csv)")
        self.print(f"done in {elapsed_s:.1f}s: {counts[OK]} passed, {counts[FAILED]} failed validation, "
                   f"{counts[UNSUPPORTED]} unsupported, {counts[ERROR]} errored -> {folder}")


def _over(e: dict[str, Any]) -> str:
    """An element's error in multiples of what it was allowed (the worst list's order); inf for a
    NaN/Inf or unwritten value and for any error where nothing was allowed."""
    err, allowed = e.get("abs_err"), e.get("allowed")
    if allowed is None or err is None:
        return "-"
    if not math.isfinite(e["actual"]) or not math.isfinite(err) or (allowed <= 0 and err > 0):
        return "inf"
    return f"{err / allowed:.3g}" if allowed > 0 else "0"


def _one_line(text: str | None, width: int) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def _final_row(g: GraphRun, c: ConfigRun, width: int) -> tuple[str, ...]:
    from hipdnn_trace.bench.records import OK
    from hipdnn_trace.bench.stats import timing_stats
    from hipdnn_trace.graph.ops import graph_bytes

    median = compute = memory = "-"
    if c.samples is not None and len(c.samples.timed_kernel_ms()):
        med = timing_stats(c.samples.statistic_kernel_ms())["median"]
        if med:
            median = fmt_ms(med)
            secs = med * 1e-3
            compute = si_rate(g.graph_flops() / secs, "FLOPS") if g.graph is not None else "-"
            memory = si_rate(graph_bytes(g.graph) / secs, "B/s") if g.graph is not None else "-"
    reason = "" if c.status == OK else _one_line(c.error or c.validation, width)
    return (g.name, c.config.name + _engine(c), _status(c), median, compute, memory, reason)


def _status(c: ConfigRun) -> str:
    from hipdnn_trace.bench.records import ERROR, FAILED, OK, UNSUPPORTED

    return {OK: "ok", FAILED: "FAILED", UNSUPPORTED: "unsupp", ERROR: "ERROR"}.get(c.status, c.status)


def _engine(c: ConfigRun) -> str:
    return f" engine {c.engine}" if c.engine and c.engine not in c.config.name else ""


def _brief(g: GraphRun, c: ConfigRun) -> str:
    from hipdnn_trace.bench.records import FAILED
    from hipdnn_trace.bench.stats import timing_stats

    if c.samples is None or not len(c.samples.timed_kernel_ms()):
        return c.error or ""
    st = timing_stats(c.samples.statistic_kernel_ms())
    text = f"median {fmt_ms(st['median']):>8} ms  {_throughput(g, st['median'])}  {c.validation}"
    if c.status == FAILED and c.error:
        text += f": {c.error}"
    return text


def _throughput(g: GraphRun, median_ms: float | None) -> str:
    from hipdnn_trace.graph.ops import graph_bytes

    if not median_ms or g.graph is None:
        return ""
    flops, nbytes = g.graph_flops(), graph_bytes(g.graph)
    secs = median_ms * 1e-3
    return f"{si_rate(flops / secs, 'FLOPS'):>12}, {si_rate(nbytes / secs, 'B/s'):>10}"

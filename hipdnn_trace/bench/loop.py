"""The measurement loop: warmup, timed iterations, stopping rule, phase markers.

One iteration is: work that must stay untimed (``prepare_iteration``, e.g. an L2
flush), then ``timer.start(); execute(); timer.stop(); synchronize()``. The
host clock around start..synchronize gives ``host_ms``; ``kernel_ms`` is the
kernels' own GPU time where a kernel clock (CUPTI) runs, else the timer's event
span. Event times are read in batches after the iterations ran, and markers are
prepared before the loop, so an iteration costs little more than execute + sync.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from hipdnn_trace.backends.base import Session
from hipdnn_trace.bench.sampling import BackgroundSampler, Sampler
from hipdnn_trace.bench.stats import THROTTLE_RECOVERY_S, THROTTLE_THRESHOLD, relative_ci_width, throttled_flags
from hipdnn_trace.device.clock import now_ns
from hipdnn_trace.markers import Markers


@dataclass(frozen=True)
class LoopSettings:
    warmup: int = 10
    iters: int = 100
    min_time_ms: float = 0.0          # keep going until the timed iterations took this long
    max_rel_ci: float | None = None   # then until the median's 95% CI is this narrow (0.01 = 1%)
    max_iters: int | None = None      # hard cap for the two rules above (default 100 x iters)
    ci_check_every: int = 10
    # clocks (docs/timing.md "Clocks on every sample"): a timed sample whose SM clock is below
    # throttle_threshold x clock_reference_mhz is flagged throttled and left out of the statistic
    throttle_threshold: float = THROTTLE_THRESHOLD   # 0: no throttle detection
    clock_reference_mhz: float | None = None         # the locked clock, else the GPU's default clock
    keep_throttled: bool = False                     # keep throttled samples in the statistic

    def cap(self) -> int:
        return self.max_iters if self.max_iters is not None else self.iters * 100


@dataclass
class Samples:
    """Raw per-iteration numbers of one measurement (kept whole, never trimmed)."""

    phase: list[str] = field(default_factory=list)
    iteration: list[int] = field(default_factory=list)
    kernel_ms: list[float | None] = field(default_factory=list)   # None on side-block rows
    host_ms: list[float] = field(default_factory=list)
    start_ns: list[int] = field(default_factory=list)
    end_ns: list[int] = field(default_factory=list)
    extra: dict[str, list[float | None]] = field(default_factory=dict)   # e.g. sm_clock_mhz, span_ms
    timing: dict[str, Any] = field(default_factory=dict)   # which source each number has (run.json)

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` rows (a measurement thrown away to be taken again)."""
        for column in (self.phase, self.iteration, self.kernel_ms, self.host_ms, self.start_ns, self.end_ns,
                       *self.extra.values()):
            del column[n:]

    def timed(self, values: Sequence[float | None]) -> np.ndarray:
        """The timed rows of a column (``kernel_ms``, ``host_ms``...)."""
        return np.array([v for p, v in zip(self.phase, values) if p == "timed"], dtype=np.float64)

    def timed_kernel_ms(self) -> np.ndarray:
        return self.timed(self.kernel_ms)

    def throttled_timed(self) -> list[bool]:
        """Per timed row, whether it was flagged throttled (no flag column: none was)."""
        flags = self.extra.get("throttled") or []
        return [bool(flags[k]) if k < len(flags) else False for k, p in enumerate(self.phase) if p == "timed"]

    def statistic_kernel_ms(self) -> np.ndarray:
        """The timed kernel_ms the summary's statistic uses: throttled rows left out, unless the run keeps
        them (``timing["throttle"]["keep"]``) or every timed row was throttled (then all are kept, and the
        row's warnings say ``throttled``: a statistic of throttled samples says more than none)."""
        timed, flags = self.timed_kernel_ms(), np.asarray(self.throttled_timed(), dtype=bool)
        if not flags.any() or flags.all() or (self.timing.get("throttle") or {}).get("keep"):
            return timed
        return timed[~flags]

    def __len__(self) -> int:
        return len(self.phase)


@dataclass
class Phase:
    """A named host interval for the trace (init, warmup, execute...)."""

    name: str
    start_ns: int
    end_ns: int



#: Iterations of the side block that measures what the timed loop does not: the staged span
#: when the kernel clock times the loop, the unstaged latency when staged events do. A side block
#: runs a tenth of the timed iterations, at least SIDE_MIN and at most SIDE_ITERATIONS: its median
#: is a number beside kernel_ms, not the measurement, and at a fixed 20 the two side blocks cost
#: 40% of a 100-iteration loop's GPU time (docs/timing.md "Side blocks").
SIDE_ITERATIONS = 20
SIDE_MIN = 5
#: phase names of what runs after the timed loop (results/breakdown.py columns)
KERNEL_CLOCK_PHASE, SIDE_PHASE = "kernel clock", "side"


def side_iterations(timed: int) -> int:
    """Iterations of each side block after a loop of ``timed`` timed iterations."""
    return min(SIDE_ITERATIONS, max(SIDE_MIN, math.ceil(timed / 10)))


class KernelClock(Protocol):
    """Kernel durations per host window (``device.kernel_clock.KernelClock``)."""

    source: str

    def begin(self) -> None: ...

    def finish(self, starts: Sequence[int], ends: Sequence[int], iterations: Sequence[int]) -> Any: ...

    def abort(self) -> None: ...


class _Block:
    """Runs iterations of one phase into ``samples``. With ``events`` the timer's events bracket
    each execute and are read in batches after the iterations ran (``take_laps``), not one
    query per iteration; without, nothing but the host clock runs beside the execute (the
    kernel clock supplies kernel_ms after the loop)."""

    def __init__(self, session: Session, samples: Samples, events: bool = True) -> None:
        self.session = session
        self.samples = samples
        self.events = events
        self.batched = callable(getattr(session.timer, "take_laps", None))
        self.capacity = int(getattr(session.timer, "capacity", 1)) if self.batched else 1
        self._pending: list[int] = []

    def one(self, phase: str, i: int) -> None:
        session = self.session
        if self.events:
            timer = session.timer
            start = now_ns()
            timer.start()
            session.execute()
            timer.stop()
            session.synchronize()
            end = now_ns()
        else:
            start = now_ns()
            session.execute()
            session.synchronize()
            end = now_ns()
        samples = self.samples
        samples.phase.append(phase)
        samples.iteration.append(i)
        if not self.events:
            samples.kernel_ms.append(math.nan)
        elif self.batched:
            self._pending.append(len(samples.kernel_ms))
            samples.kernel_ms.append(math.nan)
        else:
            samples.kernel_ms.append(session.timer.elapsed_ms())
        samples.host_ms.append((end - start) / 1e6)
        samples.start_ns.append(start)
        samples.end_ns.append(end)
        if self._pending and len(self._pending) >= self.capacity:
            self.read()

    def read(self) -> None:
        """Fill in the event times of the iterations run since the last read."""
        if not self._pending:
            return
        laps = self.session.timer.take_laps()
        for k, ms in zip(self._pending, laps[-len(self._pending):]):
            self.samples.kernel_ms[k] = ms
        self._pending = []

    def run(self, phase: str, count: int) -> None:
        for i in range(count):
            self.session.prepare_iteration()
            self.one(phase, i)
        self.read()


def _staged(timer: Any) -> bool | None:
    """Whether the timer holds the stream while enqueueing (None: it has no hold)."""
    value = getattr(timer, "staged", None)
    return value if isinstance(value, bool) else None


def _set_staged(timer: Any, on: bool) -> None:
    if _staged(timer) is not None:
        timer.staged = on


def _extra(samples: Samples, key: str) -> list[float | None]:
    column = samples.extra.setdefault(key, [None] * len(samples))
    column.extend([None] * (len(samples) - len(column)))
    return column


def _timed_iterations(session: Session, settings: LoopSettings, markers: Markers, block: _Block,
                      on_iteration: Callable[[int], None] | None, host_stands_in: bool) -> None:
    """The timed iterations, until the stopping rule holds. ``host_stands_in``: with a kernel clock the
    sums come after the loop, so host time stands in for the CI rule's stability."""
    samples, cap, ranges = block.samples, settings.cap(), markers.iteration_ranges
    timed_ms = 0.0
    i = 0
    prepare, one, host_ms = session.prepare_iteration, block.one, samples.host_ms
    while i < cap:
        prepare()
        if ranges:
            markers.push_iteration(i)
        one("timed", i)
        if ranges:
            markers.pop_iteration()
        timed_ms += host_ms[-1]
        i += 1
        if on_iteration is not None:
            on_iteration(i)
        if i < settings.iters or timed_ms < settings.min_time_ms:
            continue
        if settings.max_rel_ci is None:
            break
        if i % settings.ci_check_every == 0:
            block.read()
            values = samples.host_ms if host_stands_in else samples.kernel_ms
            if relative_ci_width(samples.timed(values)) <= settings.max_rel_ci:
                break


def _sources_of_times(session: Session, samples: Samples, settings: LoopSettings, kernel_clock: KernelClock | None,
                      staged: Any, phases: list[Phase]) -> None:
    """After the loop: kernel_ms from the kernel clock (or the events), and the side blocks that
    measure latency and span; ``samples.timing`` names each number's source. Each part is a phase
    (``kernel clock``, ``side``), so a graph's breakdown accounts for it."""
    events = _Block(session, samples)
    kind = getattr(session.timer, "kind", "unknown")
    side = side_iterations(samples.phase.count("timed"))
    t0, rows, retimed = now_ns(), len(samples), False
    if kernel_clock is not None:
        retimed = not _apply_kernel_clock(samples, kernel_clock)
        applied = now_ns()
        phases.append(Phase(KERNEL_CLOCK_PHASE, t0, applied))
        t0 = applied   # the side phase starts here
        if retimed:
            _retime(events, samples, settings, bool(staged))
        elif kind != "host":
            _side_block(events, samples, "latency", False, side)
            if staged is not None:
                _side_block(events, samples, "span", True, side)
    else:
        samples.timing["kernel_ms"] = kind
        if _staged(session.timer):
            _copy_timed(samples, "span_ms")
            samples.timing["span_ms"] = kind
            _side_block(events, samples, "latency", False, side)
        elif kind != "host":   # plain events around the enqueue are the latency
            _copy_timed(samples, "latency_ms")
            samples.timing["latency_ms"] = kind
    if retimed or len(samples) > rows:
        phases.append(Phase(SIDE_PHASE, t0, now_ns()))


def run_loop(
    session: Session,
    settings: LoopSettings,
    markers: Markers,
    *,
    samplers: list[Sampler] | None = None,
    on_iteration: Callable[[int], None] | None = None,
    kernel_clock: KernelClock | None = None,
) -> tuple[Samples, list[Phase]]:
    """Warm up, then time iterations until the stopping rule holds.

    With a kernel clock, ``kernel_ms`` of an iteration is its kernels' summed GPU time and
    nothing but the host clock runs beside each execute; two side blocks after the loop
    measure the unstaged event span (``latency`` rows) and the staged one (``span`` rows).
    Without one, ``kernel_ms`` is the timer's event span and a ``latency`` side block
    measures the unstaged latency. ``samples.timing`` says which source each number has.
    """
    samples = Samples()
    phases: list[Phase] = []
    block = _Block(session, samples, events=kernel_clock is None)
    staged = _staged(session.timer)
    sampler = BackgroundSampler(samplers or [])
    sampler.start()
    if kernel_clock is not None:
        kernel_clock.begin()
    try:
        t0 = now_ns()
        markers.push("warmup")
        block.run("warmup", settings.warmup)
        markers.pop()
        phases.append(Phase("warmup", t0, now_ns()))

        cap = settings.cap()
        if markers.iteration_ranges:
            markers.prepare_iterations(min(cap, max(settings.iters, 1)))
        markers.resume()
        t0 = now_ns()
        markers.push("execute")
        _timed_iterations(session, settings, markers, block, on_iteration, host_stands_in=kernel_clock is not None)
        block.read()
        markers.pop()
        markers.pause()
        phases.append(Phase("execute", t0, now_ns()))
    except BaseException:
        sampler.stop()
        if kernel_clock is not None:
            kernel_clock.abort()
        raise

    try:
        _sources_of_times(session, samples, settings, kernel_clock, staged, phases)
    finally:
        _set_staged(session.timer, bool(staged))
        sampler.stop()
    samples.extra.update(sampler.columns(samples.start_ns, samples.end_ns))
    _flag_throttled(samples, settings)
    if sampler.error:
        samples.timing["sampler_error"] = sampler.error
    return samples, phases


def _flag_throttled(samples: Samples, settings: LoopSettings) -> None:
    """The ``throttled`` column from the rows' SM clocks, and how it was decided in ``samples.timing``
    (run.json's sessions). No clock column (CPU backends, no NVML): nothing is flagged or recorded."""
    sm = samples.extra.get("sm_clock_mhz")
    if sm is None:
        return
    samples.extra["throttled"] = throttled_flags(sm, samples.start_ns, samples.end_ns, settings.clock_reference_mhz,
                                                 settings.throttle_threshold, THROTTLE_RECOVERY_S)
    samples.timing["throttle"] = {"reference_mhz": settings.clock_reference_mhz,
                                  "threshold": settings.throttle_threshold, "recovery_s": THROTTLE_RECOVERY_S,
                                  "keep": settings.keep_throttled}


def _copy_timed(samples: Samples, key: str) -> None:
    column = _extra(samples, key)
    for k, p in enumerate(samples.phase):
        if p == "timed":
            column[k] = samples.kernel_ms[k]


def _apply_kernel_clock(samples: Samples, clock: KernelClock) -> bool:
    """kernel_ms := each iteration's kernel sum. False when some timed iteration has no kernel
    record (then those rows are dropped: the loop times them again)."""
    times = clock.finish(samples.start_ns, samples.end_ns, samples.iteration)
    samples.timing["kernel_clock"] = times.info
    timed = [times.sums_ms[k] for k, p in enumerate(samples.phase) if p == "timed"]
    if not timed or any(v is None for v in timed):
        missing = sum(v is None for v in timed)
        samples.timing["kernel_clock_fallback"] = (
            f"{missing} of {len(timed)} timed iterations had no kernel record from CUPTI; "
            "kernel_ms re-timed with the timer's events")
        return False
    for k, value in enumerate(times.sums_ms):
        samples.kernel_ms[k] = math.nan if value is None else value
    samples.timing["kernel_ms"] = clock.source
    return True


def _retime(block: _Block, samples: Samples, settings: LoopSettings, staged: bool) -> None:
    """The kernel clock missed iterations: drop the loop's rows and time the iterations again on
    the timer's own events (staged where it can)."""
    samples.truncate(0)
    _set_staged(block.session.timer, staged)
    block.run("warmup", min(settings.warmup, SIDE_ITERATIONS))
    start = len(samples)
    block.run("timed", max(settings.iters, 1))
    kind = getattr(block.session.timer, "kind", "unknown")
    samples.timing["kernel_ms"] = kind
    if _staged(block.session.timer):
        _extra(samples, "span_ms")[start:] = samples.kernel_ms[start:]
        samples.timing["span_ms"] = kind


def _side_block(block: _Block, samples: Samples, phase: str, staged: bool, count: int) -> None:
    """``count`` iterations on the timer's events with the hold switched on (``span`` rows) or off
    (``latency`` rows); their kernel_ms stays empty."""
    _set_staged(block.session.timer, staged)
    start = len(samples)
    block.run(phase, count)
    column = _extra(samples, f"{phase}_ms")
    for k in range(start, len(samples)):
        column[k] = samples.kernel_ms[k]
        samples.kernel_ms[k] = None   # side rows carry no kernel_ms
    kind = getattr(block.session.timer, "kind", "unknown")
    samples.timing[f"{phase}_ms"] = kind if staged else f"{kind} (unstaged)"


def stop_reason(samples: Samples, settings: LoopSettings) -> str:
    """Why the loop stopped, for run.json and verbose output."""
    timed = samples.timed_kernel_ms()
    n = len(timed)
    if settings.max_rel_ci is not None:
        width = relative_ci_width(timed)
        if width <= settings.max_rel_ci:
            return f"median CI within {settings.max_rel_ci:.2%} after {n} iterations"
        return f"hit the {settings.cap()}-iteration cap with median CI {width:.2%}" if math.isfinite(width) \
            else f"stopped after {n} iterations"
    return f"{n} iterations"

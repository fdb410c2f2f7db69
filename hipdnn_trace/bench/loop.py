"""The measurement loop: warmup, timed iterations, stopping rule, phase markers.

One iteration is: work that must stay untimed (``prepare_iteration``, e.g. an L2
flush), then ``timer.start(); execute(); timer.stop(); synchronize()``. The
device timer gives ``kernel_ms``; the host clock around start..synchronize gives
``host_ms``. Nothing else runs inside the timed region: records are appended to
preallocated lists and markers are prepared before the loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from hipdnn_trace.backends.base import Session
from hipdnn_trace.device.clock import now_ns
from hipdnn_trace.markers import Markers
from hipdnn_trace.results.stats import relative_ci_width


@dataclass(frozen=True)
class LoopSettings:
    warmup: int = 10
    iters: int = 100
    min_time_ms: float = 0.0          # keep going until the timed iterations took this long
    max_rel_ci: float | None = None   # then until the median's 95% CI is this narrow (0.01 = 1%)
    max_iters: int | None = None      # hard cap for the two rules above (default 100 x iters)
    ci_check_every: int = 10

    def cap(self) -> int:
        return self.max_iters if self.max_iters is not None else self.iters * 100


@dataclass
class Samples:
    """Raw per-iteration numbers of one measurement (kept whole, never trimmed)."""

    phase: list[str] = field(default_factory=list)
    iteration: list[int] = field(default_factory=list)
    kernel_ms: list[float] = field(default_factory=list)
    host_ms: list[float] = field(default_factory=list)
    start_ns: list[int] = field(default_factory=list)
    end_ns: list[int] = field(default_factory=list)
    extra: dict[str, list[float | None]] = field(default_factory=dict)   # e.g. sm_clock_mhz

    def timed_kernel_ms(self) -> np.ndarray:
        return np.array([k for p, k in zip(self.phase, self.kernel_ms) if p == "timed"], dtype=np.float64)

    def __len__(self) -> int:
        return len(self.phase)


@dataclass
class Phase:
    """A named host interval for the trace (init, warmup, execute...)."""

    name: str
    start_ns: int
    end_ns: int


Sampler = Callable[[], dict[str, float | None]]


def _one(session: Session, samples: Samples, phase: str, i: int, samplers: list[Sampler]) -> None:
    timer = session.timer
    start = now_ns()
    timer.start()
    session.execute()
    timer.stop()
    session.synchronize()
    end = now_ns()
    samples.phase.append(phase)
    samples.iteration.append(i)
    samples.kernel_ms.append(timer.elapsed_ms())
    samples.host_ms.append((end - start) / 1e6)
    samples.start_ns.append(start)
    samples.end_ns.append(end)
    for sampler in samplers:
        for key, value in sampler().items():
            samples.extra.setdefault(key, [None] * (len(samples) - 1)).append(value)


def run_loop(
    session: Session,
    settings: LoopSettings,
    markers: Markers,
    *,
    samplers: list[Sampler] | None = None,
    on_iteration: Callable[[int], None] | None = None,
) -> tuple[Samples, list[Phase]]:
    """Warm up, then time iterations until the stopping rule holds."""
    samplers = samplers or []
    samples = Samples()
    phases: list[Phase] = []

    t0 = now_ns()
    markers.push("warmup")
    for i in range(settings.warmup):
        session.prepare_iteration()
        _one(session, samples, "warmup", i, samplers)
    markers.pop()
    phases.append(Phase("warmup", t0, now_ns()))

    cap = settings.cap()
    markers.prepare_iterations(min(cap, max(settings.iters, 1)))
    markers.resume()
    t0 = now_ns()
    markers.push("execute")
    timed_ms = 0.0
    i = 0
    while i < cap:
        session.prepare_iteration()
        markers.push_iteration(i)
        _one(session, samples, "timed", i, samplers)
        markers.pop()
        timed_ms += samples.host_ms[-1]
        i += 1
        if on_iteration is not None:
            on_iteration(i)
        if i < settings.iters or timed_ms < settings.min_time_ms:
            continue
        if settings.max_rel_ci is None:
            break
        if i % settings.ci_check_every == 0 and relative_ci_width(samples.timed_kernel_ms()) <= settings.max_rel_ci:
            break
    markers.pop()
    markers.pause()
    phases.append(Phase("execute", t0, now_ns()))
    return samples, phases


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

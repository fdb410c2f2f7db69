"""The measurement loop's own Python bookkeeping per iteration, on any machine (no GPU needed).

``run_loop`` drives a session whose ``execute``/``synchronize`` do nothing and a kernel clock that
answers at once, so what is left is the loop itself: host clock reads, records, markers, the
stopping rule, and (second row) the isolated child's reporting markers, progress callback and a
clock sampler. Compared with a bare ``execute(); synchronize()`` loop over the same session.
What this does not contain is everything on the GPU side (CUPTI's per-launch cost, launch and
synchronization latency): ``loop_cost_probe.py`` and ``harness_overhead.py`` measure those on a GPU.

Run: ``python benchmarks/loop_bookkeeping.py [N]`` (best of 5 rounds of N iterations; prints us).
"""

from __future__ import annotations

import platform
import sys
import time

from hipdnn_trace.bench.isolation import _ReportingMarkers
from hipdnn_trace.bench.loop import LoopSettings, run_loop
from hipdnn_trace.device.kernel_clock import KernelTimes
from hipdnn_trace.markers import Markers
from hipdnn_trace.results.metadata import cpu_model


class NoOpStagedTimer:
    """Shaped like cuda.StagedEventTimer (staged flag, batched laps) and doing nothing."""

    kind = "cuda-event-staged"
    staged = True
    capacity = 256

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def take_laps(self) -> list[float]:
        return []

    def elapsed_ms(self) -> float:
        return 0.0


class NoOpSession:
    engine = None

    def __init__(self) -> None:
        self.timer = NoOpStagedTimer()

    def prepare_iteration(self) -> None:
        pass

    def execute(self) -> None:
        pass

    def synchronize(self) -> None:
        pass


class InstantKernelClock:
    """Answers every window with one 1 us kernel, at once."""

    source = "cupti-activity"

    def begin(self) -> None:
        pass

    def finish(self, starts, ends, iterations) -> KernelTimes:
        return KernelTimes([0.001] * len(starts), [1] * len(starts), {})

    def abort(self) -> None:
        pass


def best_us(fn, n: int) -> float:
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter_ns()
        fn()
        best = min(best, (time.perf_counter_ns() - t0) / n / 1e3)
    return best


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 20000
    session = NoOpSession()
    last = [0.0]

    def progress(i: int) -> None:   # the isolated child's: a report at most every 0.2 s
        now = time.monotonic()
        if now - last[0] >= 0.2:
            last[0] = now

    def sampler() -> dict[str, float | None]:
        return {"sm_clock_mhz": 1980.0, "mem_clock_mhz": 2619.0}

    def bare() -> None:
        for _ in range(n):
            session.execute()
            session.synchronize()

    untooled = Markers()   # what NVTX markers are without an attached tool: no per-iteration ranges
    untooled.iteration_ranges = False
    loop = best_us(lambda: run_loop(session, LoopSettings(warmup=0, iters=n), Markers(),
                                    kernel_clock=InstantKernelClock()), n)
    child = best_us(lambda: run_loop(session, LoopSettings(warmup=0, iters=n),
                                     _ReportingMarkers(untooled, lambda kind, value: None), samplers=[sampler],
                                     on_iteration=progress, kernel_clock=InstantKernelClock()), n)
    tooled = best_us(lambda: run_loop(session, LoopSettings(warmup=0, iters=n),
                                      _ReportingMarkers(Markers(), lambda kind, value: None), samplers=[sampler],
                                      on_iteration=progress, kernel_clock=InstantKernelClock()), n)
    base = best_us(bare, n)
    print(f"# loop_bookkeeping ({cpu_model()}, Python {platform.python_version()}, {n} iterations, best of 5)")
    print("| loop | us/iteration | over bare |")
    print("|---|---|---|")
    print(f"| bare execute+sync (no-op session) | {base:.2f} | - |")
    print(f"| run_loop, kernel clock | {loop:.2f} | +{loop - base:.2f} |")
    print(f"| + isolated child's markers (no tool attached), progress, a clock sampler | {child:.2f} | "
          f"+{child - base:.2f} |")
    print(f"| same with per-iteration ranges (a tool attached) | {tooled:.2f} | +{tooled - base:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

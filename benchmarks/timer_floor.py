"""The event timer's own floor on an NVIDIA GPU: what does it report for (nearly) nothing?

docs/benchmarks.md finds staged event time = CUPTI kernel time + a fixed ~2.3 us, for
1 us and 75 us kernels alike. This script splits that constant: for plain and staged
events, the median over ITERS iterations of

* an empty region (start and stop events back to back, nothing between),
* a region around one no-op kernel (the hold kernel, launched with its flag already set,
  so it returns at once), whose duration CUPTI's activity API gives.

``region - CUPTI kernel`` is what one measurement adds to the work it times; the empty
region shows how much of that is the two events themselves and how much is the kernel
launch (the GPU front end dispatching a grid), which no event pair can exclude.

Run on the GPU machine: ``python benchmarks/timer_floor.py`` (prints a Markdown table).
"""

from __future__ import annotations

import datetime
import sys
from collections.abc import Callable

import numpy as np

from hipdnn_trace.device import cuda

WARMUP, ITERS = 20, 200
NO_OP_FLAG = 0x7FFFFFFF   # >= every generation the gate uses: the hold kernel exits at once


def _timed(timer: cuda.EventTimer, stream: cuda.Stream, body: Callable[[], None], n: int) -> list[float]:
    out = []
    for i in range(WARMUP + n):
        timer.start()
        body()
        timer.stop()
        stream.synchronize()
        if i >= WARMUP:
            out.append(timer.elapsed_ms() * 1e3)
    return out


def _cupti_kernel_us(stream: cuda.Stream, launch: Callable[[], None], n: int) -> float:
    from cupti import cupti

    kind = cupti.ActivityKind.CONCURRENT_KERNEL
    durations: list[float] = []

    def completed(activities: list) -> None:
        durations.extend((int(a.end) - int(a.start)) / 1e3 for a in activities
                         if a.kind == kind and a.name == cuda.HOLD_KERNEL)

    cupti.activity_register_callbacks(lambda: (8 << 20, 0), completed)
    cupti.activity_enable(kind)
    for _ in range(n):
        launch()
        stream.synchronize()
    cupti.activity_flush_all(1)
    cupti.activity_disable(kind)
    return float(np.median(durations)) if durations else float("nan")


def main() -> int:
    cuda.set_device(0)
    info = cuda.device_info(0)
    stream = cuda.Stream()
    no_op = cuda.StallGate(0)
    no_op._flag[0] = NO_OP_FLAG          # never released: the flag already satisfies any generation
    launch = lambda: no_op.arm(stream.handle)
    kernel_us = _cupti_kernel_us(stream, launch, ITERS)
    print(f"Timer floor, {info.name}, {datetime.date.today()}, `python benchmarks/timer_floor.py` "
          f"({WARMUP} warmup + {ITERS} iterations, medians, us); CUPTI no-op kernel duration {kernel_us:.2f} us\n")
    print("| timer | empty region | region with one no-op kernel | region - CUPTI kernel |")
    print("|---|---|---|---|")
    for name, timer in (("events", cuda.EventTimer(stream.handle)),
                        ("staged", cuda.StagedEventTimer(stream.handle, 0))):
        try:
            empty = float(np.median(_timed(timer, stream, lambda: None, ITERS)))
            one = float(np.median(_timed(timer, stream, launch, ITERS)))
        finally:
            timer.close()
        print(f"| {name} | {empty:.2f} | {one:.2f} | {one - kernel_us:+.2f} |", flush=True)
    no_op.close()
    stream.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())

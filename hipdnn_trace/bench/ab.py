"""Interleaved A/B: two prepared sessions timed in alternating blocks (ABBA) until decided.

Timing A fully and then B lets everything that drifts in between (other jobs, clocks, heat,
the allocator) read as a difference; an A/A on a shared 2-core box gave 8-10 of 36 graphs a
95% interval excluding 1.0 that way. Here both sessions are prepared and bound on the same
inputs, then blocks run in the order A B B A, B A A B, A B B A... Each block is the measurement
loop (``run_loop``, so its samples carry what every measurement carries): its own ``--warmup``
iterations, then ``block_iters`` timed ones. After planned
rounds ``bench.paired`` turns the rounds into an interval on B/A and a verdict, and the graph
stops when the verdict is decided or at the cap.

Interleaving cannot remove a difference that belongs to the two sessions themselves: their buffers
sit at different device addresses (allocated one after the other); on an H200 an A/A of a
memory-bound cuDNN graph read B/A = 1.028 [1.0277, 1.0291] with the same engine on both sides.
So every ``ABPlan.fresh_every`` rounds both sessions are closed and prepared and bound again, the
preparation order following the same ABBA pattern over re-creations (A first, B first, B first,
A first, ...): the allocator hands each side the other's addresses about half the time, and the
placement becomes part of what the rounds sample (noise in the interval, not a bias in its centre).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from hipdnn_trace.bench.loop import LoopSettings, Phase, Sampler, Samples, run_loop
from hipdnn_trace.bench.paired import UNDECIDED, ABPlan, ABResult, interval, round_log_ratio, verdict
from hipdnn_trace.bench.records import ConfigRun
from hipdnn_trace.markers import Markers

#: block order of even rounds (A B B A) and odd rounds (B A A B): a linear drift inside a round
#: cancels, and so does whatever the end of a round costs the block after it (on the 2-core box
#: A's blocks at the start of A-first rounds ran 10% slower: A B B A A B B A repeats A there)
ORDERS = ((0, 1, 1, 0), (1, 0, 0, 1))

#: which arm is prepared first at the k-th preparation of the pair (k = 0: the first opening), by
#: k % 4: A B, B A, B A, A B. With a re-creation every round a plain alternation would always
#: prepare A first in the rounds where A's block leads (ORDERS); this pattern meets each block order
#: with each preparation order once every four rounds, and a drift in placement cancels as in ABBA.
PREPARATION_ORDERS = ((0, 1), (1, 0), (1, 0), (0, 1))


@dataclass
class Arm:
    """One side of the A/B: its record, its open session and what its blocks gave so far."""

    run: ConfigRun
    range_name: str
    session: Any = None
    clock: Any = None                 # a KernelClock, when it times this session
    phase: str = "init"               # where an error happened (the record's message)
    started_ns: int = 0
    samples: Samples = field(default_factory=Samples)
    blocks: list[np.ndarray] = field(default_factory=list)   # each block's timed kernel_ms (the statistic's)
    counters: dict[str, int] = field(default_factory=dict)   # rows so far per phase (iteration numbers)
    engine: Any = None                # what its session was prepared with: a re-creation reuses it (no autotune)


class Sessions(Protocol):
    """How ``interleave`` re-creates an arm's session (bench/graph_run.py: the backend's prepare and
    bind on the same inputs and engine)."""

    def close(self, arm: Arm) -> None: ...

    def open(self, arm: Arm) -> None: ...


class BlockFailure(Exception):
    """A block of one arm raised: ``index`` says which arm, ``cause`` what."""

    def __init__(self, index: int, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.index, self.cause = index, cause


def min_rounds(plan: ABPlan, loop: LoopSettings) -> int:
    """Rounds before the first look: the plan's minimum, and enough for ``--iters`` per config."""
    per_round = 2 * plan.block_iters
    return min(plan.max_rounds, max(plan.min_rounds, math.ceil(loop.iters / per_round)))


def interleave(arms: Sequence[Arm], plan: ABPlan, loop: LoopSettings, markers: Markers, *,
               samplers: Sequence[Sampler] = (), on_iteration: Callable[[int], None] | None = None,
               clock: Callable[[], float] = time.monotonic, sessions: Sessions | None = None) -> ABResult:
    """Run ABBA rounds until the verdict is decided at a look or a cap is hit; each arm's samples
    and phases are filled as it goes. With ``sessions``, both sessions are re-created before every
    ``plan.fresh_every``-th round (never inside one: rounds stay the paired units). A block or a
    re-creation that raises ends the A/B with :class:`BlockFailure`."""
    first = min_rounds(plan, loop)
    looks, confidence = set(plan.looks(first)), plan.confidence(first)
    started = clock()
    log_ratios: list[float] = []
    skipped = 0
    stop, rounds = f"cap of {plan.max_rounds} rounds", 0
    ratio = low = high = math.nan
    recreated = 0
    for r in range(plan.max_rounds):
        if sessions is not None and plan.fresh_every and r and r % plan.fresh_every == 0:
            recreated += 1
            recreate(arms, sessions, recreated)
        for pos, which in enumerate(ORDERS[r % 2]):
            try:
                _block(arms[which], 4 * r + pos, plan, loop, markers, samplers, on_iteration)
            except Exception as exc:   # the arm's record says what; the other arm keeps its samples
                raise BlockFailure(which, exc) from exc
        rounds = r + 1
        value = _round(arms)
        if value is None:
            skipped += 1
        else:
            log_ratios.append(value)
        timed_out = plan.max_seconds > 0 and clock() - started >= plan.max_seconds
        if rounds in looks or timed_out:
            ratio, low, high = interval(log_ratios, confidence)
            decided = verdict(low, high, plan.band)
            if decided != UNDECIDED and rounds >= first:
                stop = f"decided after {rounds} rounds"
                break
            if timed_out:
                stop = f"time cap of {plan.max_seconds:g} s after {rounds} rounds"
                break
    final = verdict(low, high, plan.band) if rounds >= first else UNDECIDED
    if skipped:
        stop += f"; {skipped} round(s) without a positive median left out"
    return ABResult(config_a=arms[0].run.config.name, config_b=arms[1].run.config.name, ratio=ratio,
                    ci_low=low, ci_high=high, verdict=final, rounds=rounds, blocks=4 * rounds,
                    block_iters=plan.block_iters, band=plan.band, confidence=confidence, stop=stop,
                    recreated=recreated, log_ratios=log_ratios)


def recreate(arms: Sequence[Arm], sessions: Sessions, count: int) -> None:
    """Close both sessions, then prepare and bind them again in the ``count``-th preparation order
    (PREPARATION_ORDERS), so the allocator's addresses change sides. Both are reopened even when
    one fails (the other keeps a session to fetch from); the first failure is raised after."""
    for arm in arms:
        sessions.close(arm)
    failure: BlockFailure | None = None
    for which in PREPARATION_ORDERS[count % len(PREPARATION_ORDERS)]:
        try:
            sessions.open(arms[which])
        except Exception as exc:   # the arm's record says what
            failure = failure or BlockFailure(which, exc)
    if failure is not None:
        raise failure


def _round(arms: Sequence[Arm]) -> float | None:
    """The last round's log ratio, or None when a block had no positive finite median."""
    a, b = arms[0].blocks[-2:], arms[1].blocks[-2:]
    medians = [float(np.median(x)) if len(x) else math.nan for x in (*a, *b)]
    if not all(math.isfinite(m) and m > 0 for m in medians):
        return None
    return round_log_ratio(a, b)


def _block(arm: Arm, index: int, plan: ABPlan, loop: LoopSettings, markers: Markers,
           samplers: Sequence[Sampler], on_iteration: Callable[[int], None] | None) -> None:
    """One block of ``arm``: its own ``--warmup`` iterations (the switch from the other session is
    paid there, not in the timed ones), then ``block_iters`` timed ones, more until ``block_ms``
    passed (a block shorter than a scheduler slice is all or nothing of a neighbour's burst); the
    run's clock rules (throttle threshold, reference clock) hold in every block."""
    settings = replace(loop, iters=plan.block_iters, min_time_ms=plan.block_ms, max_rel_ci=None, max_iters=None)
    done = arm.counters.get("timed", 0)
    progress = None if on_iteration is None else (lambda i: on_iteration(done + i))
    arm.phase = "execute"
    with markers.range(arm.range_name):
        samples, phases = run_loop(arm.session, settings, markers, samplers=list(samplers),
                                   on_iteration=progress, kernel_clock=arm.clock)
    merge_block(arm, samples, phases, index)


def merge_block(arm: Arm, block: Samples, phases: list[Phase], index: int) -> None:
    """Append a block's rows to the arm's samples: iterations numbered on within each phase, every
    column padded, and the block's index in the ``block`` column."""
    s, n0, n = arm.samples, len(arm.samples), len(block)
    for phase, i in zip(block.phase, block.iteration):
        s.phase.append(phase)
        s.iteration.append(arm.counters.get(phase, 0) + i)
    for phase in set(block.phase):
        arm.counters[phase] = arm.counters.get(phase, 0) + block.phase.count(phase)
    s.kernel_ms.extend(block.kernel_ms)
    s.host_ms.extend(block.host_ms)
    s.start_ns.extend(block.start_ns)
    s.end_ns.extend(block.end_ns)
    for key in dict.fromkeys([*s.extra, *block.extra, "block"]):
        column = s.extra.setdefault(key, [])
        column.extend([None] * (n0 - len(column)))
        values = [index] * n if key == "block" else block.extra.get(key, [])
        column.extend(list(values) + [None] * (n - len(values)))
    s.timing.update(block.timing)
    arm.run.phases.extend(phases)
    arm.blocks.append(block.statistic_kernel_ms())   # throttled samples left out, as the summary does

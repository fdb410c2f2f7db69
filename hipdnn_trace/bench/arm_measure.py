"""One configuration's session, start to end: build the plan and bind (init), time the loop, fetch
the outputs, close; and an A/B pair's two sessions timed in interleaved blocks (bench/ab.py).

A failure in any phase becomes the configuration's status and a one-line message naming the phase,
never an exception out of here: the graph's other configurations and the suite go on.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hipdnn_trace import backends
from hipdnn_trace.backends.base import Engine
from hipdnn_trace.bench import ab, engines as engine_choice
from hipdnn_trace.bench.ab import Arm
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.device_data import is_device_tensor
from hipdnn_trace.bench.loop import Phase, run_loop, stop_reason
from hipdnn_trace.bench.records import ERROR, OK, UNSUPPORTED, ConfigRun, GraphRun
from hipdnn_trace.bench.run_settings import RunSettings
from hipdnn_trace.device.clock import now_ns
from hipdnn_trace.device.kernel_clock import KernelClock
from hipdnn_trace.errors import UnsupportedError, UserError, describe
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.markers import Markers, graph_range_name

__all__ = ["measure", "measure_ab"]


def _open(graph: Graph, arm: Arm, engine: Engine | None, inputs: dict[int, np.ndarray], settings: RunSettings,
          markers: Markers, load_ms: float) -> None:
    """Autotune (when asked), build the plan (timed as init) and bind the inputs: ``arm.session``."""
    run, cfg = arm.run, arm.run.config
    backend = backends.get(cfg.backend)
    options = cfg.run_options(settings.options)
    arm.started_ns = now_ns()
    if cfg.autotune:
        arm.phase = "autotune"
        chosen, tried = engine_choice.autotune(backend, graph, options, inputs, markers)
        run.info["autotune"] = [
            {"engine": e.label(), "median_ms": ms, "note": note} for e, ms, note in tried
        ]
        if chosen is not None:
            engine = chosen
            run.engine = f"{chosen.label()} (autotuned)"
        arm.started_ns = now_ns()   # autotuning is not part of this config's init
    arm.engine = engine
    run.init_ms = load_ms + _prepare(graph, arm, inputs, settings, markers)
    if arm.session.engine is not None:
        # what actually runs: a soft preference may have fallen back to another engine
        actual = arm.session.engine.label()
        requested = run.engine.removesuffix(" (autotuned)")
        if requested and actual != requested:
            run.info["requested_engine"] = requested
            run.engine = actual
        elif not run.engine:
            run.engine = actual


def _prepare(graph: Graph, arm: Arm, inputs: dict[int, np.ndarray], settings: RunSettings,
             markers: Markers) -> float:
    """Build the plan for ``arm.engine`` (an init phase) and bind the inputs (a bind phase), the
    kernel clock chosen for the new session; the plan build's milliseconds."""
    run = arm.run
    options = run.config.run_options(settings.options)
    arm.phase = "init"
    markers.push("init")
    t0 = now_ns()
    try:
        arm.session = session = backends.get(run.config.backend).prepare(graph, arm.engine, options)
    finally:   # a build the library refuses took its time too (cuDNN trying engine after engine)
        t1 = now_ns()
        markers.pop()
        run.phases.append(Phase("init", t0, t1))
    arm.phase = "bind"
    t2 = now_ns()
    session.bind(inputs)
    run.phases.append(Phase("bind", t2, now_ns()))
    arm.phase = "execute"
    arm.clock = _kernel_clock(settings, session, run)
    return (t1 - t0) / 1e6


@dataclass
class _FreshSessions:
    """``ab.Sessions`` for an interleaved A/B: close an arm's session, and prepare and bind it again on
    the same inputs with the engine its first opening chose (an autotune is not repeated)."""

    graph: Graph
    inputs: dict[int, np.ndarray]
    settings: RunSettings
    markers: Markers

    def close(self, arm: Arm) -> None:
        _close(arm)   # a failed close is recorded in run.info; the next prepare says whether it matters

    def open(self, arm: Arm) -> None:
        with self.markers.range(arm.range_name):
            _prepare(self.graph, arm, self.inputs, self.settings, self.markers)


def _time(graph: Graph, arm: Arm, settings: RunSettings, markers: Markers,
          on_iteration: Callable[[int], None] | None) -> None:
    """The configuration's own warmup and timed loop, with the profilers' hooks around it."""
    run = arm.run
    for hook in settings.hooks:
        hook.before_loop(graph, run)
    samples, phases = run_loop(arm.session, settings.loop, markers, samplers=list(settings.samplers),
                               on_iteration=on_iteration, kernel_clock=arm.clock)
    run.info["timing"] = {**run.info.get("timing", {}), **samples.timing}
    run.samples = samples          # hooks (CUPTI) add per-iteration columns to these
    run.phases.extend(phases)
    for hook in settings.hooks:
        hook.after_loop(graph, run)
    run.stop_reason = stop_reason(samples, settings.loop)


def _finish(graph: Graph, arm: Arm, inputs: dict[int, np.ndarray], load_ms: float, keep_float64: bool) -> None:
    """Fetch the outputs (on the device where the inputs are) and the session's own facts."""
    run, session = arm.run, arm.session
    arm.phase = "fetch"
    t0 = now_ns()
    wanted = [t.uid for t in graph.output_tensors]
    device_fetch = getattr(session, "fetch_device", None)
    on_device = device_fetch is not None and any(is_device_tensor(v) for v in inputs.values())
    run.outputs = device_fetch(wanted) if on_device else session.fetch(wanted)
    own = getattr(session, "float64_outputs", None)
    if own is not None and keep_float64:
        run.float64, run.stored = own([t.uid for t in graph.output_tensors])
    run.phases.append(Phase("fetch", t0, now_ns()))
    run.info.update(session.info())
    run.e2e_ms = load_ms + (now_ns() - arm.started_ns) / 1e6


@contextlib.contextmanager
def _failures(arm: Arm) -> Iterator[None]:
    """A configuration's failure becomes its status and a one-line message, never a crash."""
    run = arm.run
    try:
        yield
    except UnsupportedError as exc:
        run.status, run.error = UNSUPPORTED, str(exc)
    except UserError as exc:
        run.status, run.error = ERROR, f"{arm.phase}: {exc}"
    except Exception as exc:   # backend failures are results, not crashes
        run.status, run.error = ERROR, f"{arm.phase}: {describe(exc)}"
        run.info["traceback"] = traceback.format_exc(limit=8)


def _close(arm: Arm) -> None:
    """Free the session (a ``close`` phase: freeing a plan and its buffers can take milliseconds)."""
    if arm.session is not None:
        t0 = now_ns()
        try:
            arm.session.close()
        except Exception as exc:   # a failed close must not hide the result
            arm.run.info["close_error"] = describe(exc)
        arm.session = None
        arm.run.phases.append(Phase("close", t0, now_ns()))


def _arm(graph: Graph, cfg: Config, engine: Engine | None) -> Arm:
    return Arm(ConfigRun(config=cfg, engine=engine.label() if engine else ""),
               graph_range_name(graph.graph_id, cfg.name))


def measure(graph: Graph, cfg: Config, engine: Engine | None, inputs: dict[int, np.ndarray],
             settings: RunSettings, markers: Markers, load_ms: float, on_iteration: Callable[[int], None] | None,
             keep_float64: bool = False) -> ConfigRun:
    arm = _arm(graph, cfg, engine)
    try:
        with _failures(arm), markers.range(arm.range_name):
            _open(graph, arm, engine, inputs, settings, markers, load_ms)
            _time(graph, arm, settings, markers, on_iteration)
            _finish(graph, arm, inputs, load_ms, keep_float64)
    finally:
        _close(arm)
    return arm.run


def measure_ab(graph: Graph, pair: Sequence[tuple[Config, Engine | None]], inputs: dict[int, np.ndarray],
                settings: RunSettings, markers: Markers, load_ms: float,
                on_iteration: Callable[[int], None] | None, own: bool, run: GraphRun) -> list[ConfigRun]:
    """Both configurations prepared and bound (again between rounds, ``--ab-fresh-sessions``), timed in
    ABBA blocks until the verdict is decided (bench/ab.py), then fetched; ``run.ab`` holds the verdict."""
    assert settings.ab_plan is not None
    arms = [_arm(graph, cfg, engine) for cfg, engine in pair]
    try:
        for arm, (_, engine) in zip(arms, pair):
            with _failures(arm), markers.range(arm.range_name):
                _open(graph, arm, engine, inputs, settings, markers, load_ms)
        if all(arm.session is not None and arm.run.status == OK for arm in arms):
            _interleave(arms, settings, markers, on_iteration, run,
                        _FreshSessions(graph, inputs, settings, markers))
        for arm in arms:
            if arm.session is not None and arm.run.status == OK:
                with _failures(arm), markers.range(arm.range_name):
                    _finish(graph, arm, inputs, load_ms, own and arm.run.config.backend == "reference")
    finally:
        for arm in arms:
            _close(arm)
    return [arm.run for arm in arms]


def _interleave(arms: list[Arm], settings: RunSettings, markers: Markers,
                on_iteration: Callable[[int], None] | None, run: GraphRun, sessions: _FreshSessions) -> None:
    assert settings.ab_plan is not None
    try:
        run.ab = ab.interleave(arms, settings.ab_plan, settings.loop, markers, samplers=settings.samplers,
                               on_iteration=on_iteration, sessions=sessions)
    except ab.BlockFailure as failure:
        with _failures(arms[failure.index]):
            raise failure.cause from None
        failed = arms[failure.index]
        where = "a block" if failed.phase == "execute" else f"{failed.phase} of its re-created session"
        run.notes.append(f"interleaved A/B stopped: {failed.run.config.name} failed in {where}")
    for arm in arms:
        arm.run.samples = arm.samples
        arm.run.info["timing"] = {**arm.run.info.get("timing", {}), **arm.samples.timing}
        plan = settings.ab_plan
        arm.run.stop_reason = (f"interleaved A/B: {len(arm.blocks)} blocks of >= {plan.block_iters} iterations "
                               f"and {plan.block_ms:g} ms; {run.ab.stop if run.ab else 'stopped by a failure'}"
                               f"{f'; sessions re-created {run.ab.recreated} times' if run.ab else ''}")


def _kernel_clock(settings: RunSettings, session: Any, run: ConfigRun) -> KernelClock | None:
    """The kernel clock when it can time this session; else None, with the reason in run.info."""
    if settings.kernel_clock is None:
        return None
    reason = settings.kernel_clock.unavailable(getattr(session.timer, "kind", None))
    if reason is None:
        return settings.kernel_clock
    if settings.require_kernel_clock:
        raise UserError(f"--timing kernel: {reason}")
    run.info["timing"] = {"kernel_clock_unavailable": reason}
    return None

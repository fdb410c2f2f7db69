"""Run one graph on every configuration: load, build, bind, warm up, time, fetch, validate.

Failures stay inside the graph's record: a bad file, an unsupported op or a
backend error becomes a status and a one-line message, and the suite goes on.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hipdnn_trace import backends
from hipdnn_trace.backends.base import Engine, RunOptions
from hipdnn_trace.backends.reference import executor
from hipdnn_trace.backends.reference.budget import DEFAULT_MAX_REFERENCE_S
from hipdnn_trace.bench import ab, engines as engine_choice
from hipdnn_trace.bench.ab import Arm
from hipdnn_trace.bench.attention_inputs import undefined_elements
from hipdnn_trace.bench.bundle_support import check_support, gpu_arch
from hipdnn_trace.bench.config import ENGINE_ALL, Config
from hipdnn_trace.bench.device_data import is_device_tensor, release_device_memory, to_host as _host
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.bench.loop import LoopSettings, Phase, Sampler, run_loop, stop_reason
from hipdnn_trace.bench.output_check import judge_output
from hipdnn_trace.bench.paired import ABPlan
from hipdnn_trace.bench.recheck import recheck_failures
from hipdnn_trace.bench.records import ERROR, FAILED, OK, UNSUPPORTED, ConfigRun, GraphRun, ValidationRecord
from hipdnn_trace.bench.reference_cache import ReferenceCache
from hipdnn_trace.bench.stages import with_stages
from hipdnn_trace.bench.verdict import (
    SUPPORT,
    TIME,
    Limits,
    graph_notes,
    host_memory_refusal,
    oracle_memory_note,
    refusal,
)
from hipdnn_trace.device.clock import now_ns
from hipdnn_trace.device.kernel_clock import KernelClock
from hipdnn_trace.errors import GraphError, UnsupportedError, UserError, describe
from hipdnn_trace.graph.bundles import BundleRef, golden_data, support_note
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.graph.ops import graph_flops
from hipdnn_trace.graph.sources import GraphSource
from hipdnn_trace.markers import Markers, graph_range_name


class Hooks(Protocol):
    """In-process profilers: called around each configuration's warmup + timed loop."""

    def before_loop(self, graph: Graph, run: ConfigRun) -> None: ...

    def after_loop(self, graph: Graph, run: ConfigRun) -> None: ...


@dataclass
class RunSettings:
    loop: LoopSettings = field(default_factory=LoopSettings)
    options: RunOptions = field(default_factory=RunOptions)
    seed: int = 0
    validate: str = "reference"            # reference | none
    golden: Path | None = None
    atol: float | None = None
    rtol: float | None = None
    save_tensors: Path | None = None
    samplers: Sequence[Sampler] = ()
    hooks: Sequence[Hooks] = ()
    ab: bool = False                       # the two configs are an A/B pair
    ab_plan: ABPlan | None = None          # with ab: time them interleaved in ABBA blocks (None: one after the other)
    keep_outputs: bool = False             # an isolated child sends outputs back (split A/B)
    allow_unknown: bool = False            # unknown graph fields: warnings (notes) instead of errors
    kernel_clock: KernelClock | None = None   # kernel_ms from CUPTI kernel records (--timing kernel/auto)
    require_kernel_clock: bool = False     # --timing kernel: a session it cannot time is an error
    max_reference_s: float = DEFAULT_MAX_REFERENCE_S   # one float64 evaluation at most (0: no limit)
    reference_cache: ReferenceCache | None = None   # --reference-cache: float64 outputs kept on disk
    reference_device: str = "cpu"          # where the validating reference runs: cpu | cuda (--reference-device)


def _load(source: GraphSource, run: GraphRun, allow_unknown: bool = False) -> Graph | None:
    t0 = now_ns()
    try:
        graph = load_bytes(source.read(), source.name, allow_unknown=allow_unknown)
    except GraphError as exc:   # also a file that cannot be read (GraphSource.read)
        run.status, run.error = ERROR, str(exc)
        return None
    t1 = now_ns()
    run.load_ms = (t1 - t0) / 1e6
    run.phases.append(Phase("load", t0, t1))
    run.graph, run.graph_id, run.name = graph, graph.graph_id, graph.label
    run.notes.extend(f"warning: {w} (read past: --allow-unknown-fields)" for w in graph.warnings)
    run.notes.extend(graph_notes(graph))
    return graph


def _limits(graph: Graph, settings: RunSettings, run: GraphRun) -> Limits:
    """The limits ``bench/verdict.py`` judges this graph's configurations with: the float64 reference
    validates unless ``--validate none``, the memory plan dropped it or the cache holds it."""
    validating = settings.validate == "reference" and not run.skip_reference and not _cached(graph, settings)
    return Limits(validate=validating, max_reference_s=settings.max_reference_s,
                  reference_device=settings.reference_device)


def _memory_plan(graph: Graph, settings: RunSettings, run: GraphRun) -> bool:
    """Refuse, before allocating anything, a graph whose host tensors cannot fit; drop the
    float64 reference (with a note) when only the reference would not fit."""
    refusal = host_memory_refusal(graph)
    if refusal is not None:
        run.status = ERROR
        run.error = f"{run.source}: {refusal}"
        return False
    if settings.validate != "reference":
        return True
    note = oracle_memory_note(graph, cached=_cached(graph, settings))
    if note:
        run.notes.append(note)
        run.skip_reference = True
    return True


def _cache_for(settings: RunSettings) -> ReferenceCache | None:
    """The reference cache, when the inputs are seeded (a golden bundle's are not: no key)."""
    return settings.reference_cache if settings.golden is None else None


def _cached(graph: Graph, settings: RunSettings) -> bool:
    cache = _cache_for(settings)
    return cache is not None and settings.save_tensors is None and cache.has(graph, settings.seed)


def _reference(graph: Graph, inputs: dict[int, np.ndarray], settings: RunSettings,
               run: GraphRun) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """(float64 outputs, every tensor in its type) from the cache, else evaluated (and stored).
    A hit has no intermediates, so ``--save-tensors`` (which writes them) always evaluates."""
    cache = _cache_for(settings)
    if cache is not None and settings.save_tensors is None:
        cached, note = cache.load(graph, settings.seed)
        if note:
            run.notes.append(note)
        if cached is not None:
            run.reference_origin = "cache"
            return cached, {}
    on_device = any(is_device_tensor(v) for v in inputs.values())
    evaluation = executor.evaluate(graph, inputs, device=settings.reference_device, keep_on_device=on_device)
    reference = {u: evaluation.exact[u] for u in (t.uid for t in graph.output_tensors)}
    run.reference_origin = "computed"
    run.reference_placement = sorted(set(evaluation.placement.values()))
    if cache is not None:
        note = cache.store(graph, settings.seed, {u: _host(v) for u, v in reference.items()})
        if note:
            run.notes.append(note)
        else:
            run.reference_origin = "computed, cached"
    return reference, evaluation.stored


def _evaluate_reference(graph: Graph, inputs: dict[int, np.ndarray], settings: RunSettings, run: GraphRun,
                        expected: dict[str, dict[int, np.ndarray]]) -> None:
    """The validating float64 reference (cache or evaluation) into ``expected``, as a "reference" phase."""
    t0 = now_ns()
    try:
        run.reference, run.intermediates = _reference(graph, inputs, settings, run)
        expected["reference"] = run.reference
    except UnsupportedError as exc:
        run.notes.append(f"not validated against the reference: {exc}")
    run.phases.append(Phase("reference", t0, now_ns()))


def _reference_backend_runs(expanded: Sequence[tuple[Config, Engine | None, tuple[str, str] | None]]) -> bool:
    return any(cfg.backend == "reference" and problem is None for cfg, _, problem in expanded)


def _take_own_reference(graph: Graph, run: GraphRun, settings: RunSettings,
                        expected: dict[str, dict[int, np.ndarray]]) -> bool:
    """Use the reference backend's own float64 outputs as the oracle (stored in the cache like a
    computed one); False when no reference configuration produced them."""
    done = next((c for c in run.configs if c.config.backend == "reference" and c.float64), None)
    if done is None:
        return False
    run.reference, run.intermediates = done.float64, done.stored
    expected["reference"] = run.reference
    run.reference_origin = "reference backend"
    cache = _cache_for(settings)
    if cache is not None:
        note = cache.store(graph, settings.seed, run.reference)
        if note:
            run.notes.append(note)
        else:
            run.reference_origin += ", cached"
    return True


#: backends whose sessions bind device tensors and hand outputs back on the device (``fetch_device``)
DEVICE_DATA_BACKENDS = frozenset({"cudnn", "torch"})
#: types every stage holds alike on the device (inputs, the reference's storage, backends, the validator);
#: the block-scale types (fp4/fp6 codes, e8m0 scales, fnuz fp8) have two device forms (codes in bytes
#: for the backends, values for the reference), so their graphs keep their data on the host
DEVICE_DATA_TYPES = frozenset({"float", "half", "bfloat16", "double", "fp8_e4m3", "fp8_e5m2", "int8", "uint8",
                               "int32", "int64", "boolean"})


def _input_device(expanded: Sequence[tuple[Config, Engine | None, tuple[str, str] | None]], settings: RunSettings,
                  run: GraphRun) -> str | None:
    """The GPU where a graph's data lives (inputs made there, the reference run there, outputs judged
    there), or None for the host: only when every consumer is on that GPU. A host consumer (the CPU
    reference as backend or oracle, --save-tensors, golden bundles, outputs sent to another process)
    keeps everything on the host, as before."""
    runnable = [cfg for cfg, _, problem in expanded if problem is None]
    if not runnable or any(cfg.backend not in DEVICE_DATA_BACKENDS for cfg in runnable):
        return None
    if run.graph is not None and any(t.data_type not in DEVICE_DATA_TYPES for t in run.graph.tensors):
        return None
    if settings.golden is not None or settings.save_tensors is not None or settings.keep_outputs:
        return None
    if settings.validate == "reference" and not run.skip_reference and settings.reference_device != "cuda":
        return None
    from hipdnn_trace.backends.reference.xp import cuda_missing

    return None if cuda_missing() else f"cuda:{settings.options.device}"


def _inputs(graph: Graph, settings: RunSettings, run: GraphRun, device: str | None = None,
            bundle: BundleRef | None = None) -> tuple[dict[int, Any], dict[int, np.ndarray]]:
    """(inputs, golden outputs): from the source's integration-test bundle (graph/bundles.py), from a
    --golden bundle when one matches, else seeded (on ``device`` when given: the same bits as on the host)."""
    if bundle is not None:
        data = golden_data(bundle, graph)
        run.bundle_notes = [*data.notes, *filter(None, [support_note(bundle)])]
        run.notes.extend(run.bundle_notes)
        run.golden = data.state
        if data.inputs is not None:
            return data.inputs, data.outputs
        return make_inputs(graph, settings.seed), {}
    if settings.golden is not None:
        from hipdnn_trace.graph import golden

        path = golden.find_bundle(settings.golden, graph)
        if path is not None:
            _, tensors = golden.read_bundle(path)
            ins = {t.uid: tensors[t.uid] for t in graph.input_tensors if t.uid in tensors}
            missing = [t.name for t in graph.input_tensors if t.uid not in tensors]
            if missing:
                raise UserError(f"{path}: golden bundle lacks inputs {', '.join(missing)}")
            outs = {t.uid: tensors[t.uid] for t in graph.output_tensors if t.uid in tensors}
            run.notes.append(f"inputs and expected outputs from {path}")
            return ins, outs
        run.notes.append(f"no golden bundle for {graph.label!r} in {settings.golden}; seeded inputs")
    return make_inputs(graph, settings.seed, device=device), {}


def _expand_configs(graph: Graph, configs: Sequence[Config], settings: RunSettings, run: GraphRun,
                    timed_out: list[str] | None = None) -> list[tuple[Config, Engine | None, tuple[str, str] | None]]:
    """(config, engine, problem) per concrete configuration, a problem being (status, message)
    for a configuration that cannot run: ``inspect``'s verdict for its backend (``bench/verdict.py``
    ``refusal``, an unsupported row, or an error row naming the file; ``timed_out`` collects the
    reference-time refusals); ``--engine all`` expands here."""
    out: list[tuple[Config, Engine | None, tuple[str, str] | None]] = []
    limits = _limits(graph, settings, run)
    for cfg in configs:
        options = cfg.run_options(settings.options)
        try:
            backend = backends.get(cfg.backend)
            available = backend.available()
            if not available:
                out.append((cfg, None, (UNSUPPORTED, f"backend {cfg.backend} not available: {available.reason}")))
                continue
            refused = refusal(graph, cfg.backend, backend, limits)
            if refused is not None:
                problem = (UNSUPPORTED, refused.reason) if refused.kind == SUPPORT else \
                    (ERROR, f"{run.source}: {refused.reason}")
                if refused.kind == TIME and timed_out is not None:
                    timed_out.append(problem[1])
                out.append((cfg, None, problem))
                continue
            if cfg.engine == ENGINE_ALL:
                listed = backend.engines(graph, options)
                if not listed:
                    out.append((cfg, None, None))
                for e in listed:
                    out.append((cfg.with_engine(e.label()), e, None))
            elif cfg.engine is not None:
                out.append((cfg, engine_choice.select(backend, graph, cfg.engine, options), None))
            else:
                out.append((cfg, None, None))
        except UserError as exc:
            out.append((cfg, None, (ERROR, str(exc))))
    return out


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
    arm.session = session = backends.get(run.config.backend).prepare(graph, arm.engine, options)
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
    if arm.session is not None:
        try:
            arm.session.close()
        except Exception as exc:   # a failed close must not hide the result
            arm.run.info["close_error"] = describe(exc)
        arm.session = None


def _arm(graph: Graph, cfg: Config, engine: Engine | None) -> Arm:
    return Arm(ConfigRun(config=cfg, engine=engine.label() if engine else ""),
               graph_range_name(graph.graph_id, cfg.name))


def _measure(graph: Graph, cfg: Config, engine: Engine | None, inputs: dict[int, np.ndarray],
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


def _measure_ab(graph: Graph, pair: Sequence[tuple[Config, Engine | None]], inputs: dict[int, np.ndarray],
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


def _ab_pair(run: GraphRun) -> list[tuple[ConfigRun, str, dict[int, np.ndarray]]]:
    ran = [c for c in run.configs if c.status == OK and c.outputs]
    return [(ran[1], f"A:{ran[0].config.name}", ran[0].outputs)] if len(ran) == 2 else []


def _compare(graph: Graph, run: GraphRun, pairs: list[tuple[ConfigRun, str, dict[int, np.ndarray]]],
             settings: RunSettings) -> None:
    """One validation record per output tensor of each (config, expectation) pair."""
    outputs = {t.uid: t for t in graph.output_tensors}
    for c, against, values in pairs:
        for uid, tensor in outputs.items():
            if uid not in values or uid not in c.outputs:
                continue
            result, atol, rtol = judge_output(graph, run, uid, c.outputs[uid], values[uid], atol=settings.atol,
                                              rtol=settings.rtol)
            run.validation.append(ValidationRecord(
                config=c.config.name, output_uid=uid, output=tensor.name, against=against,
                dtype=tensor.data_type, atol=atol, rtol=rtol, max_abs=result.max_abs,
                max_rel=result.max_rel, mismatches=result.mismatches, nonfinite=result.nonfinite + result.unwritten,
                total=result.total, worst_index=str(list(result.worst_index)) if result.worst_index else "",
                passed=result.passed, message=result.message(),
                worst=[e.__dict__ for e in result.worst],
            ))


def _mark(run: GraphRun, settings: RunSettings) -> None:
    """Each config's validation verdict and status from its records."""
    for c in run.configs:
        rows = [v for v in run.validation if v.config == c.config.name]
        if rows:
            c.validation = "passed" if all(v.passed for v in rows) else "failed"
            if c.validation == "failed" and c.status == OK:
                c.status = FAILED
                c.error = next(f"{v.output} vs {v.against}: {v.message}" for v in rows if not v.passed)
    # In A/B, B's mismatch against A is a failure of the pair: A is marked too.
    if settings.ab and any(not v.passed and v.against.startswith("A:") for v in run.validation):
        for c in run.configs:
            if c.outputs or c.status == FAILED:
                c.validation = "failed"
                if c.status == OK:
                    c.status, c.error = FAILED, "outputs differ between A and B"


def _validate(graph: Graph, run: GraphRun, expected: dict[str, dict[int, np.ndarray]], settings: RunSettings,
              bundle: BundleRef | None = None) -> None:
    """Each config's outputs against each expectation (reference, golden, and B against A); then a
    bundle's support claims against the hipDNN rows."""
    ran = [c for c in run.configs if c.status == OK and c.outputs]
    pairs = [(c, against, values) for c in ran for against, values in expected.items()]
    if settings.ab:
        pairs += _ab_pair(run)
    _compare(graph, run, pairs, settings)
    _mark(run, settings)
    if bundle is not None and any(c.config.backend == "hipdnn" for c in run.configs):
        check_support(run, bundle, gpu_arch())


def validate_ab(graph: Graph, run: GraphRun, settings: RunSettings) -> None:
    """B against A for a run whose configurations ran in separate processes (their own
    checks against the reference were made there)."""
    _compare(graph, run, _ab_pair(run), settings)
    _mark(run, settings)


def _interleaving(expanded: Sequence[tuple[Config, Engine | None, tuple[str, str] | None]],
                  settings: RunSettings, run: GraphRun) -> bool:
    """Whether this graph's A/B runs interleaved: two runnable configurations and no profiler hooks
    (a profiler brackets one configuration's whole loop); the reason goes to the notes otherwise."""
    if not settings.ab or settings.ab_plan is None or len(expanded) != 2:
        return False
    if any(problem is not None for _, _, problem in expanded):
        return False
    if settings.hooks:
        run.notes.append("A/B timed one configuration after the other: a profiler brackets each whole loop")
        return False
    return True


def _measure_each(graph: Graph, expanded: Sequence[tuple[Config, Engine | None, tuple[str, str] | None]],
                  inputs: dict[int, np.ndarray], settings: RunSettings, markers: Markers,
                  on_iteration: Callable[[int], None] | None, own: bool, run: GraphRun) -> None:
    """Every configuration measured in turn (a problem becomes its row)."""
    for cfg, engine, problem in expanded:
        if problem is not None:
            status, message = problem
            run.configs.append(ConfigRun(config=cfg, status=status, error=message))
            continue
        run.configs.append(_measure(graph, cfg, engine, inputs, settings, markers, run.load_ms or 0.0, on_iteration,
                                    keep_float64=own and cfg.backend == "reference"))


def run_graph(
    source: GraphSource,
    configs: Sequence[Config],
    settings: RunSettings,
    markers: Markers,
    *,
    on_iteration: Callable[[int], None] | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> GraphRun:
    """Load, make inputs, evaluate the validating reference, measure every configuration, validate;
    ``on_stage`` hears each stage as it starts (the configurations' through their markers)."""
    stage = on_stage or (lambda _: None)
    markers = with_stages(markers, on_stage)
    run = GraphRun(source=source.name, name=Path(source.name).stem)
    settings = replace(settings, reference_cache=None) if source.bundle else settings   # bundle inputs: not seeded
    graph = _load(source, run, settings.allow_unknown)
    if graph is None or not _memory_plan(graph, settings, run):
        return run
    timed_out: list[str] = []
    expanded = _expand_configs(graph, configs, settings, run, timed_out)
    if len(timed_out) == len(expanded) and len(set(timed_out)) == 1:
        # every configuration refused for the reference's time, in one line: the graph's error row,
        # made before any input, as inspect says it (nothing is saved with --save-tensors either)
        run.status, run.error = ERROR, timed_out[0]
        return run
    if all(problem is not None for _, _, problem in expanded) and settings.save_tensors is None:
        # nothing can run: no inputs, no reference (a refused 4096-token graph cost 32 s and 2.7 GB)
        run.configs.extend(ConfigRun(config=cfg, status=problem[0], error=problem[1])
                           for cfg, _, problem in expanded if problem is not None)
        return run
    stage("inputs")
    t0 = now_ns()
    device = None if source.bundle is not None else _input_device(expanded, settings, run)   # bundle data: host
    try:
        inputs, golden_out = _inputs(graph, settings, run, device, source.bundle)
    except UserError as exc:
        run.status, run.error = ERROR, str(exc)
        return run
    run.flops = graph_flops(graph, inputs)
    run.undefined = undefined_elements(graph, inputs)
    run.phases.append(Phase("inputs", t0, now_ns()))
    expected: dict[str, dict[int, np.ndarray]] = {}
    validating = settings.validate == "reference" and not run.skip_reference
    reason = executor.check(graph) if validating else None
    if reason:
        run.notes.append(f"not validated against the reference: {reason}")
        validating = False
    # the reference backend's own float64 result is the oracle: evaluate it once, as the backend
    own = validating and _reference_backend_runs(expanded) and not _cached(graph, settings)
    if validating and not own:
        stage("reference")
        _evaluate_reference(graph, inputs, settings, run, expected)
    if golden_out:
        expected["golden"] = golden_out
    if device is not None:
        release_device_memory()   # the reference's temporaries: cuDNN allocates outside torch's cache
    if _interleaving(expanded, settings, run):
        run.configs.extend(_measure_ab(graph, [(cfg, engine) for cfg, engine, _ in expanded], inputs, settings,
                                       markers, run.load_ms or 0.0, on_iteration, own, run))
    else:
        _measure_each(graph, expanded, inputs, settings, markers, on_iteration, own, run)
    if own and not _take_own_reference(graph, run, settings, expected):
        stage("reference")
        _evaluate_reference(graph, inputs, settings, run, expected)   # the backend failed: evaluate here
    stage("validate")
    t0 = now_ns()
    _validate(graph, run, expected, settings, source.bundle)
    recheck_failures(graph, run, inputs, expected, settings)   # before a FAILED row blames the library
    run.phases.append(Phase("validate", t0, now_ns()))
    if device is not None:
        del inputs
        release_device_memory()
    if settings.save_tensors is not None:
        try:
            _save_bundle(graph, run, inputs, settings.save_tensors)
        except OSError as exc:   # the measurement stands; the bundle is missing, and says so
            where = f"{exc.filename}: " if exc.filename else ""
            run.saved_tensors = f"failed: {where}{exc.strerror or exc}"
            run.notes.append(f"tensors not saved: {where}{exc.strerror or exc}")
    return run


def _save_bundle(graph: Graph, run: GraphRun, inputs: dict[int, np.ndarray], folder: Path) -> None:
    """Inputs, outputs of the first configuration that ran, and intermediates, as a golden bundle."""
    from hipdnn_trace.backends.reference.ops import round_to
    from hipdnn_trace.graph import golden

    produced = next((c.outputs for c in run.configs if c.outputs), None)
    if produced is None:
        run.notes.append("nothing saved: no configuration produced outputs")
        return
    tensors: dict[int, Any] = dict(inputs)
    intermediates = run.intermediates
    for t in graph.tensors:
        if t.uid in produced:
            tensors[t.uid] = produced[t.uid]
        elif t.uid in intermediates:
            tensors[t.uid] = intermediates[t.uid]
        elif t.is_value:
            tensors[t.uid] = round_to(np.full(t.dims, t.value, dtype=np.float64), t.data_type)
        elif t.uid not in tensors:
            tensors[t.uid] = round_to(np.zeros(t.dims), t.data_type)
    path = golden.write_bundle(folder, graph, tensors)
    run.saved_tensors = str(path)
    run.notes.append(f"tensors saved to {path}")

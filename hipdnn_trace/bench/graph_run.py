"""Run one graph on every configuration: load, build, bind, warm up, time, fetch, validate.

Failures stay inside the graph's record: a bad file, an unsupported op or a
backend error becomes a status and a one-line message, and the suite goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from hipdnn_trace.backends.base import Engine
from hipdnn_trace.backends.reference import executor
from hipdnn_trace.bench.arm_measure import measure, measure_ab
from hipdnn_trace.bench.attention_inputs import undefined_elements
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.config_expansion import Expanded, expand_configs
from hipdnn_trace.bench.device_data import is_device_tensor, release_device_memory, to_host as _host
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.bench.loop import Phase
from hipdnn_trace.bench.output_validation import validate
from hipdnn_trace.bench.recheck import recheck_failures
from hipdnn_trace.bench.records import ERROR, ConfigRun, GraphRun
from hipdnn_trace.bench.reference_cache import ReferenceCache
from hipdnn_trace.bench.run_settings import RunSettings
from hipdnn_trace.bench.stages import with_stages
from hipdnn_trace.bench.verdict import (
    Limits,
    graph_notes,
    host_memory_refusal,
    oracle_memory_note,
)
from hipdnn_trace.device.clock import now_ns
from hipdnn_trace.errors import GraphError, UnsupportedError, UserError
from hipdnn_trace.graph.bundles import BundleRef, golden_data, support_note
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.graph.ops import graph_flops
from hipdnn_trace.graph.sources import GraphSource
from hipdnn_trace.markers import Markers


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


def _reference_backend_runs(expanded: Sequence[Expanded]) -> bool:
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


def _input_device(expanded: Sequence[Expanded], settings: RunSettings,
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


def _interleaving(expanded: Sequence[Expanded],
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


def _refused_row(cfg: Config, engine: Engine | None, problem: tuple[str, str]) -> ConfigRun:
    """The row of a configuration that cannot run: its (status, message) and the engine it names, if any."""
    status, message = problem
    return ConfigRun(config=cfg, engine=engine.label() if engine else "", status=status, error=message)


def _measure_each(graph: Graph, expanded: Sequence[Expanded],
                  inputs: dict[int, np.ndarray], settings: RunSettings, markers: Markers,
                  on_iteration: Callable[[int], None] | None, own: bool, run: GraphRun) -> None:
    """Every configuration measured in turn (a problem becomes its row)."""
    for cfg, engine, problem in expanded:
        if problem is not None:
            run.configs.append(_refused_row(cfg, engine, problem))
            continue
        run.configs.append(measure(graph, cfg, engine, inputs, settings, markers, run.load_ms or 0.0, on_iteration,
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
    expanded = expand_configs(graph, configs, settings, _limits(graph, settings, run), run.source, timed_out)
    if len(timed_out) == len(expanded) and len(set(timed_out)) == 1:
        # every configuration refused for the reference's time, in one line: the graph's error row,
        # made before any input, as inspect says it (nothing is saved with --save-tensors either)
        run.status, run.error = ERROR, timed_out[0]
        return run
    if all(problem is not None for _, _, problem in expanded) and settings.save_tensors is None:
        # nothing can run: no inputs, no reference (a refused 4096-token graph cost 32 s and 2.7 GB)
        run.configs.extend(_refused_row(cfg, engine, problem) for cfg, engine, problem in expanded
                           if problem is not None)
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
        run.configs.extend(measure_ab(graph, [(cfg, engine) for cfg, engine, _ in expanded], inputs, settings,
                                       markers, run.load_ms or 0.0, on_iteration, own, run))
    else:
        _measure_each(graph, expanded, inputs, settings, markers, on_iteration, own, run)
    if own and not _take_own_reference(graph, run, settings, expected):
        stage("reference")
        _evaluate_reference(graph, inputs, settings, run, expected)   # the backend failed: evaluate here
    stage("validate")
    t0 = now_ns()
    validate(graph, run, expected, settings, source.bundle)
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

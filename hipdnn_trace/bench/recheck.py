"""Whose fault is a FAILED row. Before a row blames a library for disagreeing with the float64
reference (or golden tensors), the same inputs run once more, untimed, on another kernel of the same
library (torch: its math SDPA kernel; cuDNN, hipDNN: another plan the heuristics list). If that kernel
agrees with the expectation, the disagreement is the first kernel's, not the harness's inputs,
layouts or reference; if it fails too, the row says the fault is not attributed. docs/reliability.md
"Whose fault is a FAILED row" (issue 33: torch's flash SDPA kernel returned NaN for a zero scale)."""

from __future__ import annotations

from typing import Any

import numpy as np

from hipdnn_trace import backends
from hipdnn_trace.backends.base import RunOptions, SecondOpinion
from hipdnn_trace.bench.device_data import is_device_tensor
from hipdnn_trace.bench.output_check import judge_output
from hipdnn_trace.bench.records import FAILED, ConfigRun, GraphRun
from hipdnn_trace.errors import describe
from hipdnn_trace.graph.model import Graph

#: expectations a recheck can be judged against, most trusted first (an A/B mismatch is two libraries')
TARGETS = ("reference", "golden")


def second_opinion(backend: Any, graph: Graph, engine_label: str, options: RunOptions) -> SecondOpinion | None:
    """The backend's own choice of another kernel (``second_opinion``), else another of its listed plans."""
    own = getattr(backend, "second_opinion", None)
    if own is not None:
        return own(graph, options)
    try:
        listed = backend.engines(graph, options)
    except Exception:   # a listing that fails leaves the row as it is: nothing to ask
        return None
    used = engine_label.removesuffix(" (autotuned)")
    other = next((e for e in listed if e.label() != used), None) if used else (listed[1] if len(listed) > 1 else None)
    if other is None:
        return None
    return SecondOpinion(f"{backend.name} plan {other.label()}", other, options)


def _run_once(backend: Any, graph: Graph, opinion: SecondOpinion, inputs: dict[int, Any]) -> dict[int, Any]:
    """One untimed execution on the other kernel, outputs fetched where the inputs are."""
    session = backend.prepare(graph, opinion.engine, opinion.options)
    try:
        session.bind(inputs)
        session.execute()
        session.synchronize()
        wanted = [t.uid for t in graph.output_tensors]
        device_fetch = getattr(session, "fetch_device", None)
        if device_fetch is not None and any(is_device_tensor(v) for v in inputs.values()):
            return device_fetch(wanted)
        return session.fetch(wanted)
    finally:
        session.close()


def _failed_target(run: GraphRun, c: ConfigRun, expected: dict[str, dict[int, np.ndarray]]) -> str | None:
    failed = {v.against for v in run.validation if v.config == c.config.name and not v.passed}
    return next((t for t in TARGETS if t in failed and t in expected), None)


def _verdict(graph: Graph, run: GraphRun, outputs: dict[int, Any], values: dict[int, Any],
             settings: Any, row: ConfigRun | None = None) -> tuple[bool, str]:
    """(every output passes, what the worst output said)."""
    worst = ""
    for t in graph.output_tensors:
        if t.uid not in values or t.uid not in outputs:
            continue
        result, _, _ = judge_output(graph, run, t.uid, outputs[t.uid], values[t.uid], atol=settings.atol,
                                    rtol=settings.rtol, engine_config=settings.engine_config, row=row)
        if not result.passed:
            return False, f"{t.name}: {result.message()}"
        worst = worst or f"{t.name}: {result.message()}"
    return True, worst


def recheck_one(graph: Graph, run: GraphRun, c: ConfigRun, inputs: dict[int, Any],
                expected: dict[str, dict[int, np.ndarray]], settings: Any) -> None:
    """Recheck one FAILED configuration; its reason and ``info["recheck"]`` say whose fault it is."""
    target = _failed_target(run, c, expected)
    if c.status != FAILED or target is None or c.config.backend == "reference":   # the oracle has no second
        return
    backend = backends.get(c.config.backend)
    opinion = second_opinion(backend, graph, c.engine, c.config.run_options(settings.options))
    if opinion is None:
        c.info["recheck"] = {"kernel": None, "fault": "unattributed", "note": "no other kernel of this library"}
        return   # the reason stays the comparison's own; run.json's row info says it was not rechecked
    try:
        outputs = _run_once(backend, graph, opinion, inputs)
    except Exception as exc:   # the other kernel cannot run: the row keeps its failure, unattributed
        c.info["recheck"] = {"kernel": opinion.label, "fault": "unattributed", "error": describe(exc)}
        c.error = f"{c.error}; recheck on {opinion.label} could not run ({describe(exc)}): fault not attributed"
        return
    passed, said = _verdict(graph, run, outputs, expected[target], settings, c)
    fault = "library" if passed else "unattributed"
    c.info["recheck"] = {"kernel": opinion.label, "against": target, "passed": passed, "fault": fault,
                         "message": said}
    if passed:
        c.error = (f"{c.error}; {opinion.label} passes on the same inputs ({said}): the fault is this "
                   f"{c.config.backend} kernel's, not the harness's")
    else:
        c.error = (f"{c.error}; {opinion.label} fails too ({said}): fault not attributed (harness, reference "
                   f"or library)")


def recheck_failures(graph: Graph, run: GraphRun, inputs: dict[int, Any],
                     expected: dict[str, dict[int, np.ndarray]], settings: Any) -> None:
    """Every configuration that failed against the reference or golden tensors, rechecked."""
    for c in run.configs:
        recheck_one(graph, run, c, inputs, expected, settings)

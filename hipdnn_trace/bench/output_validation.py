"""Each configuration's outputs judged against each expectation (the float64 reference, golden
tensors, B against A): one validation record per output tensor, then each configuration's verdict.

A/B pairs judged in two processes come here too (``validate_ab``): their own checks against the
reference were made in the children, B against A only here.
"""

from __future__ import annotations

import numpy as np

from hipdnn_trace.bench.bundle_support import check_support, gpu_arch
from hipdnn_trace.bench.output_check import judge_output
from hipdnn_trace.bench.records import FAILED, OK, ConfigRun, GraphRun, ValidationRecord
from hipdnn_trace.bench.run_settings import RunSettings
from hipdnn_trace.graph.bundles import BundleRef
from hipdnn_trace.graph.model import Graph

__all__ = ["validate", "validate_ab"]


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
                                              rtol=settings.rtol, engine_config=settings.engine_config, row=c)
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


def validate(graph: Graph, run: GraphRun, expected: dict[str, dict[int, np.ndarray]], settings: RunSettings,
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

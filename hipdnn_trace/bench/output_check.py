"""One output tensor judged against one expectation, with the graph's tolerances: what a validation
row and a recheck (bench/recheck.py) both need, so the two can never judge differently.

A dnn-providers engine config (``--test-config``, bench/engine_config.py) may judge a hipDNN row
otherwise: its tolerance override replaces the tolerances; its validator override compares with
``allclose_matching_infinities`` (an element infinite with the same sign on both sides is equal) or
``rms`` (hipDNN's ``CpuFpReferenceMiopenRmsValidation``: ``sqrt(sum((ref - out)^2)) / (sqrt(n) *
max(max|ref|, max|out|))`` at most the threshold, rounded to the output's type; any NaN or Inf fails).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from hipdnn_trace.bench.device_data import same_place, to_host
from hipdnn_trace.bench.engine_config import EngineConfig, ValidatorOverride
from hipdnn_trace.bench.records import ConfigRun, GraphRun
from hipdnn_trace.graph import dtypes
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.validate.compare import compare_tensor
from hipdnn_trace.validate.tally import TensorComparison
from hipdnn_trace.validate.tolerances import scaled_atol, tolerance_for

#: the output types hipDNN's rms validator is defined for (CpuFpReferenceMiopenRmsValidation.hpp)
_RMS_TYPES = ("float", "half", "bfloat16", "double")


def judge_output(graph: Graph, run: GraphRun, uid: int, actual: Any, expected: Any, *, atol: float | None,
                 rtol: float | None, engine_config: EngineConfig | None = None,
                 row: ConfigRun | None = None) -> tuple[TensorComparison, float, float]:
    """``actual`` of output ``uid`` against ``expected``: (comparison, atol, rtol used). ``atol``/``rtol``
    are the run's flags (None: hipDNN's table for the output's type, atol scaled to the expected values);
    ``engine_config`` judges ``row`` when it is one of the config's engine's rows."""
    tensor = graph.tensor(uid)
    override: ValidatorOverride | None = None
    if engine_config is not None and row is not None and engine_config.applies(row.config.backend,
                                                                               row.config.engine or row.engine):
        tolerance = engine_config.tolerance(run.name)
        if tolerance is not None:
            atol, rtol = tolerance.atol, tolerance.rtol
        override = engine_config.validator(run.name, tensor.name or f"uid={uid}")
    actual, expected, ignore = same_place(actual, expected, run.undefined.get(uid))
    if override is not None and override.validator == "allclose_matching_infinities":
        actual, expected = _same_infinities_equal(actual, expected)
    used_atol, used_rtol = tolerance_for(graph, uid, atol=atol, rtol=rtol)
    if atol is None:
        used_atol = scaled_atol(used_atol, expected)
    result = compare_tensor(actual, expected, atol=used_atol, rtol=used_rtol, reference=run.reference.get(uid),
                            ignore=ignore, dtype=tensor.data_type)
    if override is not None and override.validator == "rms":
        result = _rms(result, actual, expected, override, tensor.data_type)
    return result, used_atol, used_rtol


def _same_infinities_equal(actual: Any, expected: Any) -> tuple[np.ndarray, np.ndarray]:
    """Both on the host, with every element infinite with the same sign on both sides set to 0."""
    a, e = np.array(to_host(actual), dtype=np.float64), np.array(to_host(expected), dtype=np.float64)
    same = np.isinf(a) & np.isinf(e) & (np.sign(a) == np.sign(e))
    a[same] = 0.0
    e[same] = 0.0
    return a, e


def _rms(result: TensorComparison, actual: Any, expected: Any, override: ValidatorOverride,
         data_type: str) -> TensorComparison:
    a = np.asarray(to_host(actual), dtype=np.float64).ravel()
    e = np.asarray(to_host(expected), dtype=np.float64).ravel()
    assert override.rms_threshold is not None
    if data_type not in _RMS_TYPES:   # hipDNN's createRmsValidator knows these four only
        return replace(result, rule=f"the rms validator is not defined for {data_type} outputs ({override.where} "
                       "selects this one: narrow its tensors)", rule_passed=False)
    threshold = float(np.asarray(override.rms_threshold, dtype=dtypes.numpy_dtype(data_type)))
    if a.size == 0:
        return replace(result, rule=f"no elements ({override.where})", rule_passed=True)
    if not (np.isfinite(a).all() and np.isfinite(e).all()):
        return replace(result, rule=f"NaN or Inf present: the rms validator fails it ({override.where})",
                       rule_passed=False)
    scale = max(float(np.abs(e).max()), float(np.abs(a).max()), np.finfo(np.float64).tiny)
    error = float(np.sqrt(np.square(e - a).sum()) / (np.sqrt(a.size) * scale))
    word = "within" if error <= threshold else "over"
    return replace(result, rule=f"relative RMS error {error:.3g} {word} {threshold:.3g} (rms validator, "
                   f"{override.where})", rule_passed=error <= threshold)

"""One output tensor judged against one expectation, with the graph's tolerances: what a validation
row and a recheck (bench/recheck.py) both need, so the two can never judge differently."""

from __future__ import annotations

from typing import Any

from hipdnn_trace.bench.device_data import same_place
from hipdnn_trace.bench.records import GraphRun
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.validate.compare import compare_tensor
from hipdnn_trace.validate.tally import TensorComparison
from hipdnn_trace.validate.tolerances import scaled_atol, tolerance_for


def judge_output(graph: Graph, run: GraphRun, uid: int, actual: Any, expected: Any, *, atol: float | None,
                 rtol: float | None) -> tuple[TensorComparison, float, float]:
    """``actual`` of output ``uid`` against ``expected``: (comparison, atol, rtol used). ``atol``/``rtol``
    are the run's flags (None: hipDNN's table for the output's type, atol scaled to the expected values)."""
    dtype = graph.tensor(uid).data_type
    actual, expected, ignore = same_place(actual, expected, run.undefined.get(uid))
    used_atol, used_rtol = tolerance_for(graph, uid, atol=atol, rtol=rtol)
    if atol is None:
        used_atol = scaled_atol(used_atol, expected)
    result = compare_tensor(actual, expected, atol=used_atol, rtol=used_rtol, reference=run.reference.get(uid),
                            ignore=ignore, dtype=dtype)
    return result, used_atol, used_rtol

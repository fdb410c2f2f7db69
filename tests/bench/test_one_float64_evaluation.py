"""The reference backend validated against the reference evaluates the graph once: its own float64
result before rounding is the validating oracle, not a second evaluation (issue: one float64
evaluation on the reference backend)."""

from __future__ import annotations

import numpy as np
import pytest

from hipdnn_trace.backends.reference import executor
from hipdnn_trace.bench import graph_run
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.bench.reference_cache import ReferenceCache
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.sources import GraphSource
from hipdnn_trace.graph.write import dumps
from hipdnn_trace.markers import Markers


def _matmul_bytes() -> bytes:
    b = GraphBuilder("one_evaluation", io="half", compute="float")
    b.matmul(b.tensor("a", [2, 64, 96]), b.tensor("b", [2, 96, 32]), out="c")
    return dumps(b.build()).encode()


DATA = _matmul_bytes()


@pytest.fixture
def evaluations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every float64 evaluation of the graph, wherever it is made."""
    calls: list[str] = []
    real = executor.evaluate

    def counting(graph, inputs, **kwargs):
        calls.append(graph.name)
        return real(graph, inputs, **kwargs)

    monkeypatch.setattr(executor, "evaluate", counting)
    return calls


def _run(configs: list[Config], **settings) -> graph_run.GraphRun:
    return graph_run.run_graph(GraphSource("one_evaluation.json", lambda: DATA), configs,
                               graph_run.RunSettings(loop=LoopSettings(warmup=0, iters=1), **settings), Markers())


def test_the_reference_backend_is_evaluated_once_and_validated_by_its_own_float64(evaluations):
    run = _run([Config("reference", "reference")])
    assert evaluations == ["one_evaluation"]            # the timed execute, nothing more
    assert run.reference_origin == "reference backend"
    assert [v.passed for v in run.validation] == [True]
    (c,) = run.configs
    assert c.validation == "passed"
    # the oracle is the unrounded float64 product of the stored inputs
    uid = run.graph.output_tensors[0].uid
    assert run.reference[uid].dtype == np.float64
    assert not np.array_equal(run.reference[uid], c.outputs[uid].astype(np.float64))   # fp16 output: rounded


def test_the_oracle_equals_a_separate_evaluation(evaluations):
    own = _run([Config("reference", "reference")])
    separate = _run([Config("reference", "reference")], validate="none")
    inputs = graph_run.make_inputs(own.graph, 0)
    fresh = executor.evaluate(own.graph, inputs)
    for uid, value in own.reference.items():
        np.testing.assert_array_equal(value, fresh.exact[uid])
    assert separate.reference == {}


def test_the_cache_stores_the_backends_own_result(tmp_path, evaluations):
    cache = ReferenceCache(tmp_path / "cache")
    first = _run([Config("reference", "reference")], reference_cache=cache)
    assert first.reference_origin == "reference backend, cached"
    second = _run([Config("reference", "reference")], reference_cache=cache)
    assert second.reference_origin == "cache"
    for uid, value in first.reference.items():
        np.testing.assert_array_equal(second.reference[uid], value)

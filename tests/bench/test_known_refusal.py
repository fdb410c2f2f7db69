"""A configuration the backend already knows it will refuse (``known_refusal``: cuDNN's known crashes and the
refusals its plan cache remembers) costs no inputs and no float64 reference: 8 graphs/perf rows spent 1.2 s
making inputs and 0.7 s on the reference before cuDNN's session refused them (an H100, docs/benchmarks.md).
The hook is patched onto the torch backend, which runs on this CPU; the run itself is the real one."""

from __future__ import annotations

from pathlib import Path

import pytest

from hipdnn_trace import backends
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import run_graph
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.bench.records import OK, UNSUPPORTED
from hipdnn_trace.bench.run_settings import RunSettings
from hipdnn_trace.graph.sources import expand
from hipdnn_trace.markers import Markers

pytest.importorskip("torch")
GRAPH = sorted((Path(__file__).resolve().parents[2] / "graphs" / "matmul").glob("*.json"))[0]
SETTINGS = RunSettings(loop=LoopSettings(warmup=0, iters=1))


def _run(monkeypatch, known):
    monkeypatch.setattr(type(backends.get("torch")), "known_refusal", known, raising=False)
    return run_graph(expand([str(GRAPH)])[0], [Config("torch", "torch")], SETTINGS, Markers())


def test_a_known_refusal_is_the_row_and_no_input_or_reference_is_made(monkeypatch):
    run = _run(monkeypatch, lambda self, graph, engine, options: "refused before: no engine (remembered)")
    (row,) = run.configs
    assert (row.status, row.error) == (UNSUPPORTED, "refused before: no engine (remembered)")
    assert not {"inputs", "reference", "validate"} & {p.name for p in run.phases}
    assert not row.phases   # no session was opened


def test_no_known_refusal_or_a_failure_to_ask_leaves_the_row_to_prepare(monkeypatch):
    for known in (lambda self, graph, engine, options: None,
                  lambda self, graph, engine, options: 1 / 0):
        run = _run(monkeypatch, known)
        (row,) = run.configs
        assert row.status == OK and row.validation is not None
        assert {"inputs", "reference", "validate"} <= {p.name for p in run.phases}
        assert "init" in {p.name for p in row.phases}

"""run --oracle's hipDNN tuned plan against the stand-in hipdnn_frontend (no AMD GPU here): the same
engine built with ``global.benchmarking=1`` through ``create_execution_plan_ext(engine, [KnobSetting])``,
in a process of its own. Whether a provider really tunes cannot be tested here."""

from __future__ import annotations

import os

import pytest
from amd_helpers import load_graph, matmul

from hipdnn_trace.backends.base import RunOptions
from hipdnn_trace.backends.hipdnn import BENCHMARKING_KNOB, HipdnnBackend
from hipdnn_trace.backends.hipdnn_api import engine_hex, engine_id_from_name
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.oracle import oracle_configs
from hipdnn_trace.bench.split import groups

MIOPEN = engine_id_from_name("MIOPEN_ENGINE")
DETERMINISTIC = engine_id_from_name("MIOPEN_ENGINE_DETERMINISTIC")
TUNED = RunOptions(extra={"tuned": True})


@pytest.fixture
def no_cache_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HIPDNN_DISABLE_CACHE", raising=False)   # the tuned build sets it in its own process


def test_tuned_plan_is_the_heuristics_engine_with_the_benchmarking_knob_with_stand_in_hipdnn_frontend(
        stand_in_frontend, no_cache_variable) -> None:
    fe = stand_in_frontend("newest")
    session = HipdnnBackend().prepare(load_graph(matmul()), None, TUNED)
    try:
        calls = fe.WORLD.calls
        assert ("Graph.create_execution_plan_ext", MIOPEN) in calls   # the top-ranked engine, forced
        assert ("Graph.create_execution_plan_ext.knobs", [[BENCHMARKING_KNOB, 1]]) in calls
        assert "Graph.create_execution_plans" not in fe.WORLD.names()
        info = session.info()
        assert info["tuning"] == {"detail": f"{BENCHMARKING_KNOB}=1 on engine {engine_hex(MIOPEN)}", "available": True}
        assert info["engine_id"] == MIOPEN and os.environ["HIPDNN_DISABLE_CACHE"] == "1"
    finally:
        session.close()


def test_tuned_plan_of_a_chosen_engine_and_an_engine_without_the_knob_with_stand_in_hipdnn_frontend(
        stand_in_frontend, no_cache_variable) -> None:
    fe = stand_in_frontend("newest", knobs=("global.workspace_size_limit",))
    graph, backend = load_graph(matmul()), HipdnnBackend()
    engine = backend.resolve_engine(graph, "MIOPEN_ENGINE_DETERMINISTIC", TUNED)
    session = backend.prepare(graph, engine, TUNED)
    try:
        assert ("Graph.create_execution_plan_ext", DETERMINISTIC) in fe.WORLD.calls
        assert session.info()["tuning"]["available"] is False   # hipDNN ignores the knob: ootb re-measured
    finally:
        session.close()


def test_untuned_plan_has_no_knob_and_bindings_without_knobs_refuse_with_stand_in_hipdnn_frontend(
        stand_in_frontend, no_cache_variable) -> None:
    fe = stand_in_frontend("newest")
    HipdnnBackend().prepare(load_graph(matmul()), None, RunOptions()).close()
    assert "Graph.create_execution_plan_ext.knobs" not in fe.WORLD.names()
    assert "HIPDNN_DISABLE_CACHE" not in os.environ
    stand_in_frontend("middle")
    from hipdnn_trace.errors import UnsupportedError

    with pytest.raises(UnsupportedError, match="cannot build a plan with knobs"):
        HipdnnBackend().prepare(load_graph(matmul()), None, TUNED)


def test_the_tuned_twin_gets_a_process_of_its_own() -> None:
    pair = oracle_configs([Config("hipdnn", "hipdnn")])
    assert [c.name for c in pair] == ["hipdnn#ootb", "hipdnn#tuned"]
    assert [[c.name for c in g] for g in groups(pair, RunOptions())] == [["hipdnn#ootb"], ["hipdnn#tuned"]]
    backend = HipdnnBackend()
    assert backend.process_key(RunOptions()) != backend.process_key(TUNED)

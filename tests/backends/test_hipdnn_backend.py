"""The hipdnn backend against stand-in hipdnn_frontend modules that record every call.

No AMD GPU exists here: ``tests/support/stand_ins/hipdnn_frontend`` mimics the bindings' API (several
generations) and executes graphs with the float64 reference on host memory. The tests
check what the backend asks of hipDNN and in which order, and that data reaches the
right addresses; hipDNN's numerics and GPU timing cannot be tested here.
"""

from __future__ import annotations

import numpy as np
import pytest
from amd_helpers import conv_nhwc, load_graph, matmul

from hipdnn_trace.backends import hipdnn as hipdnn_backend
from hipdnn_trace.backends.base import RunOptions
from hipdnn_trace.backends.hipdnn import HipdnnBackend, PluginPathConflict, hipdnn_json
from hipdnn_trace.backends.hipdnn_api import (
    engine_hex,
    engine_id_from_name,
    parse_engine,
)
from hipdnn_trace.backends.reference import executor
from hipdnn_trace.bench import engines as engine_choice
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.errors import ExecutionError, UnsupportedError, UserError
from hipdnn_trace.graph import layout

MIOPEN = engine_id_from_name("MIOPEN_ENGINE")
DETERMINISTIC = engine_id_from_name("MIOPEN_ENGINE_DETERMINISTIC")
HIPBLASLT = engine_id_from_name("HIPBLASLT_ENGINE")


def _index(calls: list[tuple], name: str, start: int = 0) -> int:
    for i, call in enumerate(calls[start:], start):
        if call[0] == name:
            return i
    raise AssertionError(f"{name} not called after position {start}: {[c[0] for c in calls]}")


def _run_once(session, graph):
    inputs = make_inputs(graph, 0)
    session.bind(inputs)
    session.timer.start()
    session.execute()
    session.timer.stop()
    session.synchronize()
    ms = session.timer.elapsed_ms()
    return inputs, session.fetch([t.uid for t in graph.output_tensors]), ms


# --- engine ids ---------------------------------------------------------------------------


def test_engine_name_hash_matches_the_documented_ids() -> None:
    # Upstream documents MIOPEN_ENGINE_DETERMINISTIC as 0xA258541A6DAA1DE3 = -6748551569128940061
    # (hipdnn_list_engines output and the dnn-benchmarking README) and MIOPEN_ENGINE as 0x15B46865C717A122.
    assert engine_id_from_name("MIOPEN_ENGINE_DETERMINISTIC") == -6748551569128940061
    assert engine_hex(DETERMINISTIC) == "0xA258541A6DAA1DE3"
    assert engine_hex(MIOPEN) == "0x15B46865C717A122"
    # FNV-1a 64 reference vectors (Fowler/Noll/Vo test suite): "" is hipDNN's 0, "a" the classic one.
    assert engine_id_from_name("") == 0
    assert engine_id_from_name("a") & (2**64 - 1) == 0xAF63DC4C8601EC8C


@pytest.mark.parametrize("text", ["MIOPEN_ENGINE_DETERMINISTIC", "miopen_engine_deterministic",
                                  "-6748551569128940061", "11698192504580611555",
                                  "0xA258541A6DAA1DE3", "0xa258541a6daa1de3", "force:0xA258541A6DAA1DE3"])
def test_engine_selector_forms_name_the_same_engine(text: str) -> None:
    request = parse_engine(text)
    assert request.engine_id == DETERMINISTIC
    assert request.mode == "force"
    assert request.name == "MIOPEN_ENGINE_DETERMINISTIC"


def test_prefer_prefix_makes_a_soft_request() -> None:
    request = parse_engine("prefer:MIOPEN_ENGINE")
    assert (request.engine_id, request.mode, request.label()) == (MIOPEN, "prefer", "prefer:MIOPEN_ENGINE")
    unknown = parse_engine("MY_PLUGIN_ENGINE")
    assert unknown.engine_id == engine_id_from_name("MY_PLUGIN_ENGINE") and unknown.name == "MY_PLUGIN_ENGINE"


@pytest.mark.parametrize("text", ["", "prefer:", "0x" + "1" * 17, str(2**64), "two words", "a/b"])
def test_bad_engine_selectors_are_one_line_user_errors(text: str) -> None:
    with pytest.raises(UserError) as info:
        parse_engine(text)
    assert "\n" not in str(info.value)


def test_bench_select_resolves_name_decimal_and_hex_with_stand_in_hipdnn_frontend(stand_in_frontend) -> None:
    stand_in_frontend("newest")
    graph, backend = load_graph(matmul()), HipdnnBackend()
    ids = {engine_choice.select(backend, graph, s, RunOptions()).knobs["engine_id"]
           for s in ("MIOPEN_ENGINE_DETERMINISTIC", str(DETERMINISTIC), engine_hex(DETERMINISTIC))}
    assert ids == {DETERMINISTIC}


# --- build sequence -----------------------------------------------------------------------


def test_forced_engine_is_hard_selected_and_read_back_with_stand_in_hipdnn_frontend(stand_in_frontend) -> None:
    fe = stand_in_frontend("newest")
    graph, backend = load_graph(conv_nhwc()), HipdnnBackend()
    session = backend.prepare(graph, backend.resolve_engine(graph, "MIOPEN_ENGINE_DETERMINISTIC", RunOptions()),
                              RunOptions())
    calls = fe.WORLD.calls
    order = [_index(calls, n) for n in ("Handle", "Graph.from_json", "Graph.validate", "Graph.build_operation_graph",
                                        "Graph.create_execution_plan_ext", "Graph.check_support", "Graph.build_plans",
                                        "Graph.get_execution_plan_engine_id")]
    assert order == sorted(order)
    assert calls[_index(calls, "Graph.create_execution_plan_ext")][1] == DETERMINISTIC
    assert "Graph.create_execution_plans" not in fe.WORLD.names()       # no heuristic path when forced
    assert "Graph.set_preferred_engine_id_ext" not in fe.WORLD.names()
    info = session.info()
    assert info["engine_id"] == DETERMINISTIC and info["engine_selection"] == "force"
    assert info["engine_fallback"] is False and session.engine.index == DETERMINISTIC
    session.close()
    assert fe.WORLD.live_handles == 0


def test_forced_engine_that_does_not_apply_is_unsupported_not_replaced_with_stand_in_hipdnn_frontend(
        stand_in_frontend) -> None:
    fe = stand_in_frontend("newest")
    graph, backend = load_graph(matmul()), HipdnnBackend()
    with pytest.raises(UnsupportedError, match="HIPBLASLT_ENGINE.*does not apply"):
        backend.prepare(graph, backend.resolve_engine(graph, "HIPBLASLT_ENGINE", RunOptions()), RunOptions())
    assert "Graph.build_plans" not in fe.WORLD.names()
    assert fe.WORLD.live_handles == 0          # the failed build released its handle


def test_preferred_engine_is_soft_and_a_fallback_is_recorded_with_stand_in_hipdnn_frontend(stand_in_frontend) -> None:
    fe = stand_in_frontend("newest")
    graph, backend = load_graph(matmul()), HipdnnBackend()
    session = backend.prepare(graph, backend.resolve_engine(graph, "prefer:HIPBLASLT_ENGINE", RunOptions()),
                              RunOptions())
    calls = fe.WORLD.calls
    prefer = _index(calls, "Graph.set_preferred_engine_id_ext")
    assert calls[prefer][1] == HIPBLASLT
    assert prefer < _index(calls, "Graph.build_operation_graph") < _index(calls, "Graph.create_execution_plans")
    info = session.info()
    assert info["engine_selection"] == "prefer" and info["engine_requested_id"] == HIPBLASLT
    assert info["engine_id"] == MIOPEN and info["engine_fallback"] is True
    assert session.engine.index == MIOPEN
    assert "preferred HIPBLASLT_ENGINE not applicable" in session.engine.label()
    session.close()


def test_preferred_engine_that_applies_is_used_with_stand_in_hipdnn_frontend(stand_in_frontend) -> None:
    stand_in_frontend("newest")
    graph, backend = load_graph(matmul()), HipdnnBackend()
    session = backend.prepare(graph, backend.resolve_engine(graph, "prefer:0xA258541A6DAA1DE3", RunOptions()),
                              RunOptions())
    assert session.info()["engine_id"] == DETERMINISTIC and session.info()["engine_fallback"] is False
    assert session.engine.label() == "MIOPEN_ENGINE_DETERMINISTIC"
    session.close()


def test_engine_listing_comes_from_ranked_ids_and_the_handle_with_stand_in_hipdnn_frontend(stand_in_frontend) -> None:
    fe = stand_in_frontend("newest")
    listed = HipdnnBackend().engines(load_graph(matmul()), RunOptions())
    assert [(e.index, e.name, e.knobs["rank"]) for e in listed] == [
        (MIOPEN, "MIOPEN_ENGINE", 0), (DETERMINISTIC, "MIOPEN_ENGINE_DETERMINISTIC", 1)]
    assert "stand_in_plugin" in listed[0].detail
    assert fe.WORLD.live_handles == 0


def test_unset_node_compute_type_is_normalised_for_from_json_with_stand_in_hipdnn_frontend(stand_in_frontend) -> None:
    stand_in_frontend("newest")
    graph = load_graph(conv_nhwc(node_compute="unset"))
    text, notes = hipdnn_json(graph)
    assert '"unset"' not in text and notes
    session = HipdnnBackend().prepare(graph, None, RunOptions())
    assert session.info()["json_normalised"] == notes
    assert session.info()["engine_selection"] == "heuristic"
    session.close()


# --- buffers --------------------------------------------------------------------------------


def test_bind_writes_strided_layout_and_poisons_outputs_with_stand_in_hipdnn_frontend(stand_in_frontend) -> None:
    fe = stand_in_frontend("newest")
    graph = load_graph(conv_nhwc())
    session = HipdnnBackend().prepare(graph, None, RunOptions())
    inputs = make_inputs(graph, 3)
    session.bind(inputs)
    memory = fe.WORLD.memory
    for t in graph.input_tensors:
        assert bytes(memory[session.variant_pack[t.uid]]) == layout.pack(inputs[t.uid], t.strides).tobytes()
    for t in graph.output_tensors:
        assert set(memory[session.variant_pack[t.uid]]) == {0xFF}
    assert session.workspace_ptr == session.workspace.ptr() and session.workspace_bytes == 256
    session.timer.start()
    session.execute()
    session.timer.stop()
    session.synchronize()
    out = session.fetch([t.uid for t in graph.output_tensors])
    expected = executor.evaluate(graph, inputs).stored
    for uid, value in out.items():
        assert value.shape == graph.by_uid[uid].dims
        np.testing.assert_array_equal(value, expected[uid])
    assert _index(fe.WORLD.calls, "Graph.execute")
    session.close()


def test_run_command_validates_hipdnn_outputs_end_to_end_with_stand_in_hipdnn_frontend(
        stand_in_frontend, tmp_path) -> None:
    from amd_helpers import write_graphs

    from hipdnn_trace.cli import main
    from hipdnn_trace.results.rundir import load_run

    stand_in_frontend("newest")
    paths = write_graphs(tmp_path / "g", [conv_nhwc()])     # one graph: runs in this process
    code = main(["run", str(paths[0]), "--backend", "hipdnn", "--engine", "MIOPEN_ENGINE", "-w", "1", "-i", "3",
                 "--out", str(tmp_path / "runs"), "--run-id", "r", "--quiet", "--no-trace"])
    assert code == 0
    run = load_run(tmp_path / "runs" / "r")
    assert set(run.summary["status"]) == {"ok"} and set(run.summary["validation"]) == {"passed"}
    assert set(run.iterations["engine"]) == {"MIOPEN_ENGINE"}
    assert run.meta["versions"]["hipdnn_frontend"] == "1.4.0.stand-in"


def test_outputs_an_engine_never_writes_fail_validation_as_unwritten_with_stand_in_hipdnn_frontend(
        stand_in_frontend, tmp_path, capsys) -> None:
    from amd_helpers import write_graphs

    from hipdnn_trace.cli import main

    stand_in_frontend("newest", writes_outputs=False)
    paths = write_graphs(tmp_path / "g", [matmul()])
    code = main(["run", str(paths[0]), "--backend", "hipdnn", "-w", "0", "-i", "2",
                 "--out", str(tmp_path / "runs"), "--run-id", "r", "--no-trace"])
    assert code == 2
    assert "never written" in capsys.readouterr().out


# --- plugin paths -------------------------------------------------------------------------


def test_plugin_path_is_set_absolute_before_the_first_handle_with_stand_in_hipdnn_frontend(
        stand_in_frontend, tmp_path) -> None:
    fe = stand_in_frontend("newest")
    plugins = tmp_path / "build_a" / "plugins"
    plugins.mkdir(parents=True)
    session = HipdnnBackend().prepare(load_graph(matmul()), None, RunOptions(plugin_path=str(plugins)))
    calls = fe.WORLD.calls
    where = _index(calls, "set_engine_plugin_paths")
    assert calls[where][1:] == ([str(plugins)], fe.PluginLoadingMode.ABSOLUTE)
    assert where < _index(calls, "Handle")
    assert session.info()["loaded_plugins"] == [str(plugins / "libstand_in_plugin.so")]
    session.close()


def test_a_second_plugin_path_in_one_process_is_refused_with_stand_in_hipdnn_frontend(
        stand_in_frontend, tmp_path) -> None:
    fe = stand_in_frontend("newest")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    backend, graph = HipdnnBackend(), load_graph(matmul())
    backend.prepare(graph, None, RunOptions(plugin_path=str(a))).close()
    backend.prepare(graph, None, RunOptions(plugin_path=str(a))).close()       # same set: fine
    for other in (str(b), None):
        with pytest.raises(PluginPathConflict) as info:
            backend.prepare(graph, None, RunOptions(plugin_path=other))
        assert "once per process" in str(info.value) and "\n" not in str(info.value)
    assert [c[1] for c in fe.WORLD.calls if c[0] == "set_engine_plugin_paths"] == [[str(a)]]
    assert backend.process_key(RunOptions(plugin_path=str(a))) != backend.process_key(RunOptions(plugin_path=str(b)))


def test_default_plugins_then_a_plugin_path_is_refused_with_stand_in_hipdnn_frontend(stand_in_frontend,
                                                                                     tmp_path) -> None:
    stand_in_frontend("newest")
    backend, graph = HipdnnBackend(), load_graph(matmul())
    backend.prepare(graph, None, RunOptions()).close()
    with pytest.raises(PluginPathConflict):
        backend.prepare(graph, None, RunOptions(plugin_path=str(tmp_path)))


def test_missing_plugin_path_is_a_user_error_with_stand_in_hipdnn_frontend(stand_in_frontend, tmp_path) -> None:
    stand_in_frontend("newest")
    with pytest.raises(UserError, match="no such file"):
        HipdnnBackend().prepare(load_graph(matmul()), None, RunOptions(plugin_path=str(tmp_path / "nope")))


# --- API generations ------------------------------------------------------------------------


def test_oldest_bindings_without_from_json_are_unavailable_with_stand_in_hipdnn_frontend(stand_in_frontend) -> None:
    stand_in_frontend("oldest")
    support = HipdnnBackend().available()
    assert not support and "Graph.from_json is missing" in support.reason


def test_middle_bindings_prefer_but_cannot_force_with_stand_in_hipdnn_frontend(stand_in_frontend) -> None:
    fe = stand_in_frontend("middle")
    backend, graph = HipdnnBackend(), load_graph(matmul())
    assert backend.engines(graph, RunOptions()) == []          # no get_ranked_engine_ids to list with
    with pytest.raises(UnsupportedError, match="cannot force an engine.*prefer:MIOPEN_ENGINE"):
        backend.prepare(graph, backend.resolve_engine(graph, "MIOPEN_ENGINE", RunOptions()), RunOptions())
    session = backend.prepare(graph, backend.resolve_engine(graph, "prefer:MIOPEN_ENGINE", RunOptions()), RunOptions())
    info = session.info()
    assert info["engine_id"] is None and "cannot read back" in info["engine_note"]
    assert info["hip_event_api"] == "class"
    assert "Graph.set_preferred_engine_id_ext" in fe.WORLD.names()
    session.close()


def test_versions_say_which_api_generation_was_found_with_stand_in_hipdnn_frontend(stand_in_frontend) -> None:
    stand_in_frontend("newest")
    newest = HipdnnBackend().versions()
    stand_in_frontend("functions")
    older = HipdnnBackend().versions()
    assert newest["hipdnn_frontend"] == "1.4.0.stand-in"
    assert "hard-select" in newest["hipdnn_frontend_api"] and "hip events: class" in newest["hipdnn_frontend_api"]
    assert "stall gate: close" in newest["hipdnn_frontend_api"]
    assert older["hipdnn_frontend"] == "1.0.0.stand-in"
    assert "hard-select" not in older["hipdnn_frontend_api"]
    assert "hip events: functions" in older["hipdnn_frontend_api"]
    assert "stall gate: none" in older["hipdnn_frontend_api"]


@pytest.mark.parametrize("generation, kind, record", [("newest", "class", "HipEvent.record"),
                                                      ("functions", "functions", "hip_event_record")])
def test_both_hip_event_generations_time_an_execution_with_stand_in_hipdnn_frontend(
        stand_in_frontend, generation: str, kind: str, record: str) -> None:
    fe = stand_in_frontend(generation)
    graph = load_graph(matmul())
    session = HipdnnBackend().prepare(graph, None, RunOptions())
    _, _, ms = _run_once(session, graph)
    assert ms >= 0 and session.info()["hip_event_api"] == kind
    names = fe.WORLD.names()
    execute = names.index("Graph.execute")
    assert names[execute - 1] == record and names[execute + 1] == record
    session.close()


def test_staged_timing_holds_the_stream_on_the_stall_gate_with_stand_in_hipdnn_frontend(stand_in_frontend) -> None:
    fe = stand_in_frontend("newest")
    graph = load_graph(matmul())
    session = HipdnnBackend().prepare(graph, None, RunOptions(timing="staged"))
    _run_once(session, graph)
    names = fe.WORLD.names()
    arm = names.index("HipStallGate.arm")
    assert names[arm:arm + 5] == ["HipStallGate.arm", "HipEvent.record", "Graph.execute", "HipEvent.record",
                                  "HipStallGate.release"]
    assert names.index("hip_device_synchronize") < arm          # a clean stream before the first arm
    assert session.info()["staged"] is True
    session.close()
    assert "HipStallGate.close" in fe.WORLD.names()


def test_timed_execute_is_used_where_the_graph_has_it_with_stand_in_hipdnn_frontend(stand_in_frontend) -> None:
    """ROCm/rocm-libraries PR #11813's Graph.execute_timed_ext times the staged iterations; the
    stall gate of the bindings is not armed around it (hipDNN arms its own)."""
    fe = stand_in_frontend("timed")
    graph = load_graph(matmul())
    session = HipdnnBackend().prepare(graph, None, RunOptions(timing="staged"))
    inputs, outputs, ms = _run_once(session, graph)
    names = fe.WORLD.names()
    assert "Graph.execute_timed_ext" in names and "HipStallGate.arm" not in names
    assert ms > 0
    expected = executor.evaluate(graph, inputs).stored
    for t in graph.output_tensors:
        np.testing.assert_array_equal(outputs[t.uid], expected[t.uid])
    info = session.info()
    assert info["timer"] == "hipdnn-timed-execute" and info["staged"] is True
    assert info["timed_execute_quality"] == {"DEVICE_ONLY": 1}
    session.close()


def test_timed_execute_in_the_loop_gives_span_and_a_latency_block_with_stand_in_hipdnn_frontend(
        stand_in_frontend) -> None:
    from hipdnn_trace.bench.loop import SIDE_MIN, LoopSettings, run_loop
    from hipdnn_trace.markers import Markers

    fe = stand_in_frontend("timed")
    graph = load_graph(matmul())
    session = HipdnnBackend().prepare(graph, None, RunOptions(timing="staged"))
    session.bind(make_inputs(graph, 0))
    samples, _ = run_loop(session, LoopSettings(warmup=2, iters=5), Markers())
    calls = fe.WORLD.names()
    assert calls.count("Graph.execute_timed_ext") == 7            # warmup and timed iterations
    assert calls.count("Graph.execute") - 7 == SIDE_MIN           # the latency block: plain events
    assert samples.timing["kernel_ms"] == samples.timing["span_ms"] == "hipdnn-timed-execute"
    assert samples.timing["latency_ms"] == "hipdnn-timed-execute (unstaged)"
    assert samples.phase.count("latency") == SIDE_MIN and session.timer.staged is True
    session.close()


def test_a_bad_error_from_timed_execute_says_why_with_stand_in_hipdnn_frontend(stand_in_frontend) -> None:
    fe = stand_in_frontend("timed")
    graph = load_graph(matmul())
    session = HipdnnBackend().prepare(graph, None, RunOptions(timing="staged"))
    session.bind(make_inputs(graph, 0))
    session.fe_graph.execute_timed_ext = lambda *args: (fe.Error(False, "workspace too small"), fe.ExecutionTiming())
    session.timer.start()
    with pytest.raises(ExecutionError, match="hipDNN execute failed: workspace too small"):
        session.execute()
    assert "timed_execute_quality" not in session.info()
    session.close()


def test_staged_timing_falls_back_with_a_reason_without_a_gate_with_stand_in_hipdnn_frontend(stand_in_frontend) -> None:
    stand_in_frontend("middle")
    session = HipdnnBackend().prepare(load_graph(matmul()), None, RunOptions(timing="staged"))
    info = session.info()
    assert info["staged"] is False and "no HipStallGate" in info["staged_fallback"]
    session.close()


def test_a_failing_execute_releases_the_stall_gate_with_stand_in_hipdnn_frontend(stand_in_frontend) -> None:
    fe = stand_in_frontend("newest")
    graph = load_graph(matmul())
    session = HipdnnBackend().prepare(graph, None, RunOptions(timing="staged"))
    session.bind(make_inputs(graph, 0))

    def broken(*args):
        raise RuntimeError("device lost")

    session.fe_graph.execute = broken
    session.timer.start()
    with pytest.raises(RuntimeError, match="device lost"):
        session.execute()
    names = fe.WORLD.names()
    assert names[names.index("HipStallGate.arm"):][-2:] == ["HipStallGate.release", "hip_device_synchronize"]
    session.close()


def test_a_bad_error_from_execute_releases_the_stall_gate_and_says_why_with_stand_in_hipdnn_frontend(
        stand_in_frontend) -> None:
    fe = stand_in_frontend("newest")
    graph = load_graph(matmul())
    session = HipdnnBackend().prepare(graph, None, RunOptions(timing="staged"))
    session.bind(make_inputs(graph, 0))
    session.fe_graph.execute = lambda *args: fe.Error(False, "workspace too small")
    session.timer.start()
    with pytest.raises(ExecutionError, match="hipDNN execute failed: workspace too small"):
        session.execute()
    names = fe.WORLD.names()
    assert names[names.index("HipStallGate.arm"):][-2:] == ["HipStallGate.release", "hip_device_synchronize"]
    session.close()


def test_cold_cache_flushes_between_iterations_with_stand_in_hipdnn_frontend(stand_in_frontend) -> None:
    fe = stand_in_frontend("newest")
    session = HipdnnBackend().prepare(load_graph(matmul()), None,
                                      RunOptions(cache="cold", extra={"flush_bytes": 4096}))
    session.prepare_iteration()
    names = fe.WORLD.names()
    assert names[-2:] == ["DeviceBuffer.zeros", "hip_stream_synchronize"]
    assert session.info()["cache_flush_bytes"] == 4096
    session.close()


# --- static checks ----------------------------------------------------------------------------


def test_check_refuses_node_types_hipdnn_json_does_not_know() -> None:
    import dataclasses

    # data_sdk's intermediate LayernormFpropAttributes loads here but is not in hipDNN's newest union.
    graph = load_graph(matmul())
    graph = dataclasses.replace(graph, nodes=(dataclasses.replace(graph.nodes[0], type="LayernormFpropAttributes"),))
    support = HipdnnBackend().check(graph)
    assert not support and "LayernormFpropAttributes" in support.reason
    assert HipdnnBackend().check(load_graph(conv_nhwc()))


def test_device_other_than_zero_is_refused_with_stand_in_hipdnn_frontend(stand_in_frontend) -> None:
    stand_in_frontend("newest")
    with pytest.raises(UnsupportedError, match="HIP_VISIBLE_DEVICES=1"):
        HipdnnBackend().prepare(load_graph(matmul()), None, RunOptions(device=1))


def test_missing_bindings_make_the_backend_unavailable(monkeypatch) -> None:
    import sys

    from hipdnn_trace.backends.hipdnn_api import reset_frontend

    monkeypatch.setitem(sys.modules, "hipdnn_frontend", None)    # import raises ImportError
    monkeypatch.setattr(hipdnn_backend, "_PLUGINS", hipdnn_backend._PluginState())
    reset_frontend()
    try:
        support = HipdnnBackend().available()
        assert not support and "hipdnn_frontend is not importable" in support.reason
        assert HipdnnBackend().versions() == {}
    finally:
        reset_frontend()


def test_stall_gate_timing_in_the_loop_gives_span_and_an_unstaged_latency_block_with_stand_in_hipdnn_frontend(
        stand_in_frontend) -> None:
    """The staged span is kernel_ms and span_ms; latency_ms comes from a side block without the hold
    (it used to be a copy of the staged span)."""
    from hipdnn_trace.bench.loop import SIDE_MIN, LoopSettings, run_loop
    from hipdnn_trace.markers import Markers

    fe = stand_in_frontend("newest")
    graph = load_graph(matmul())
    session = HipdnnBackend().prepare(graph, None, RunOptions(timing="staged"))
    session.bind(make_inputs(graph, 0))
    samples, _ = run_loop(session, LoopSettings(warmup=1, iters=4), Markers())
    assert fe.WORLD.names().count("HipStallGate.arm") == 5
    assert samples.timing["span_ms"] == samples.timing["kernel_ms"] == "hip-event"
    assert samples.timing["latency_ms"] == "hip-event (unstaged)"
    assert samples.phase.count("latency") == SIDE_MIN and session.timer.staged is True
    session.close()

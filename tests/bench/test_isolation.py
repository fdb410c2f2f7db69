"""Isolation: a graph that aborts, segfaults, hangs, runs out of memory or exits is one
error row (signal, phase, output tail), and the suite goes on.

The faults come from the test backend in faulty_backend.py, a stand-in for a
crashing vendor library (no GPU here).
"""

from __future__ import annotations

import os
import threading

import pytest
from reliability_helpers import FAULTY_SPEC, HERE, write_graphs

from hipdnn_trace import backends
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings, run_graph
from hipdnn_trace.bench.isolation import STDERR_TAIL_BYTES, IsolatedRunner
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.bench.records import ERROR, OK
from hipdnn_trace.bench.suite import EXIT_ERROR, SuiteCallbacks, run_in_process, run_suite
from hipdnn_trace.errors import UserError
from hipdnn_trace.graph.sources import expand
from hipdnn_trace.markers import Markers

CONFIGS = [Config("faulty", "faulty")]
SETTINGS = RunSettings(loop=LoopSettings(warmup=1, iters=3))


@pytest.fixture(scope="module")
def runner():
    """One fork server for the module (it starts in ~2 s; each child then forks in ms)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(backends.REGISTRY, "faulty", FAULTY_SPEC)
        mp.syspath_prepend(str(HERE))
        with IsolatedRunner(timeout_s=20) as r:
            yield r


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    folder = tmp_path_factory.mktemp("graphs")
    names = ["ok__a", "abort__b", "segfault__c", "hang__d", "sigkill__e", "oom__f", "exit__g",
             "noisy__h", "raise__i", "ok__j"]
    return {s.name.rsplit("/", 1)[-1].removesuffix(".json"): s
            for s in expand([str(p) for p in write_graphs(folder, names)])}


def _one(runner, source):
    g = runner(source, CONFIGS, SETTINGS, Markers())
    assert g.graph is not None and g.graph_id, "a failure record still names its graph"
    assert len(g.configs) == 1
    return g, g.configs[0]


def test_healthy_graph_in_a_child_matches_in_process_run(runner, sources):
    g, c = _one(runner, sources["ok__a"])
    here = run_graph(sources["ok__a"], CONFIGS, SETTINGS, Markers())
    assert (c.status, c.validation) == (OK, "passed")
    assert g.graph_id == here.graph_id and g.name == here.name
    assert [(v.output, v.against, v.passed, v.total, v.max_abs) for v in g.validation] == \
           [(v.output, v.against, v.passed, v.total, v.max_abs) for v in here.validation]
    assert len(c.samples) == len(here.configs[0].samples) == 4    # 1 warmup + 3 timed
    assert [p.name for p in c.phases] == ["init", "bind", "warmup", "execute", "fetch", "close"]
    assert [p.name for p in g.phases] == ["process start", "load", "inputs", "reference", "validate"]
    assert g.phases[0].end_ns <= g.phases[1].start_ns, "the child's start ends before it loads"
    assert not g.reference and not c.outputs, "arrays stay in the child"


@pytest.mark.parametrize("name, signal_name, crash_line", [
    ("abort__b", "SIGABRT", "Fatal Python error: Aborted in faulty_backend.py"),
    ("segfault__c", "SIGSEGV", "Fatal Python error: Segmentation fault"),
])
def test_crash_is_recorded_with_signal_phase_and_output(runner, sources, name, signal_name, crash_line):
    g, c = _one(runner, sources[name])
    assert c.status == ERROR
    assert c.error.startswith(f"crashed with {signal_name}")
    assert "during faulty: warmup" in c.error       # the first execute is the first warmup iteration
    assert crash_line in c.error
    info = c.info["isolation"]
    assert info["exitcode"] < 0 and info["phase"] == "faulty: warmup"
    assert "most recent call first" in info["output_tail"]
    assert any(n.startswith("child output (tail):") for n in g.notes)
    assert [p.name for p in g.phases] == ["child process (failed)"]


def test_hang_is_killed_after_the_timeout_and_leaves_no_process(sources):
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(backends.REGISTRY, "faulty", FAULTY_SPEC)
        mp.syspath_prepend(str(HERE))
        with IsolatedRunner(timeout_s=3) as short:
            g, c = _one(short, sources["hang__d"])
    assert c.status == ERROR
    assert c.error == "timed out after 3 s (killed) during faulty: warmup"
    assert c.info["isolation"]["timed_out"] is True
    assert c.info["isolation"]["exitcode"] == -9


def test_sigkill_is_reported_as_a_possible_out_of_memory_kill(runner, sources):
    _, c = _one(runner, sources["sigkill__e"])
    assert c.status == ERROR
    assert c.error.startswith("killed by SIGKILL") or "out-of-memory killer" in c.error
    assert "out of memory" in c.error or "out-of-memory" in c.error


def test_allocation_beyond_the_limit_is_a_memory_error_in_init(runner, sources):
    _, c = _one(runner, sources["oom__f"])
    assert c.status == ERROR
    assert c.error.startswith("init: MemoryError: Unable to allocate 16.0 GiB")


def test_allocation_beyond_the_limit_in_process_keeps_the_process(faulty, sources):
    g = run_in_process(sources["oom__f"], CONFIGS, SETTINGS, Markers())
    assert g.configs[0].status == ERROR and "MemoryError" in g.configs[0].error


def test_exit_without_result(runner, sources):
    _, c = _one(runner, sources["exit__g"])
    assert c.error == "child process exited with status 3 without a result during faulty: warmup"


def test_output_tail_is_bounded_and_keeps_the_last_words(runner, sources):
    g, c = _one(runner, sources["noisy__h"])
    tail = c.info["isolation"]["output_tail"]
    assert len(tail.encode()) <= STDERR_TAIL_BYTES
    assert "last words before the abort" in c.error and "noise line 1023" in c.error
    assert "noise line 0000" not in tail


def test_python_exception_stays_an_ordinary_error(runner, sources):
    _, c = _one(runner, sources["raise__i"])
    assert c.error == "execute: RuntimeError: device fault injected by the test backend"


def test_suite_goes_on_after_every_kind_of_failure(runner, sources):
    order = ["ok__a", "abort__b", "segfault__c", "sigkill__e", "oom__f", "exit__g", "ok__j"]
    seen = []
    outcome = run_suite([sources[n] for n in order], CONFIGS, SETTINGS, Markers(),
                        SuiteCallbacks(after_graph=lambda i, g: seen.append(i)), runner=runner)
    statuses = [g.configs[0].status for g in outcome.runs]
    assert statuses == [OK, ERROR, ERROR, ERROR, ERROR, ERROR, OK]
    assert seen == list(range(1, 8))
    assert outcome.exit_code == EXIT_ERROR


def test_unpicklable_settings_are_a_user_error(runner, sources):
    class LockedHook:
        def __init__(self):
            self.lock = threading.Lock()

        def before_loop(self, graph, run): ...

        def after_loop(self, graph, run): ...

    settings = RunSettings(loop=SETTINGS.loop, hooks=[LockedHook()])
    with pytest.raises(UserError, match="--isolate: cannot hand this run's settings.*--no-isolate"):
        runner(sources["ok__a"], CONFIGS, settings, Markers())


def test_unreadable_file_is_recorded_without_a_child(runner, tmp_path):
    path = tmp_path / "gone.json"
    path.write_text("{}")
    (source,) = expand([str(path)])
    path.unlink()
    g = runner(source, CONFIGS, SETTINGS, Markers())
    assert g.status == ERROR and "cannot read" in g.error


def test_oversized_file_is_an_error_row_not_the_end_of_the_suite(runner, tmp_path):
    from hipdnn_trace.graph.load import MAX_FILE_BYTES

    path = tmp_path / "huge.json"
    with open(path, "wb") as fh:      # sparse: no disk, no memory
        fh.truncate(MAX_FILE_BYTES + 1)
    (source,) = expand([str(path)])
    g = runner(source, CONFIGS, SETTINGS, Markers())
    assert g.status == ERROR and g.error.endswith(f"graphs over {MAX_FILE_BYTES} are refused")


def test_bad_graph_file_fails_in_the_child_like_in_process(runner, tmp_path):
    path = tmp_path / "bad.json"
    path.write_bytes(b'{"name": "x", "tensors": [], "nodes": []}')
    (source,) = expand([str(path)])
    g = runner(source, CONFIGS, SETTINGS, Markers())
    here = run_graph(source, CONFIGS, SETTINGS, Markers())
    assert g.status == here.status == ERROR and g.error == here.error


def test_fork_server_is_restarted_when_killed(runner, sources):
    runner(sources["ok__a"], CONFIGS, SETTINGS, Markers())
    server = runner.server._proc
    assert server is not None
    os.kill(server.pid, 9)
    server.wait()
    g, c = _one(runner, sources["ok__j"])
    assert c.status == OK and runner.server._proc.pid != server.pid

"""A resident isolated child: one process runs graph after graph, and is replaced after a crash,
a hang, an error row or its job limit; rows equal those of a fresh child per graph.

The backend is the visible test backend (visible_backend.py: the CPU reference underneath, a
stand-in for a GPU library that logs the pid of the process that prepared each graph).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from reliability_helpers import FAULTY_SPEC, HERE, REPO, assert_same_results, write_graphs

from hipdnn_trace import backends
from hipdnn_trace.bench import isolation
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.bench.suite import SuiteCallbacks, run_suite
from hipdnn_trace.device.clock import now_ns
from hipdnn_trace.graph.sources import expand
from hipdnn_trace.markers import Markers
from hipdnn_trace.results.rundir import load_run

TIMING = ["-w", "1", "-i", "3", "--no-trace"]


def _run(args: list[str], cwd: Path, log: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["HIPDNN_TRACE_EXTRA_BACKENDS"] = f"faulty={FAULTY_SPEC},visible=visible_backend:VisibleBackend"
    env["VISIBLE_BACKEND_LOG"] = str(log)
    return subprocess.run([sys.executable, "-m", "hipdnn_trace", "run", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=240)


def _pids(log: Path) -> dict[str, int]:
    """graph -> the pid that prepared it (the backend's warm-up lines have no graph)."""
    return {row["graph"]: row["pid"] for row in map(json.loads, log.read_text().splitlines()) if "graph" in row}


def _warmed(log: Path) -> list[int]:
    return [row["pid"] for row in map(json.loads, log.read_text().splitlines()) if row.get("warm")]


def test_one_child_runs_the_healthy_graphs_and_a_crash_or_error_gets_a_fresh_one(tmp_path):
    names = ["ok__a", "ok__b", "segfault__c", "ok__d", "raise__e", "ok__f", "ok__g"]
    paths = write_graphs(tmp_path / "suite", names)
    log = tmp_path / "pids.log"
    done = _run([*map(str, paths), "--backend", "visible", *TIMING, "--isolate",
                 "--out", str(tmp_path), "--run-id", "resident"], tmp_path, log)
    assert done.returncode == 1, done.stderr   # one crash, one error row
    pids = _pids(log)
    rows = {r["graph"]: r for r in load_run(tmp_path / "resident").summary.to_dicts()}
    assert rows["segfault__c"]["status"] == "error" and "SIGSEGV" in rows["segfault__c"]["error"]
    assert rows["raise__e"]["status"] == "error"
    assert all(rows[n]["status"] == "ok" for n in names if n.startswith("ok"))
    # the graphs run in the order given; the child stays until something goes wrong
    assert pids["ok__a"] == pids["ok__b"] == pids["segfault__c"]
    assert pids["ok__d"] != pids["segfault__c"]          # the crash took its child down
    assert pids["ok__d"] == pids["raise__e"]
    assert pids["ok__f"] != pids["raise__e"]             # an error row retires the child
    assert pids["ok__f"] == pids["ok__g"]
    # each of the three children set itself up once, before its first graph
    assert _warmed(log) == list(dict.fromkeys(pids[n] for n in names))
    meta = json.loads((tmp_path / "resident" / "run.json").read_text())
    assert meta["isolation"]["child"] == "resident"


def test_rows_equal_a_fresh_child_per_graph(tmp_path):
    names = ["ok__a", "nan__b", "segfault__c", "ok__d", "unwritten__e"]
    write_graphs(tmp_path / "suite", names)
    a = _run([str(tmp_path / "suite"), "--backend", "visible", *TIMING, "--isolate", "--out", str(tmp_path),
              "--run-id", "resident"], tmp_path, tmp_path / "a.log")
    b = _run([str(tmp_path / "suite"), "--backend", "visible", *TIMING, "--isolate", "--fresh-child",
              "--out", str(tmp_path), "--run-id", "fresh"], tmp_path, tmp_path / "b.log")
    assert a.returncode == b.returncode == 1
    assert len(set(_pids(tmp_path / "b.log").values())) == len(names)   # a new child per graph
    assert_same_results(tmp_path / "resident", tmp_path / "fresh", trace=False)


def test_a_hang_is_killed_and_the_next_graph_gets_a_fresh_child(tmp_path):
    paths = write_graphs(tmp_path / "suite", ["ok__a", "hang__b", "ok__c"])
    log = tmp_path / "pids.log"
    done = _run([*map(str, paths), "--backend", "visible", *TIMING, "--graph-timeout", "3",
                 "--out", str(tmp_path), "--run-id", "r"], tmp_path, log)
    assert done.returncode == 1
    rows = {r["graph"]: r for r in load_run(tmp_path / "r").summary.to_dicts()}
    assert "timed out after 3 s" in rows["hang__b"]["error"] and rows["ok__c"]["status"] == "ok"
    pids = _pids(log)
    assert pids["ok__a"] == pids["hang__b"] != pids["ok__c"]


def test_the_job_limit_retires_a_child(tmp_path, monkeypatch, faulty):
    """In process: with a limit of 2 jobs, the third graph starts a new child."""
    from hipdnn_trace.bench.config import Config
    from hipdnn_trace.bench.graph_run import RunSettings
    from hipdnn_trace.bench.loop import LoopSettings
    from hipdnn_trace.graph.sources import expand
    from hipdnn_trace.markers import Markers

    monkeypatch.setattr(isolation, "MAX_JOBS_PER_CHILD", 2)
    write_graphs(tmp_path / "suite", ["ok__a", "ok__b", "ok__c"])
    settings = RunSettings(loop=LoopSettings(warmup=0, iters=2))
    configs = [Config("faulty", "faulty")]
    pids = []
    with isolation.IsolatedRunner(60, resident=True) as runner:
        for source in expand([str(tmp_path / "suite")]):
            run = runner(source, configs, settings, Markers())
            assert run.configs[0].status == "ok"
            pids.append(runner._child.pid if runner._child is not None else None)
    assert pids[0] == pids[1] != pids[2]


def test_a_child_whose_resident_set_grew_is_retired(tmp_path, monkeypatch, faulty):
    """In process: the job count is far off, but the child's resident set (read by the parent from
    /proc, here a stand-in that grows 3 GiB a graph) passes the growth limit: the child is replaced."""
    from hipdnn_trace.bench.config import Config
    from hipdnn_trace.bench.graph_run import RunSettings
    from hipdnn_trace.bench.loop import LoopSettings
    from hipdnn_trace.graph.sources import expand
    from hipdnn_trace.markers import Markers

    grown: dict[int, int] = {}

    def growing(pid: int) -> int:
        grown[pid] = grown.get(pid, 0) + 1
        return grown[pid] * (3 << 30)

    monkeypatch.setattr(isolation, "RETIRE_GROWTH_BYTES", 5 << 30)
    monkeypatch.setattr(isolation, "resident_set_bytes", growing)
    write_graphs(tmp_path / "suite", [f"ok__{c}" for c in "abcde"])
    settings = RunSettings(loop=LoopSettings(warmup=0, iters=2))
    configs = [Config("faulty", "faulty")]
    pids = []
    with isolation.IsolatedRunner(60, resident=True) as runner:
        for source in expand([str(tmp_path / "suite")]):
            assert runner(source, configs, settings, Markers()).configs[0].status == "ok"
            pids.append(runner._child.pid)
    # baseline read before graph 2 (3 GiB), +3 GiB before graph 3, +6 GiB before graph 4: retired there
    assert pids[0] == pids[1] == pids[2] != pids[3] == pids[4]


@pytest.fixture
def faulty(monkeypatch):
    from hipdnn_trace import backends

    monkeypatch.setitem(backends.REGISTRY, "faulty", FAULTY_SPEC)
    if str(HERE) not in sys.path:
        monkeypatch.syspath_prepend(str(HERE))
    return "faulty"


def test_a_spent_child_is_replaced_between_graphs_not_inside_one(tmp_path, monkeypatch, faulty):
    """With a limit of 3 jobs (the set-up is one), the successors are started and set up between graphs
    2/3 and 4/5, so no graph carries a process start; none is started after the last graph."""
    from hipdnn_trace.bench.config import Config
    from hipdnn_trace.bench.graph_run import RunSettings
    from hipdnn_trace.bench.loop import LoopSettings
    from hipdnn_trace.bench.suite import SuiteCallbacks, run_suite
    from hipdnn_trace.graph.sources import expand
    from hipdnn_trace.markers import Markers

    monkeypatch.setattr(isolation, "MAX_JOBS_PER_CHILD", 3)
    write_graphs(tmp_path / "suite", [f"ok__{c}" for c in "abcde"])
    settings = RunSettings(loop=LoopSettings(warmup=0, iters=2))
    configs = [Config("faulty", "faulty")]
    inside: list[bool] = [False]
    warmed_inside: list[bool] = []

    class Watched:   # the runner, telling whether a set-up happened inside a graph's call (its wall)
        def __call__(self, *args, **kwargs):
            inside[0] = True
            try:
                return runner(*args, **kwargs)
            finally:
                inside[0] = False

        def between_graphs(self):
            return runner.between_graphs()

    with isolation.IsolatedRunner(60, resident=True) as runner:
        assert runner.warm(configs, settings) is not None
        real_warm = runner.warm
        monkeypatch.setattr(runner, "warm", lambda *a: (warmed_inside.append(inside[0]), real_warm(*a))[1])
        outcome = run_suite(expand([str(tmp_path / "suite")]), configs, settings, Markers(), SuiteCallbacks(),
                            runner=Watched())
    assert [g.configs[0].status for g in outcome.runs] == ["ok"] * 5
    assert len(runner.successor_warm_ups) == 2, "replaced after graphs 2 and 4, not after the last"
    assert warmed_inside == [False, False], "each successor was set up between graphs, outside every graph's wall"
    for g in outcome.runs:
        assert "process start" not in {p.name for p in g.phases}, g.name


def _resident_suite(sources, callbacks: SuiteCallbacks):
    """The faulty test backend's graphs through one resident child, with ``callbacks``."""
    runner = isolation.IsolatedRunner(60, resident=True)
    try:
        return run_suite(sources, [Config("faulty", "faulty")], RunSettings(loop=LoopSettings(warmup=1, iters=3)),
                         Markers(), callbacks, runner=runner)
    finally:
        runner.close()


def test_the_resident_child_starts_the_next_graph_while_the_suite_records_the_last(tmp_path, monkeypatch):
    """The suite hands graph i+1 to the resident child before it notes and commits graph i (bench/suite.py,
    ``hand_over_next``): the child's work on i+1 begins before the suite's after-graph work on i ends.
    Rows stay in order, one per graph; a crash in a handed-over graph is that graph's error row only."""
    monkeypatch.setitem(backends.REGISTRY, "faulty", FAULTY_SPEC)
    monkeypatch.syspath_prepend(str(HERE))
    sources = expand([str(p) for p in write_graphs(tmp_path, ["ok__a", "ok__b", "segfault__c", "ok__d"])])
    after_ends: dict[str, int] = {}

    def slow_after(index: int, g) -> None:   # a commit that takes a while
        time.sleep(0.3)
        after_ends[g.name] = now_ns()

    outcome = _resident_suite(sources, SuiteCallbacks(after_graph=slow_after))
    names = [g.name for g in outcome.runs]
    assert names == ["ok__a", "ok__b", "segfault__c", "ok__d"]
    first_phase = {g.name: min(p.start_ns for c in g.configs for p in c.phases) for g in outcome.runs
                   if g.configs and g.configs[0].phases}
    assert first_phase["ok__b"] < after_ends["ok__a"]   # b ran while a was being recorded
    rows = {g.name: g.configs[0] for g in outcome.runs}
    assert rows["segfault__c"].status == "error" and "SIGSEGV" in rows["segfault__c"].error
    assert rows["ok__a"].status == rows["ok__b"].status == rows["ok__d"].status == "ok"
    b = next(g for g in outcome.runs if g.name == "ok__b")
    assert b.started_ns is not None and b.ready_ns is not None and b.started_ns <= b.ready_ns


def test_no_graph_reaches_the_resident_child_before_the_suite_says_it_may_start(tmp_path, monkeypatch):
    """``before_start`` (a plan builder still making the graph's plan, runs/plan_builders.py) is asked for
    every graph before the runner gets it, on the usual path and when the child is handed the next graph
    early: a graph whose start is held begins its work only after the hold ends."""
    monkeypatch.setitem(backends.REGISTRY, "faulty", FAULTY_SPEC)
    monkeypatch.syspath_prepend(str(HERE))
    sources = expand([str(p) for p in write_graphs(tmp_path, ["ok__a", "ok__b", "ok__c"])])
    released: dict[int, int] = {}

    def hold(position: int) -> None:
        if position == 2 and position not in released:
            time.sleep(0.4)   # graph b's plan is still being built
        released.setdefault(position, now_ns())

    outcome = _resident_suite(sources, SuiteCallbacks(before_start=hold))
    assert sorted(released) == [1, 2, 3]
    for position, g in enumerate(outcome.runs, 1):
        first = min(p.start_ns for c in g.configs for p in c.phases)
        assert first >= released[position], g.name
        assert g.configs[0].status == "ok"

"""``run --build-workers`` (runs/plan_builders.py, backends/cudnn_prebuild.py): plans the cache lacks are built
before the suite, under the key the suite's session looks them up with.

cuDNN cannot run here (no NVIDIA GPU): the builder is driven by the stand-in frontend of test_plan_cache.py
(its graphs serialize to bytes and refuse bytes they did not write), with the GPU's description and the build
itself mocked; the graphs, their translation to cuDNN's plan, the keys and the cache files are the real ones.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from test_plan_cache import StandInCudnn, StandInGraph

from hipdnn_trace.backends import cudnn_graph, cudnn_plan_store, cudnn_prebuild, plan_cache
from hipdnn_trace.backends.base import Engine
from hipdnn_trace.backends.cudnn import notes_to_deselect
from hipdnn_trace.backends.plan_cache import PlanCache
from hipdnn_trace.bench.config import Config
from hipdnn_trace.device.cuda import DeviceInfo
from hipdnn_trace.graph.load import load_file
from hipdnn_trace.graph.sources import expand
from hipdnn_trace.runs import plan_builders

REPO = Path(__file__).resolve().parents[2]
GRAPHS = sorted((REPO / "graphs" / "matmul").glob("*.json"))[:4]
H200 = DeviceInfo(index=0, name="NVIDIA H200", compute_capability="9.0", sm_count=132, l2_bytes=50 << 20,
                  memory_bytes=141 << 30, driver_version=13000, runtime_version=13000)


class StandInFrontend(StandInCudnn):
    """What the builder asks of cuDNN's module besides pygraph: a handle and the library's version."""

    @staticmethod
    def create_handle() -> int:
        return 1

    @staticmethod
    def destroy_handle(handle: int) -> None:
        pass

    @staticmethod
    def backend_version() -> int:
        return 91900


class MockedBuild:
    """A built plan as BuiltGraph hands it on: the graph to serialize, the engine chosen, the notes left out."""

    def __init__(self, plan) -> None:
        self.graph = StandInGraph(plan=repr(plan.ops)[:40], workspace=1024)
        self.deselected = notes_to_deselect(plan)

    def select(self, engine):
        return Engine(index=0, name="eng0", knobs={}, workspace_bytes=1024)


@pytest.fixture
def mocked_gpu(monkeypatch):
    builds: list = []
    monkeypatch.setattr(cudnn_prebuild.cuda, "set_device", lambda device: None)
    monkeypatch.setattr(cudnn_plan_store.cuda, "device_info", lambda device: H200)
    monkeypatch.setattr(cudnn_prebuild, "build_graph", lambda plan, handle: builds.append(plan) or MockedBuild(plan))
    return builds


def test_mocked_cudnn_builders_store_what_the_suites_session_restores(tmp_path, mocked_gpu):
    cache = PlanCache(tmp_path / "plans")
    job = cudnn_prebuild.BuildJob(expand([str(p) for p in GRAPHS]), cache)
    assert cudnn_prebuild.build_missing(job, StandInFrontend) == {"built": len(GRAPHS)}
    for path in GRAPHS:   # the key a CudnnSession computes for the heuristic's plan (backends/cudnn.py _plan)
        plan = cudnn_graph.plan(load_file(path))
        key = cudnn_plan_store.plan_key(StandInFrontend, plan, None, notes_to_deselect(plan), 0)
        restored, engine = cudnn_plan_store.restore(StandInFrontend, cache, key, handle=1)
        assert engine.name == "eng0" and restored.deselected == notes_to_deselect(plan)
    again = cudnn_prebuild.BuildJob(expand([str(p) for p in GRAPHS]), cache)
    assert cudnn_prebuild.build_missing(again, StandInFrontend) == {"cached": len(GRAPHS)}
    assert len(mocked_gpu) == len(GRAPHS)   # nothing built twice


def test_mocked_cudnn_builder_counts_refusals_and_failed_builds(tmp_path, mocked_gpu, monkeypatch):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    job = cudnn_prebuild.BuildJob(expand([str(GRAPHS[0]), str(bad)]), PlanCache(tmp_path / "plans"))

    def raising(plan, handle):
        raise RuntimeError("cudnnGraphNotSupportedError")

    monkeypatch.setattr(cudnn_prebuild, "build_graph", raising)
    assert cudnn_prebuild.build_missing(job, StandInFrontend) == {"not_built": 1, "refused": 1}


@pytest.mark.parametrize(("choice", "configs", "graphs", "cpus", "expected"), [
    ("auto", [Config("cudnn", "cudnn")], 108, 16, 8),
    ("auto", [Config("cudnn", "cudnn")], 108, 4, 2),
    ("auto", [Config("cudnn", "cudnn")], 20, 16, 4),
    ("auto", [Config("cudnn", "cudnn")], 7, 16, 0),          # a few graphs: built in the suite
    ("auto", [Config("torch", "torch")], 108, 16, 0),        # no cuDNN plan to build
    ("auto", [Config("cudnn:3", "cudnn", engine="3")], 108, 16, 0),   # an engine asked for: not the heuristic's
    (3, [Config("cudnn", "cudnn")], 2, 16, 2),
    (0, [Config("cudnn", "cudnn")], 108, 16, 0),
])
def test_how_many_builders(choice, configs, graphs, cpus, expected, tmp_path):
    assert plan_builders.worker_count(choice, configs, graphs, PlanCache(tmp_path), cpus) == expected


def test_no_builder_without_a_plan_cache():
    assert plan_builders.worker_count("auto", [Config("cudnn", "cudnn")], 108, None, 16) == 0


def test_a_builder_that_dies_is_a_note_and_the_counts_of_the_others_add_up(tmp_path):
    """Builders.wait with stand-in builder processes (the real one needs cuDNN): one prints its counts, one
    dies with a message on stderr, as a builder without cuDNN's frontend does."""
    log = tmp_path / "builder1.log"
    ok = subprocess.Popen([sys.executable, "-c", "print('{\"built\": 3, \"cached\": 1}')"],
                          stdout=subprocess.PIPE, text=True)
    with open(log, "wb") as err:
        dead = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit('no module named cudnn')"],
                                stdout=subprocess.PIPE, stderr=err, text=True)
    block = plan_builders.Builders([ok, dead], tmp_path).wait()
    assert block["workers"] == 2 and block["built"] == 3 and block["cached"] == 1
    assert block["failed"] == ["builder 1: exit 1: no module named cudnn"]
    assert not tmp_path.exists()   # job files and logs removed


def test_cli_takes_auto_or_a_count(tmp_path):
    from hipdnn_trace.commands import argtypes

    assert argtypes.count_or_auto("auto") == "auto" and argtypes.count_or_auto("4") == 4
    done = subprocess.run([sys.executable, "-m", "hipdnn_trace", "run", str(GRAPHS[0]), "--build-workers", "-2",
                           "--out", str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 1 and "--build-workers" in done.stderr and "Traceback" not in done.stderr


def _stand_in_builder(lines: list[tuple[float, str]]) -> subprocess.Popen:
    """A process that prints ``lines`` as a builder does, each after its delay (the real one needs cuDNN)."""
    code = "import sys, time\n" + "".join(f"time.sleep({d}); print({text!r}, flush=True)\n" for d, text in lines)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def test_the_suite_waits_for_one_graphs_plan_not_for_every_builder(tmp_path):
    """Builders.ready: graph 0 (builder 0's first) is ready as soon as builder 0 says it, while builder 1 is still
    at work on graph 1; graph 1 waits for its line; a graph its builder never said (it died) waits only until
    that builder ended. The wait and the graphs started while builders ran are in run.json's block."""
    fast = _stand_in_builder([(0.0, '{"graph": 0, "result": "built"}'), (0.0, '{"graph": 2, "result": "cached"}'),
                              (0.0, '{"built": 1, "cached": 1}')])
    slow = _stand_in_builder([(1.0, '{"graph": 1, "result": "built"}'), (0.3, "not json: a library's chatter"),
                              (0.0, '{"built": 1}')])
    builders = plan_builders.Builders([fast, slow], tmp_path)
    t0 = time.monotonic()
    builders.ready(0)
    assert time.monotonic() - t0 < 0.9 and builders.building()   # builder 1 has not said graph 1 yet
    builders.ready(1)
    assert time.monotonic() - t0 >= 0.9
    builders.ready(0)   # asked again (a hand-over that did not happen): counted once
    while builders.building():
        time.sleep(0.01)
    ended = time.monotonic()
    time.sleep(0.5)   # the suite's last graphs: the builders' seconds end with the last builder, not here
    block = builders.wait()
    assert block["built"] == 2 and block["cached"] == 1 and "failed" not in block
    assert 1.2 <= block["seconds"] <= ended - builders.started + 0.05
    assert block["graphs_started_while_building"] == 2 and block["waited_s"] >= 0.8


def test_a_graph_whose_builder_died_waits_only_until_it_ended(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(0.2); sys.exit('killed')"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    builders = plan_builders.Builders([dead], tmp_path, limit_s=30)
    t0 = time.monotonic()
    builders.ready(0)
    assert time.monotonic() - t0 < 10 and not builders.building()
    assert builders.wait()["failed"] == ["builder 0: exit 1: no output"]


def test_a_builder_past_its_time_limit_releases_the_suite_and_is_stopped(tmp_path):
    stuck = _stand_in_builder([(30.0, '{"graph": 0, "result": "built"}')])
    builders = plan_builders.Builders([stuck], tmp_path, limit_s=0.5)
    t0 = time.monotonic()
    builders.ready(0)
    assert 0.3 <= time.monotonic() - t0 < 10
    assert builders.wait()["failed"] == ["builder 0: stopped after 0.5 s"]


def test_mocked_cudnn_builder_says_each_graph_by_its_place_in_the_suite_then_its_counts(tmp_path, mocked_gpu,
                                                                                        monkeypatch, capsys):
    """What Builders reads: one line per graph as it is done, with the graph's position in the suite (builder 1
    of 2 has the suite's graphs 1 and 3), then the counts."""
    import json
    import pickle

    monkeypatch.setattr(cudnn_prebuild, "_cudnn", lambda: StandInFrontend)
    sources = expand([str(p) for p in GRAPHS])
    job = cudnn_prebuild.BuildJob(sources[1::2], PlanCache(tmp_path / "plans"), positions=[1, 3])
    (tmp_path / "job").write_bytes(pickle.dumps(job))
    assert cudnn_prebuild.main([str(tmp_path / "job")]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [{"graph": 1, "result": "built"}, {"graph": 3, "result": "built"}, {"built": 2}]


def test_a_builder_whose_slice_is_cached_never_makes_a_cuda_context(tmp_path, mocked_gpu, monkeypatch):
    """Every warm run: the builder finds each plan in the cache and ends without a CUDA context or a cuDNN
    handle, so it does not contend with the suite's child making its own on the same GPU."""
    cache = PlanCache(tmp_path / "plans")
    assert cudnn_prebuild.build_missing(cudnn_prebuild.BuildJob(expand([str(p) for p in GRAPHS]), cache),
                                        StandInFrontend) == {"built": len(GRAPHS)}
    touched: list[str] = []
    monkeypatch.setattr(cudnn_prebuild.cuda, "set_device", lambda device: touched.append("context"))
    monkeypatch.setattr(StandInFrontend, "create_handle", staticmethod(lambda: touched.append("handle") or 1))
    again = cudnn_prebuild.BuildJob(expand([str(p) for p in GRAPHS]), cache)
    assert cudnn_prebuild.build_missing(again, StandInFrontend) == {"cached": len(GRAPHS)}
    assert touched == []
    empty = cudnn_prebuild.BuildJob(expand([str(p) for p in GRAPHS]), PlanCache(tmp_path / "other"))
    assert cudnn_prebuild.build_missing(empty, StandInFrontend) == {"built": len(GRAPHS)}   # one context for all
    assert touched == ["context", "handle"]


def _failing_build(error: Exception) -> tuple[list[object], Callable[[object, object], object]]:
    """A ``build_graph`` that raises ``error``, and the plans it was asked to build."""
    tries: list[object] = []

    def build(plan: object, handle: object) -> object:
        tries.append(plan)
        raise error

    return tries, build


def test_a_plan_cudnn_could_not_build_is_not_tried_again_by_the_next_runs_builder(tmp_path, mocked_gpu, monkeypatch):
    """cuDNN refused 6 graphs/perf plans on every warm run's builders (0.4 s of engine attempts for one); the
    failure is remembered under the plan's key plus a builder-only field, so the suite's session, which looks
    up the plain key, never mistakes it for a plan; a failure that is not a refusal (UnsupportedError) it builds
    (and reports) itself."""
    tries, raising = _failing_build(RuntimeError("cudnnGraphNotSupportedError: no engine"))
    monkeypatch.setattr(cudnn_prebuild, "build_graph", raising)
    cache = PlanCache(tmp_path / "plans")
    for _ in range(2):
        job = cudnn_prebuild.BuildJob(expand([str(GRAPHS[0])]), cache)
        assert cudnn_prebuild.build_missing(job, StandInFrontend) == {"not_built": 1}
    assert len(tries) == 1   # the second run's builder remembered it
    plan = cudnn_graph.plan(load_file(GRAPHS[0]))
    key = cudnn_plan_store.plan_key(StandInFrontend, plan, None, notes_to_deselect(plan), 0)
    assert cudnn_plan_store.restore(StandInFrontend, cache, key, handle=1) is None   # a session: a miss, built
    monkeypatch.setattr(StandInFrontend, "backend_version", staticmethod(lambda: 92000))   # a new cuDNN: tried
    assert cudnn_prebuild.build_missing(cudnn_prebuild.BuildJob(expand([str(GRAPHS[0])]), cache),
                                        StandInFrontend) == {"not_built": 1}
    assert len(tries) == 2
    assert cudnn_plan_store.remembered_failure(cache, key) is None, "not a refusal: the session builds it itself"


def _session(cache: PlanCache, path: Path):
    """A CudnnSession as far as ``_plan`` reads it (the rest needs a GPU)."""
    from hipdnn_trace.backends.base import RunOptions
    from hipdnn_trace.backends.cudnn import CudnnSession

    session = CudnnSession.__new__(CudnnSession)
    session.plan = cudnn_graph.plan(load_file(path))
    session.options = RunOptions(extra={plan_cache.OPTION: cache})
    session.handle = 1
    return session


def test_a_refusal_is_reported_again_from_the_cache_without_building(tmp_path, mocked_gpu, monkeypatch):
    """cuDNN found no engine (UnsupportedError): the builder or the first session remembers cuDNN's words; the next
    session's row says them again, saying they are remembered, without trying (0.4 s of engine attempts for 6
    graphs/perf plans on every warm run). The same key under another cuDNN is tried again."""
    from hipdnn_trace.backends import cudnn
    from hipdnn_trace.errors import UnsupportedError

    tries, refusing = _failing_build(UnsupportedError("cuDNN: none of 3 plans builds (no engine)"))
    monkeypatch.setattr(cudnn, "build_graph", refusing)
    cache = PlanCache(tmp_path / "plans")
    for _ in range(2):
        with pytest.raises(UnsupportedError) as refused:
            _session(cache, GRAPHS[1])._plan(StandInFrontend, None)
    assert len(tries) == 1
    assert str(refused.value).startswith("cuDNN: none of 3 plans builds (no engine) (remembered by the plan cache")
    monkeypatch.setattr(StandInFrontend, "backend_version", staticmethod(lambda: 92000))
    with pytest.raises(UnsupportedError, match="^cuDNN: none of 3 plans builds [(]no engine[)]$"):
        _session(cache, GRAPHS[1])._plan(StandInFrontend, None)
    assert len(tries) == 2
    monkeypatch.setattr(cudnn_prebuild, "build_graph", refusing)   # a builder's refusal is remembered the same way
    job = cudnn_prebuild.BuildJob(expand([str(GRAPHS[2])]), cache)
    assert cudnn_prebuild.build_missing(job, StandInFrontend) == {"not_built": 1}
    with pytest.raises(UnsupportedError, match="remembered by the plan cache"):
        _session(cache, GRAPHS[2])._plan(StandInFrontend, None)
    assert len(tries) == 3


def test_a_closed_session_s_cudnn_handle_serves_the_next_session_and_open_ones_never_share(monkeypatch):
    """cuDNN handles are kept per device for the next session (1.6 ms a creation per graph): two sessions open at
    once (an interleaved A/B) hold two handles; a closed one's handle goes to the next session of its device."""
    from types import SimpleNamespace

    from hipdnn_trace.backends import cudnn
    from hipdnn_trace.backends.base import RunOptions

    made = iter(range(100))
    frontend = SimpleNamespace(create_handle=lambda: f"handle{next(made)}")
    monkeypatch.setattr(cudnn, "_IDLE_HANDLES", {})
    first, second = cudnn._take_handle(frontend, 0), cudnn._take_handle(frontend, 0)
    assert first != second

    def closed(handle: str, device: int) -> None:
        session = cudnn.CudnnSession.__new__(cudnn.CudnnSession)
        session.__dict__.update(_cuda_graph=None, _flush=None, _buffers={}, workspace=None, built=None, handle=handle,
                                options=RunOptions(device=device), stream=SimpleNamespace(destroy=lambda: None))
        session.close()
        assert session.handle is None

    closed(first, 0)
    assert cudnn._take_handle(frontend, 1) == "handle2", "another device's handle is never lent"
    assert cudnn._take_handle(frontend, 0) == first
    assert cudnn._take_handle(frontend, 0) == "handle3"


def test_mocked_cudnn_known_refusal_says_before_any_input_what_the_session_would_raise(tmp_path, mocked_gpu,
                                                                                      monkeypatch):
    """``CudnnBackend.known_refusal``, asked by ``run`` before it makes inputs and the reference: a refusal the
    plan cache remembers, in the words the session raises; None with no cache, with nothing remembered, or with
    a plan stored under the same key (a session restores that first); a cuDNN known to crash on MoE GATHER says
    so without a cache."""
    from hipdnn_trace.backends import cudnn
    from hipdnn_trace.backends.base import RunOptions
    from hipdnn_trace.errors import UnsupportedError

    monkeypatch.setattr(cudnn, "_cudnn", lambda: StandInFrontend)
    tries, refusing = _failing_build(UnsupportedError("cuDNN: none of 2 plans builds (no engine)"))
    monkeypatch.setattr(cudnn, "build_graph", refusing)
    cache = PlanCache(tmp_path / "plans")
    backend, graph = cudnn.CudnnBackend(), load_file(GRAPHS[1])
    with_cache = RunOptions(extra={plan_cache.OPTION: cache})
    assert backend.known_refusal(graph, None, with_cache) is None   # nothing remembered yet
    with pytest.raises(UnsupportedError):
        _session(cache, GRAPHS[1])._plan(StandInFrontend, None)   # the first session's build, remembered
    with pytest.raises(UnsupportedError) as raised:
        _session(cache, GRAPHS[1])._plan(StandInFrontend, None)
    assert len(tries) == 1
    assert backend.known_refusal(graph, None, with_cache) == str(raised.value)
    assert backend.known_refusal(graph, None, RunOptions()) is None   # --no-plan-cache: prepare tries
    other = Engine(index=3, name="eng3", knobs={}, workspace_bytes=0)
    assert backend.known_refusal(graph, other, with_cache) is None   # another engine is another key
    plan = cudnn_graph.plan(graph)
    key = cudnn_plan_store.plan_key(StandInFrontend, plan, None, notes_to_deselect(plan), 0)
    cache.put(key, b"plan", {})
    assert backend.known_refusal(graph, None, with_cache) is None   # a stored plan is tried first
    gather = load_file(REPO / "graphs" / "perf" / "moe" / "qwen3_30b_a3b_experts_gate_up_gather_t4096_bf16.json")
    with pytest.raises(UnsupportedError) as crash:
        backend.prepare(gather, None, RunOptions())
    assert backend.known_refusal(gather, None, RunOptions()) == str(crash.value)
    assert "crashes executing MoE GATHER" in str(crash.value)

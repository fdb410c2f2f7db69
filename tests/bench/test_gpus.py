"""--gpus: one isolated worker per GPU, longest graphs first, one run directory equal to a serial run.

There is no GPU here: the GPUs are fake. ``--gpus 0,1`` with explicit indices never asks
for the GPU count, and the test backend (visible_backend.py, a stand-in for a GPU
backend) logs the visibility variable each worker process saw. The pool, the pinning,
the single writer, crashes, kills and --resume are real. A real two-GPU run is at the end
(``gpu`` + ``cuda``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import polars as pl
import pytest
from reliability_helpers import FAULTY_SPEC, HERE, REPO, assert_same_results, write_graphs

from hipdnn_trace import backends
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.cpu_share import CPUS_VARIABLE, split_cores, worker_env
from hipdnn_trace.bench.gpus import GpuPool, GpuWorker, estimate_s, longest_first, parse_gpus
from hipdnn_trace.bench.graph_run import RunSettings
from hipdnn_trace.bench.isolation import IsolatedRunner
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.bench.records import ERROR, OK
from hipdnn_trace.bench.suite import SuiteCallbacks
from hipdnn_trace.bench.warm import PIPELINE_GRAPH
from hipdnn_trace.cli import main as cli_main
from hipdnn_trace.device import visibility
from hipdnn_trace.errors import UserError
from hipdnn_trace.graph.sources import expand
from hipdnn_trace.markers import Markers
from hipdnn_trace.results.rundir import load_run
from hipdnn_trace.trace import read_trace

TIMING = ["-w", "1", "-i", "6"]
VISIBLE_SPEC = "visible_backend:VisibleBackend"
#: the suite: healthy slow graphs (0.35 s each, so both workers get some), a crash, a NaN output
NAMES = ["slow__0", "slow__1", "sigkill__a", "slow__2", "nan__b", "slow__3", "slow__4", "slow__5"]


def _env(log: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in visibility.AMD_ORDER}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["HIPDNN_TRACE_EXTRA_BACKENDS"] = f"faulty={FAULTY_SPEC},visible={VISIBLE_SPEC}"
    if log is not None:
        env["VISIBLE_BACKEND_LOG"] = str(log)
    return env


def _cli(*args: str, cwd: Path, log: Path | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hipdnn_trace", "run", *args], cwd=cwd, env=_env(log),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=180)
    return proc.returncode, out, err


def _entries(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _log(path: Path) -> list[dict]:
    """The backend's prepare lines (one per graph run; not the set-up's, nor its pipeline warm-up graph's)."""
    return [entry for entry in _entries(path) if not entry.get("warm") and entry.get("graph") != PIPELINE_GRAPH]


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("suite")
    write_graphs(folder, NAMES)
    return folder


@pytest.fixture(scope="module")
def serial(suite, tmp_path_factory) -> tuple[Path, int]:
    out = tmp_path_factory.mktemp("serial")
    code, _, err = _finish(_cli(str(suite), "-b", "visible", *TIMING, "--out", str(out), "--run-id", "serial",
                                "-q", cwd=out))
    assert code == 1, err   # the crash is an error row
    return out / "serial", code


@pytest.fixture(scope="module")
def on_two_gpus(suite, tmp_path_factory) -> tuple[Path, int, list[dict]]:
    out = tmp_path_factory.mktemp("gpus")
    log = out / "visible.jsonl"
    code, _, err = _finish(_cli(str(suite), "-b", "visible", *TIMING, "--gpus", "0,1", "--out", str(out),
                                "--run-id", "gpus", "-q", cwd=out, log=log))
    return out / "gpus", code, _log(log)


# ------------------------------------------------------------------ units

def test_parse_gpus():
    assert parse_gpus("all") is None
    assert parse_gpus("0,2,5") == [0, 2, 5]
    for bad in ("", "0,,1", "-1", "gpu0", "1,1"):
        with pytest.raises(UserError, match="--gpus"):
            parse_gpus(bad)


def test_pin_uses_the_vendors_variable_and_the_suites_own_view():
    assert visibility.pin("nvidia", 3, {}) == {"CUDA_VISIBLE_DEVICES": "3"}
    assert visibility.pin(None, 1, {}) == {"CUDA_VISIBLE_DEVICES": "1"}   # CUDA and HIP both honour it
    # a Slurm job with GPUs 4 and 6: index 1 is the job's second GPU, not the node's
    assert visibility.pin("nvidia", 1, {"CUDA_VISIBLE_DEVICES": "4,GPU-6a"}) == {"CUDA_VISIBLE_DEVICES": "GPU-6a"}
    with pytest.raises(UserError, match="sees 2 GPU"):
        visibility.pin("nvidia", 2, {"CUDA_VISIBLE_DEVICES": "4,6"})
    assert visibility.pin("amd", 2, {}) == {"ROCR_VISIBLE_DEVICES": "2"}   # ROCm's advice on Linux
    # HIP's filter counts what ROCr left visible: narrow the innermost one set
    assert visibility.pin("amd", 0, {"ROCR_VISIBLE_DEVICES": "2,3", "HIP_VISIBLE_DEVICES": "1,0"}) == \
        {"HIP_VISIBLE_DEVICES": "1"}
    assert visibility.gpu_count("amd", {"ROCR_VISIBLE_DEVICES": "2,3,5"}) == 3


def test_longest_first_orders_by_estimate_ties_in_suite_order(tmp_path):
    assert longest_first([1.0, 3.0, 2.0, 3.0, 0.0]) == [1, 3, 2, 0, 4]
    small, big = (s for s in expand([str(p) for p in write_graphs(tmp_path, ["a", "b"])]))
    assert estimate_s(big) > estimate_s(small) > 0   # write_graphs makes each graph larger than the last
    (tmp_path / "broken.json").write_text("{")
    assert estimate_s(expand([str(tmp_path / "broken.json")])[0]) == 0.0


# -------------------------------------------------------------- the pool

def test_each_worker_gets_its_own_cores_and_thread_pools_of_that_size(on_two_gpus):
    """Workers do not contend for the host: disjoint CPU sets, thread pools sized to them."""
    run_dir, _, log = on_two_gpus
    by_gpu: dict[str, set[tuple[int, ...]]] = {}
    for line in log:
        by_gpu.setdefault(line["CUDA_VISIBLE_DEVICES"], set()).add(tuple(line["cpus"]))
        assert line["threads"] == str(len(line["cpus"]))
    assert by_gpu and set(by_gpu) <= {"0", "1"} and all(len(s) == 1 for s in by_gpu.values())
    meta = json.loads((run_dir / "run.json").read_text())
    shares = {gpu: tuple(cores) for gpu, cores in meta["gpus"]["cpus"].items()}
    assert set(shares) == {"0", "1"}
    assert not set(shares["0"]) & set(shares["1"]) or len(os.sched_getaffinity(0)) < 2
    assert set(shares["0"]) | set(shares["1"]) <= os.sched_getaffinity(0)
    for gpu, seen in by_gpu.items():   # a worker that ran a graph (on a loaded machine one may run all)
        assert seen == {shares[gpu]}


def _topology(root: Path, cpus: dict[int, tuple[int, int]]) -> Path:
    """A sysfs tree giving each CPU its (socket, physical core)."""
    for cpu, (package, core) in cpus.items():
        folder = root / f"cpu{cpu}" / "topology"
        folder.mkdir(parents=True)
        (folder / "physical_package_id").write_text(f"{package}\n")
        (folder / "core_id").write_text(f"{core}\n")
    return root


def test_split_cores_is_disjoint_contiguous_and_complete(tmp_path):
    none = tmp_path / "no-sysfs"
    assert split_cores(range(8), 2, none) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert split_cores([0, 1, 2, 3, 4], 2, none) == [[0, 1, 2], [3, 4]]
    assert split_cores([3], 2, none) == [[3], [3]]                    # fewer cores than workers: shared


def test_split_cores_keeps_smt_siblings_together(tmp_path):
    """8 CPUs, 4 physical cores, siblings numbered 4 apart (as Linux often does): halves of the CPU
    numbers would give both workers a thread of every core; whole cores go to one worker each."""
    sysfs = _topology(tmp_path, {cpu: (0, cpu % 4) for cpu in range(8)})
    assert split_cores(range(8), 2, sysfs) == [[0, 1, 4, 5], [2, 3, 6, 7]]
    two_sockets = _topology(tmp_path / "b", {cpu: (cpu // 4, cpu % 2) for cpu in range(8)})
    assert split_cores(range(8), 2, two_sockets) == [[0, 1, 2, 3], [4, 5, 6, 7]]   # a socket each
    assert worker_env([4, 5])["OMP_NUM_THREADS"] == "2" and worker_env([4, 5])[CPUS_VARIABLE] == "4,5"


def test_a_worker_pins_itself_from_its_environment(tmp_path):
    code = ("import os; from hipdnn_trace.bench.cpu_share import pin_from_env; "
            "print(pin_from_env(), sorted(os.sched_getaffinity(0)))")
    one = min(os.sched_getaffinity(0))
    done = subprocess.run([sys.executable, "-c", code], env={**_env(), CPUS_VARIABLE: f"{one},99999"},
                          capture_output=True, text=True, check=True)
    assert done.stdout.split("] ")[1].strip() == f"[{one}]"   # the unusable CPU is ignored

def test_every_graph_once_each_worker_pinned_to_its_gpu(on_two_gpus):
    folder, code, log = on_two_gpus
    assert code == 1
    ran = sorted(entry["graph"] for entry in log)
    assert ran == sorted(NAMES), "every graph prepared exactly once"
    assert {entry["CUDA_VISIBLE_DEVICES"] for entry in log} == {"0", "1"}
    assert all(entry["device"] == 0 for entry in log), "each worker sees its GPU as device 0"
    assert all(entry["HIP_VISIBLE_DEVICES"] is None and entry["ROCR_VISIBLE_DEVICES"] is None for entry in log)
    meta = load_run(folder).meta
    assert meta["gpus"]["devices"] == [0, 1] and meta["gpus"]["variable"] == "CUDA_VISIBLE_DEVICES"
    where = {Path(src).stem: entry["gpu"] for src, entry in meta["gpus"]["graphs"].items()}
    assert where == {entry["graph"]: int(entry["CUDA_VISIBLE_DEVICES"]) for entry in log}, \
        "run.json names the GPU each graph ran on"
    assert meta["isolation"]["enabled"] is True
    slices = read_trace(folder / "trace.pftrace").slices
    graph_slices = slices.filter(pl.col("name").str.starts_with("graph "))
    lanes = {name.removeprefix("graph "): track
             for name, track in graph_slices.select("name", "track_name").iter_rows()}
    assert lanes == {graph: f"harness gpu {gpu}" for graph, gpu in where.items()}, "one trace track per GPU"
    assert graph_slices.get_column("depth").to_list() == [0] * len(NAMES), "overlapping graphs do not nest"


def test_each_worker_sets_up_before_its_first_graph(on_two_gpus):
    """Each worker's resident child runs the backend's warm_up once, before any graph, in the process
    that then runs its graphs; run.json records what it took per GPU (bench/warm.py)."""
    folder, _, log = on_two_gpus
    warm = [entry for entry in _entries(folder.parent / "visible.jsonl") if entry.get("warm")]
    assert {entry["CUDA_VISIBLE_DEVICES"] for entry in warm} == {"0", "1"}
    assert len(warm) == len({entry["pid"] for entry in warm}), "each child set up once"
    assert {entry["pid"] for entry in log} <= {entry["pid"] for entry in warm}, \
        "every child that ran a graph (also the one after the crash) was set up before it"
    meta = load_run(folder).meta
    spent = meta["gpus"]["warm_up_s"]
    assert set(spent) == {"0", "1"} and all(set(parts) == {"fork_server", "visible", "pipeline", "child_start"}
                                          for parts in spent.values())
    # the suite process found the library; a set-up child loaded it and its version replaced that entry
    assert meta["versions"]["visible"] in {f"loaded by {entry['pid']}" for entry in warm}
    entries = _entries(folder.parent / "visible.jsonl")
    for pid in {entry["pid"] for entry in log}:   # each child: set-up, the pipeline graph, then its graphs
        mine = [e.get("graph", "set-up") if not e.get("warm") else "set-up" for e in entries if e["pid"] == pid]
        assert mine[:2] == ["set-up", PIPELINE_GRAPH], mine


def test_breakdown_separates_the_wait_for_the_one_writer(on_two_gpus):
    """A record that waited for the suite's writer while its worker went on says so (t_queue_ms),
    and the columns still add up to the graph's wall."""
    folder, _, _ = on_two_gpus
    breakdown = load_run(folder).breakdown
    assert (breakdown.get_column("t_queue_ms") >= 0).all()
    parts = [c for c in breakdown.columns if c.startswith("t_") and c != "t_queue_ms"]   # others' time, not in wall
    for row in breakdown.filter(pl.col("config").is_not_null()).iter_rows(named=True):
        assert sum(row[c] for c in parts) == pytest.approx(row["wall_ms"], rel=1e-6, abs=1e-3) or \
            row["t_other_ms"] == 0   # t_other is floored at 0 when configs overlap


def test_rows_equal_a_serial_run(serial, on_two_gpus):
    (serial_dir, serial_code), (folder, code, _) = serial, on_two_gpus
    assert code == serial_code
    assert_same_results(serial_dir, folder)   # same rows in the same (suite) order, statuses, validation
    run = load_run(folder)
    status = dict(zip(run.summary.get_column("graph").to_list(), run.summary.get_column("status").to_list()))
    assert status["sigkill__a"] == ERROR and status["nan__b"] == "failed" and status["slow__0"] == OK
    error = run.summary.filter(run.summary["graph"] == "sigkill__a").get_column("error").item()
    assert error.startswith("killed by SIGKILL"), "the dead child lost only its own graph"


def test_graphs_handed_out_longest_first(on_two_gpus):
    folder, _, _ = on_two_gpus
    graphs = load_run(folder).meta["gpus"]["graphs"]
    by_handout = sorted(graphs.values(), key=lambda e: e["handed_out"])
    assert [e["handed_out"] for e in by_handout] == list(range(len(NAMES)))
    estimates = [e["estimate_s"] for e in by_handout]
    assert estimates == sorted(estimates, reverse=True) and estimates[0] > estimates[-1]


def test_killed_fork_server_loses_only_its_graph(tmp_path, monkeypatch):
    """A worker process that dies (its fork server, SIGKILLed while a graph hangs in its child)
    costs that graph's row; the other graphs finish, and the worker is restarted."""
    monkeypatch.setitem(backends.REGISTRY, "faulty", FAULTY_SPEC)
    monkeypatch.syspath_prepend(str(HERE))
    sources = expand([str(p) for p in write_graphs(tmp_path, ["ok__0", "ok__1", "ok__2", "ok__3", "hang__h"])])
    hang = next(s for s in sources if "hang__h" in s.name)
    workers = [GpuWorker(gpu, IsolatedRunner(timeout_s=60, env={"CUDA_VISIBLE_DEVICES": str(gpu)}))
               for gpu in (0, 1)]
    pool = GpuPool(workers)
    done: list = []

    def kill_the_hanging_worker() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            handout = pool.handouts.get(hang.name)
            if handout is not None:
                runner = workers[handout.gpu].runner
                if runner._running is not None:
                    time.sleep(0.5)
                    os.kill(runner.server._proc.pid, signal.SIGKILL)
                    return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_hanging_worker)
    killer.start()
    settings = RunSettings(loop=LoopSettings(warmup=1, iters=3))
    estimates = [estimate_s(s) for s in sources]
    estimates[sources.index(hang)] = 1.0   # handed out first
    try:
        outcome = pool.run_suite(sources, [Config("faulty", "faulty")], settings, Markers(),
                                 SuiteCallbacks(after_graph=lambda i, g: done.append(g.name)), estimates)
    finally:
        killer.join()
        pool.close()
    rows = {g.name: g.configs[0] for g in outcome.runs}
    assert sorted(done) == sorted(rows) and len(rows) == 5
    assert rows["hang__h"].status == ERROR and "fork server died" in rows["hang__h"].error
    assert all(rows[f"ok__{i}"].status == OK for i in range(4))


def test_resume_after_a_kill_finishes_the_rest(suite, serial, tmp_path):
    out = tmp_path
    proc = _cli(str(suite), "-b", "visible", *TIMING, "--gpus", "0,1", "--out", str(out), "--run-id", "r",
                "-q", cwd=out)
    folder = out / "r"
    deadline = time.monotonic() + 120
    recorded = 0
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            recorded = load_run(folder).summary.get_column("source").n_unique()
        except Exception:   # not written yet
            recorded = 0
        if recorded >= 2:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert 0 < load_run(folder).summary.get_column("source").n_unique() < len(NAMES), "killed mid-suite"
    log = out / "resumed.jsonl"
    code, _, err = _finish(_cli(str(suite), "-b", "visible", *TIMING, "--gpus", "0,1", "--resume", str(folder),
                                "-q", cwd=out, log=log))
    assert code == serial[1], err
    assert_same_results(serial[0], folder)
    resumed = {entry["graph"] for entry in _log(log)}
    assert resumed and resumed < set(NAMES), "only the graphs not recorded ran again"
    graphs = load_run(folder).meta["gpus"]["graphs"]
    assert {Path(s).stem for s in graphs} == set(NAMES), "run.json keeps where the first part ran"


def _descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (fork servers and their children)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if stat[0] != "Z":
                children.setdefault(int(stat[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def test_sigterm_stops_every_worker_and_keeps_finished_graphs(suite, tmp_path):
    proc = _cli(str(suite), "-b", "visible", *TIMING, "--gpus", "0,1", "--out", str(tmp_path), "--run-id", "t",
                "-q", cwd=tmp_path)
    folder = tmp_path / "t"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if load_run(folder).summary.height >= 1 and len(_descendants(proc.pid)) >= 4:
                break   # a graph recorded, and both fork servers have a child running
        except Exception:   # not written yet
            pass
        time.sleep(0.05)
    workers = _descendants(proc.pid)
    os.kill(proc.pid, signal.SIGTERM)
    code, _, err = _finish(proc)
    assert code == 143, err
    assert "interrupted by SIGTERM" in err and f"--resume {folder}" in err
    assert load_run(folder).meta["status"] == "interrupted"
    time.sleep(0.5)
    assert not [p for p in workers if Path(f"/proc/{p}").exists() and
                Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"], "no worker outlives the run"


# ---------------------------------------------------------------- refusals

@pytest.mark.parametrize("flags, message", [
    (["-b", "reference", "--gpus", "0,1"], "--gpus 0,1: the reference backend runs on the CPU"),
    (["-b", "faulty", "--gpus", "0,1", "--no-isolate"], "drop --no-isolate"),
    (["-b", "faulty", "--gpus", "0", "--device", "1"], "each worker sees its GPU as device 0"),
    (["-b", "faulty", "--gpus", "0", "--clocks", "lock-base"], "--clocks locks one GPU"),
])
def test_refused_in_one_line(flags, message, tmp_path, capsys, faulty):
    write_graphs(tmp_path / "g", ["ok__a", "ok__b"])
    code = cli_main(["run", str(tmp_path / "g"), *flags, "--out", str(tmp_path / "runs")])
    err = capsys.readouterr().err.strip()
    assert code == 1 and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "runs").exists(), "refused before a run directory exists"


def test_gpus_all_without_a_gpu_is_one_line(tmp_path, capsys, faulty, monkeypatch):
    for name in visibility.AMD_ORDER:
        monkeypatch.delenv(name, raising=False)
    if visibility.gpu_count(None):
        pytest.skip("this machine has a GPU")
    write_graphs(tmp_path / "g", ["ok__a", "ok__b"])
    code = cli_main(["run", str(tmp_path / "g"), "-b", "faulty", "--gpus", "all", "--out", str(tmp_path / "runs")])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.endswith("--gpus all: no GPU found on this machine"), err


# ---------------------------------------------------------------- real GPUs

@pytest.mark.gpu
@pytest.mark.cuda
def test_two_real_gpus_equal_one(tmp_path):
    """On a node with at least two NVIDIA GPUs: --gpus all gives the rows of a one-GPU run."""
    if visibility.gpu_count("nvidia") < 2:
        pytest.skip("needs two NVIDIA GPUs")
    graphs = REPO / "graphs" / "matmul"
    if not graphs.is_dir():
        pytest.skip("no bundled matmul graphs")
    for run_id, extra in (("one", []), ("all", ["--gpus", "all"])):
        code = cli_main(["run", str(graphs), "-b", "cudnn", "-w", "2", "-i", "10", "--isolate",
                         "--out", str(tmp_path), "--run-id", run_id, "-q", *extra])
        assert code in (0, 2)
    assert_same_results(tmp_path / "one", tmp_path / "all", trace=False)
    assert len({e["gpu"] for e in load_run(tmp_path / "all").meta["gpus"]["graphs"].values()}) >= 2


def test_records_waiting_for_the_writer_are_handed_over_as_one_batch() -> None:
    """Graphs finished while the suite thread was busy reach ``after_graphs`` together (one commit, one
    rewrite of the tables), in the order they finished, numbered on from the graphs already recorded."""
    from hipdnn_trace.bench.gpus import _Collected
    from hipdnn_trace.bench.records import GraphRun

    pool = GpuPool(workers=[])
    batches: list[list[tuple[int, str]]] = []
    singles: list[int] = []
    callbacks = SuiteCallbacks(after_graph=lambda i, g: singles.append(i),
                               after_graphs=lambda items: batches.append([(i, g.name) for i, g in items]))
    sources = [type("S", (), {"name": f"g{i}.json"})() for i in range(3)]
    worker = GpuWorker(0, runner=None)   # type: ignore[arg-type]
    state = _Collected(working=1, finished={0: GraphRun("g0.json", "g0")})
    messages = [("start", worker, (1, 1)), ("done", worker, (1, GraphRun("g1.json", "g1"))),
                ("start", worker, (2, 2)), ("done", worker, (2, GraphRun("g2.json", "g2"))), ("idle", worker, None)]
    pool._take(messages, state, sources, [1.0, 1.0, 1.0], callbacks)
    assert batches == [[(2, "g1"), (3, "g2")]] and singles == []
    assert sorted(state.finished) == [0, 1, 2] and state.working == 0 and state.started == 2
    assert set(pool.handouts) == {"g1.json", "g2.json"}


def test_the_pool_shortens_the_thread_switch_interval_while_it_runs() -> None:
    """While workers hand results to the suite thread, a worker waiting for the GIL behind the writer
    waits at most SWITCH_INTERVAL_S, not Python's 5 ms default; the interval is restored afterwards."""
    import sys

    from hipdnn_trace.bench import gpus
    from hipdnn_trace.bench.records import GraphRun

    seen: list[float] = []

    class Runner:   # runs nothing: says what interval the worker thread ran under
        def __call__(self, source, configs, settings, markers, **_):
            seen.append(sys.getswitchinterval())
            return GraphRun(source.name, source.name)

        def abort(self) -> None: ...

        def close(self) -> None: ...

    before = sys.getswitchinterval()
    pool = GpuPool(workers=[GpuWorker(0, runner=Runner())])
    sources = [type("S", (), {"name": f"g{i}.json"})() for i in range(2)]
    try:
        outcome = pool.run_suite(sources, [], None, None, SuiteCallbacks(), [1.0, 1.0])   # type: ignore[arg-type]
    finally:
        pool.close()
    assert len(outcome.runs) == 2
    assert seen and all(s <= gpus.SWITCH_INTERVAL_S for s in seen)
    assert sys.getswitchinterval() == before


def test_no_graph_starts_before_every_worker_is_set_up() -> None:
    """A worker whose set-up is quick waits for the slow one's before its first graph: a set-up (CUDA
    context, library loads) running beside another worker's first graph slowed that graph."""
    import threading
    import time

    from hipdnn_trace.bench.records import GraphRun

    events: list[str] = []
    lock = threading.Lock()

    class Runner:   # stand-in worker: a set-up of `delay` seconds, graphs that run nothing
        def __init__(self, name: str, delay: float) -> None:
            self.name, self.delay = name, delay

        def warm(self, configs, settings):
            time.sleep(self.delay)
            with lock:
                events.append(f"{self.name} set up")
            return {}

        def __call__(self, source, configs, settings, markers, **_):
            with lock:
                events.append(f"{self.name} ran {source.name}")
            return GraphRun(source.name, source.name)

        def abort(self) -> None: ...

        def close(self) -> None: ...

    pool = GpuPool(workers=[GpuWorker(0, runner=Runner("quick", 0.0)), GpuWorker(1, runner=Runner("slow", 0.3))])
    sources = [type("S", (), {"name": f"g{i}.json"})() for i in range(4)]
    try:
        outcome = pool.run_suite(sources, [], None, None, SuiteCallbacks(), [1.0] * 4)   # type: ignore[arg-type]
    finally:
        pool.close()
    assert len(outcome.runs) == 4
    first_graph = min(i for i, e in enumerate(events) if " ran " in e)
    assert {"quick set up", "slow set up"} <= set(events[:first_graph]), events


def test_a_workers_fork_server_preloads_what_the_backends_declare(monkeypatch):
    """The server imports the backend modules, their ``preload`` libraries and, for a float64 reference on
    the GPU, torch, before it forks a child: no child (a successor neither) imports them again."""
    monkeypatch.setitem(backends.REGISTRY, "visible", VISIBLE_SPEC)
    monkeypatch.syspath_prepend(str(HERE))
    runner = IsolatedRunner(60, resident=True)
    runner._preload({"visible": backends.REGISTRY["visible"]})
    assert runner.server.preload[-2:] == ["visible_backend", "colorsys"]
    runner._preload({"visible": backends.REGISTRY["visible"]}, reference_device="cuda")
    assert runner.server.preload[-1] == "torch"

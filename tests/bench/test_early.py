"""Each worker's fork server started from ``run``'s raw arguments, before the suite process imports the
harness (bench/early.py): the runner the plan makes adopts it; what the plan did not choose is killed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from reliability_helpers import HERE
from repo_paths import REPO

from hipdnn_trace import backends
from hipdnn_trace.bench.early import HARNESS_MODULES, server_preload, start_servers
from hipdnn_trace.bench.forkserver import ForkServer, _env_key
from hipdnn_trace.bench.isolation import IsolatedRunner
from hipdnn_trace.bench.pins import pin_gpus

VISIBLE_SPEC = "visible_backend:VisibleBackend"


@pytest.fixture
def visible(monkeypatch):
    monkeypatch.setitem(backends.REGISTRY, "visible", VISIBLE_SPEC)
    monkeypatch.syspath_prepend(str(HERE))
    yield
    ForkServer.discard_early()


def test_a_gpus_run_starts_a_server_per_gpu_and_each_worker_adopts_its_own(visible):
    assert start_servers(["suite/", "--backend", "visible", "--gpus", "0,1", "-i", "5", "--cache", "cold"]) == 2
    envs = pin_gpus(None, [0, 1]).envs()   # what the plan pins (the test backend has no vendor)
    started = {key: server for key, server in ForkServer._early.items()}
    assert set(started) == {_env_key(env) for env in envs}
    runner = IsolatedRunner(60, env=envs[1], resident=True)
    try:
        assert runner.server is started[_env_key(envs[1])] and runner.server._proc is not None
        assert runner.server.preload == server_preload({"visible": VISIBLE_SPEC})
        assert ForkServer.adopt(envs[1]) is None, "adopted once"
        other = started[_env_key(envs[0])]
        ForkServer.discard_early()   # the plan chose otherwise for GPU 0: killed, not left running
        assert ForkServer._early == {} and other._proc is None
    finally:
        runner.close()


def _server_modules(server: ForkServer) -> set[str]:
    """What ``server`` had imported when it forked a probe child."""
    read, write = os.pipe()
    try:
        server.launch("server_probe:imported", b"", [write])
    finally:
        os.close(write)
    with os.fdopen(read) as got:
        names = set(got.read().split("\n"))
    assert server.exit_code() == 0
    return names


def test_a_serial_gpu_run_starts_one_server_that_works_out_its_own_imports(visible, monkeypatch):
    """No pin, and the server, not the suite process, decides what it imports: the harness and the backend's
    module and preload list (the test backend's ``colorsys``), found from the backend's "module:class"."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    assert start_servers(["suite/", "--backend", "visible"]) == 1
    assert list(ForkServer._early) == [()]
    runner = IsolatedRunner(60, resident=True)
    try:
        assert ForkServer._early == {}
        assert runner.server.started_at is not None and runner.server.resolve is None, "resolved at the start only"
        assert {*HARNESS_MODULES, "visible_backend", "colorsys"} <= _server_modules(runner.server)
    finally:
        runner.close()


def test_starting_a_serial_run_s_server_imports_neither_numpy_nor_the_backends(tmp_path):
    """The suite process starts the server from the light registry: numpy and the backends' modules load
    afterwards, side by side with the server's imports (bench/early.py)."""
    probe = ("import sys\n"
             "from hipdnn_trace.bench.early import start_servers\n"
             "from hipdnn_trace.bench.forkserver import ForkServer\n"
             "n = start_servers(['suite/', '--backend', 'cudnn'])\n"
             "print(n, sorted(m for m in ('numpy', 'hipdnn_trace.backends', 'hipdnn_trace.backends.cudnn') "
             "if m in sys.modules))\n"
             "ForkServer.discard_early()\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "1 []"


def test_a_server_asked_to_resolve_an_unknown_backend_imports_the_harness():
    """A backend whose module the server cannot import: the harness at least (the child reports the rest)."""
    server = ForkServer((), resolve=("hipdnn_trace.bench.early:server_imports", "ghost", "no_such_module:Ghost",
                                     "reference", "auto"))
    try:
        server.start()
        assert set(HARNESS_MODULES) <= _server_modules(server)
    finally:
        server.close()


@pytest.mark.parametrize("argv", [
    ["graphs/"],                                                   # the CPU reference: no child processes
    ["graphs/", "--backend", "visible", "--no-isolate"],
    ["graphs/", "--backend", "visible", "--config", "nightly.toml"],   # the recipe may change everything
    ["--resume", "runs/x"],
    ["graphs/", "--a", "visible", "--b", "visible"],                # A/B and the oracle split processes
    ["graphs/", "--backend", "visible", "--oracle"],
    ["graphs/", "--backend", "visible", "--profile", "ncu"],       # an external profiler re-runs the command
    ["graphs/", "--backend", "visible", "--engine", "list"],
    ["graphs/", "--backend", "no-such-backend", "--gpus", "0"],
    ["graphs/", "--backend", "visible", "--gpus", "zero"],          # the real parser says why
    ["graphs/", "--backend", "visible", "--gpus"],
    ["graphs/", "--backend"],
])
def test_what_is_not_a_plain_run_starts_nothing(visible, argv, capsys):
    assert start_servers(argv) == 0
    assert ForkServer._early == {}
    assert capsys.readouterr() == ("", ""), "the guess is silent: the real parser reports bad flags"

"""Each worker's fork server started from ``run``'s raw arguments, before the suite process imports the
harness (bench/early.py): the runner the plan makes adopts it; what the plan did not choose is killed."""

from __future__ import annotations

import pytest
from reliability_helpers import HERE

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


def test_a_serial_gpu_run_starts_one_server_without_a_pin(visible):
    assert start_servers(["suite/", "--backend", "visible"]) == 1
    assert list(ForkServer._early) == [()]
    runner = IsolatedRunner(60, resident=True)
    try:
        assert runner.server.preload[:len(HARNESS_MODULES)] == list(HARNESS_MODULES)
        assert ForkServer._early == {}
    finally:
        runner.close()


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

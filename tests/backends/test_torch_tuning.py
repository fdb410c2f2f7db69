"""run --oracle's tuned torch (backends/torch_tuning.py): what the tuned twin switches on, and that it
asks for a process of its own. TunableOp is exercised on a stand-in of ``torch.cuda.tunable`` (no GPU
here); real tuning is the ``cuda`` test in test_oracle.py."""

from __future__ import annotations

import json
import os
import types

import graph_dicts as hg
import pytest

from hipdnn_trace.backends.base import RunOptions
from hipdnn_trace.backends.torch_tuning import TUNED_ENV, enable_tuning
from hipdnn_trace.graph.load import load_bytes


def _graph(d: dict):
    return load_bytes(json.dumps(d).encode(), "g.json")


class StandInTunable:
    """Records what is asked of ``torch.cuda.tunable``."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __getattr__(self, name: str):
        return lambda *args: self.calls.append((name, *args))


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in TUNED_ENV:
        monkeypatch.delenv(name, raising=False)


def test_tuning_switches_cudnn_benchmark_and_tunableop_on_a_stand_in_torch(clean_env) -> None:
    tunable = StandInTunable()
    torch = types.SimpleNamespace(backends=types.SimpleNamespace(cudnn=types.SimpleNamespace(benchmark=False)),
                                  cuda=types.SimpleNamespace(tunable=tunable))
    info = enable_tuning(torch, _graph(hg.matmul()), gpu=True)
    assert torch.backends.cudnn.benchmark is True
    assert {k: os.environ[k] for k in TUNED_ENV} == TUNED_ENV
    names = [c[0] for c in tunable.calls]
    assert names[:2] == ["enable", "tuning_enable"] and ("write_file_on_exit", False) in tunable.calls
    filename = next(c[1] for c in tunable.calls if c[0] == "set_filename")
    assert filename.endswith(f"hipdnn-trace-tunableop-{os.getpid()}.csv")
    assert info["available"] is True and "TunableOp on" in info["detail"]
    # nothing for the search to reach: the tuned run re-measures the ootb plan
    assert enable_tuning(torch, _graph(hg.add_relu()), gpu=True)["available"] is False


def test_tuned_torch_on_the_cpu_says_there_was_nothing_to_tune(clean_env, monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", torch.backends.cudnn.benchmark)   # restored after
    from hipdnn_trace.backends.torch_backend import TorchBackend

    backend = TorchBackend()
    options = RunOptions(extra={"tuned": True, "torch_device": "cpu"})
    session = backend.prepare(_graph(hg.matmul()), None, options)
    try:
        assert session.info()["tuning"] == {"detail": "torch.backends.cudnn.benchmark=True", "available": False}
    finally:
        session.close()
    assert backend.process_key(options) == "tuned" and backend.process_key(RunOptions()) is None

"""Training batchnorm reaches the frontend's ``pygraph.batchnorm`` with every argument it requires.

No GPU here, so the cudnn module is a stand-in (named so in each test) whose ``batchnorm`` has the
real binding's parameters (cudnn-frontend ``python/pygraph/norm.cpp``: ``input, scale, bias,
in_running_mean, in_running_var, epsilon, momentum`` required; ``peer_stats``, ``compute_data_type``,
``name`` defaulted). Before the fix a node without running statistics omitted three of them and
the GPU answered "incompatible function arguments".
"""

from __future__ import annotations

from typing import Any

import pytest

from hipdnn_trace.backends import cudnn as cudnn_backend, cudnn_graph as cg
from hipdnn_trace.graph.build import GraphBuilder


class _Names:
    """Enum families (data_type, heur_mode, numerical_note): any member is its own name."""

    def __getattr__(self, name: str) -> str:
        return name


class _FakeTensor:
    def __init__(self, **kw: Any) -> None:
        self.kw = kw

    def __getattr__(self, name: str) -> Any:   # set_dim / set_stride / set_output ... chain
        return lambda *a, **k: self


class _FakePyGraph:
    calls: list[dict[str, Any]] = []

    def __init__(self, **kw: Any) -> None:
        pass

    def tensor(self, **kw: Any) -> _FakeTensor:
        return _FakeTensor(**kw)

    def batchnorm(self, input, scale, bias, in_running_mean, in_running_var, epsilon, momentum,
                  peer_stats=(), compute_data_type=None, name=""):
        args = dict(input=input, scale=scale, bias=bias, in_running_mean=in_running_mean,
                    in_running_var=in_running_var, epsilon=epsilon, momentum=momentum)
        if any(v is None for v in args.values()):
            raise TypeError("batchnorm(): incompatible function arguments")
        _FakePyGraph.calls.append({**args, "name": name})
        return [_FakeTensor() for _ in range(5)]

    def __getattr__(self, name: str) -> Any:   # validate, build_operation_graph, create_execution_plans ...
        return lambda *a, **k: None


class _FakeCudnn:
    data_type = _Names()
    heur_mode = _Names()
    numerical_note = _Names()
    pygraph = _FakePyGraph


@pytest.fixture
def fake_cudnn(monkeypatch: pytest.MonkeyPatch) -> type[_FakePyGraph]:
    _FakePyGraph.calls = []
    monkeypatch.setattr(cudnn_backend, "_cudnn", lambda: _FakeCudnn)
    return _FakePyGraph


def _training_bn(*, running: bool, momentum: float | None = None):
    b = GraphBuilder("bn_train", io="half", compute="float", intermediate="float")
    x = b.tensor("x", [2, 8, 4, 4], layout="NHWC")
    scale, bias = (b.tensor(n, [1, 8, 1, 1], dtype="float") for n in ("scale", "bias"))
    prev = ([b.tensor(n, [1, 8, 1, 1], dtype="float") for n in ("running_mean", "running_var")] if running
            else [None, None])
    b.batchnorm(x, scale, bias, momentum=momentum, prev_running_mean=prev[0], prev_running_variance=prev[1])
    return b.build()


def test_fake_cudnn_batchnorm_without_running_stats_gets_scratch_ones(fake_cudnn: type[_FakePyGraph]) -> None:
    plan = cg.plan(_training_bn(running=False))
    cudnn_backend.BuiltGraph(plan, handle=None)
    (call,) = fake_cudnn.calls
    (op,) = plan.ops
    decl = {t.key: t for t in plan.inputs}
    assert decl[op.tensors["in_running_mean"]].fill == 0.0 and decl[op.tensors["in_running_var"]].fill == 1.0
    assert decl[op.tensors["momentum"]].by_value == pytest.approx(0.1) and decl[op.tensors["momentum"]].is_scalar
    assert len(op.outputs) == 5 and all(op.outputs)
    # the scratch running statistics are written by cuDNN but fetched by nobody
    assert [plan.output(k).hipdnn_uid for k in op.outputs[3:]] == [None, None]
    assert call["name"] == op.name


def test_fake_cudnn_batchnorm_keeps_the_nodes_momentum_without_running_stats(fake_cudnn: type[_FakePyGraph]) -> None:
    plan = cg.plan(_training_bn(running=False, momentum=0.25))
    cudnn_backend.BuiltGraph(plan, handle=None)
    (op,) = plan.ops
    momentum = next(t for t in plan.inputs if t.key == op.tensors["momentum"])
    assert momentum.by_value == pytest.approx(0.25)


def test_fake_cudnn_batchnorm_with_running_stats_binds_the_graphs_tensors(fake_cudnn: type[_FakePyGraph]) -> None:
    graph = _training_bn(running=True)
    plan = cg.plan(graph)
    cudnn_backend.BuiltGraph(plan, handle=None)
    (op,) = plan.ops
    names = {k: next(t.name for t in plan.inputs if t.key == op.tensors[k])
             for k in ("in_running_mean", "in_running_var")}
    assert names == {"in_running_mean": "running_mean", "in_running_var": "running_var"}
    fetched = {plan.output(k).hipdnn_uid for k in op.outputs[3:]}
    assert fetched == {t.uid for t in graph.output_tensors if "next_running" in t.name}

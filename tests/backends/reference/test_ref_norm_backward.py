"""LayernormBackward and RMSNormBackward: the reference against finite differences of the forwards,
the graph checks, and hipDNN's own sample files through the harness."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from finite_differences import numeric_grad
from repo_paths import GRAPHS

from hipdnn_trace.backends.reference import executor
from hipdnn_trace.backends.reference.ops import (
    layernorm,
    layernorm_backward,
    rmsnorm,
    rmsnorm_backward,
)
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.errors import GraphError
from hipdnn_trace.graph.load import load_file, parse_graph

RNG = np.random.default_rng(11)


def test_rmsnorm_backward_equals_finite_differences_of_the_forward() -> None:
    x, dy = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 3, 4))
    scale, bias = RNG.standard_normal(4), RNG.standard_normal(4)

    def loss() -> float:
        y = rmsnorm(x, scale.reshape(1, 1, 4), bias, epsilon=1e-3, normalized_dim_count=1)["y"]
        return float(np.sum(y * dy))

    inv = rmsnorm(x, scale.reshape(1, 1, 4), epsilon=1e-3, normalized_dim_count=1)["inv_rms"]
    got = rmsnorm_backward(dy, x, scale, inv, start=2)
    for name, arr in (("dx", x), ("dscale", scale), ("dbias", bias)):
        np.testing.assert_allclose(got[name], numeric_grad(loss, arr), rtol=1e-6, atol=1e-8, err_msg=name)


def test_layernorm_backward_equals_finite_differences_over_two_dims() -> None:
    x, dy = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 3, 4))
    scale, bias = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))

    def loss() -> float:
        return float(np.sum(layernorm(x, scale, bias, epsilon=1e-3, normalized_dim_count=2)["y"] * dy))

    got = layernorm_backward(dy, x, scale, normalized_dim_count=2, epsilon=1e-3)
    for name, arr in (("dx", x), ("dscale", scale), ("dbias", bias)):
        np.testing.assert_allclose(got[name], numeric_grad(loss, arr), rtol=1e-6, atol=1e-8, err_msg=name)


@pytest.mark.parametrize("rel", ["norm/layernorm_backward_fp32.json", "norm/rmsnorm_backward_bf16.json"])
def test_samples_run_with_saved_statistics_from_their_x(rel: str) -> None:
    graph = load_file(GRAPHS / rel)
    assert executor.check(graph) is None
    x = make_inputs(graph, 0)
    node = graph.nodes[0]
    xin = x[node.inputs["x"]].astype(np.float64)
    stat_port = "inv_rms" if "inv_rms" in node.inputs else "inv_variance"
    stat = x[node.inputs[stat_port]].reshape(-1)
    mean = xin.mean(axis=-1, keepdims=True)
    want = 1 / np.sqrt((xin ** 2 if stat_port == "inv_rms" else (xin - mean) ** 2).mean(axis=-1) + 1e-5)
    np.testing.assert_allclose(stat, want.reshape(-1), rtol=1e-6)
    result = executor.evaluate(graph, x)
    assert all(np.isfinite(result.exact[u]).all() for u in result.exact)


def test_upstream_norm_backward_samples_run_on_the_reference(shared_fixtures: Path) -> None:
    for rel in ("samples/sample_layernorm_backward.json", "samples/sample_rmsnorm_backward.json"):
        path = shared_fixtures / "upstream-graphs" / rel
        if not path.exists():
            pytest.skip(f"{rel} not in the shared fixtures")
        graph = load_file(path)
        assert executor.check(graph) is None
        executor.evaluate(graph, make_inputs(graph, 0))


def test_a_scale_of_the_wrong_size_is_refused_with_its_path() -> None:
    raw = json.loads((GRAPHS / "norm/rmsnorm_backward_fp32.json").read_text())
    scale = next(t for t in raw["tensors"] if t["name"] == "scale")
    scale.update(dims=[64], strides=[1])
    with pytest.raises(GraphError, match=r"inputs.scale_tensor_uid: has 64 values, expected one per normalized"):
        parse_graph(raw, "bad.json")


def test_upstream_rmsnorm_with_a_per_channel_scale_is_refused_by_inspect_and_run(shared_fixtures: Path) -> None:
    """inspect asks executor.check, run evaluates: both now refuse with hipDNN's rule."""
    path = shared_fixtures / "upstream-graphs" / "samples" / "sample_rmsnorm.json"
    if not path.exists():
        pytest.skip("sample_rmsnorm.json not in the shared fixtures")
    graph = load_file(path)
    reason = executor.check(graph)
    assert reason and "does not span the normalized dims" in reason and "CpuReferenceRMSNorm" in reason
    from hipdnn_trace.backends import cudnn_graph
    from hipdnn_trace.errors import UnsupportedError

    with pytest.raises(UnsupportedError) as refused:
        cudnn_graph.plan(graph)
    assert str(refused.value) == reason, "cuDNN's translation refuses with the reference's words"
    torch_ops = pytest.importorskip("hipdnn_trace.backends.torch_ops", exc_type=ImportError)
    assert torch_ops.check(graph) == reason

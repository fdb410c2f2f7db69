"""Which axes a saved statistic's shape says are normalized (graph/norms.py ``stat_start``).

dnn-providers' RMSNorm sweeps (integration_test_bundles/quick/RMSNorm/{Default,Variant2}/sweep.json @ 2e0bbd0,
captures of the GPU tests ``IntegrationGpuRMSNorm*.Correctness``) write x ``[4096, 128, 1, 1]``, scale
``[1, 128, 1, 1]`` and inv_rms ``[4096, 1, 1, 1]``: hipDNN's frontend accepts them (Utilities.hpp @ 95d66084:
the trailing run where scale equals x is 3 dims; the statistic is 1 where scale is not, x elsewhere). Axes of
size 1 in x fit either side, so they must not decide; they once made the graph a "non-trailing" refusal.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from hipdnn_trace.backends.reference import executor
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.norms import norm_backward_start, rmsnorm_refusal, stat_start


@pytest.mark.parametrize(("x", "stat", "start"), [
    ((4096, 128, 1, 1), (4096, 1, 1, 1), 1),    # the sweep's case: trailing 1s in x
    ((32, 3, 1, 14), (32, 1, 1, 1), 1),         # an inner 1 in x
    ((32, 3, 14, 1), (32, 1, 1, 1), 1),
    ((2, 3, 4, 4), (2, 1, 1, 1), 1),            # no 1s in x
    ((2, 3, 4, 4), (2, 3, 1, 1), 2),            # dnn-benchmarking's sample_rmsnorm statistic
    ((2, 1, 4), (2, 1, 1), 1),                  # either start fits: the earliest past the batch axis
    ((1, 3), (1, 1), 1),                        # the batch axis is not normalized while axis 1 fits
    ((2, 3, 4, 4), (2, 1, 4, 1), None),         # reduces axis 1, keeps axis 2: not trailing
    ((2, 3, 4, 4), (2, 3, 4, 4), None),         # reduces nothing: states nothing
    ((2, 3, 4), (2, 1), None),                  # another rank: states nothing
])
def test_a_statistic_states_its_first_normalized_axis(x: tuple, stat: tuple, start: int | None) -> None:
    assert stat_start(x, stat) == start


def _strides(dims: list[int]) -> list[int]:
    out = [1] * len(dims)
    for i in range(len(dims) - 2, -1, -1):
        out[i] = out[i + 1] * dims[i + 1]
    return out


def _tensor(uid: int, name: str, dims: list[int], **extra) -> dict:
    return {"uid": uid, "name": name, "dims": dims, "strides": _strides(dims), "data_type": "float",
            "virtual": False, **extra}


def _rmsnorm(x: list[int], scale: list[int], inv_rms: list[int]):
    """An RMSNorm training node as the sweep's template writes it (x, scale, epsilon -> y, inv_rms)."""
    doc = {"name": "rms", "io_data_type": "float", "compute_data_type": "float", "intermediate_data_type": "float",
           "nodes": [{"type": "RMSNormAttributes", "name": "RMSNorm_0", "compute_data_type": "float",
                      "forward_phase": "TRAINING",
                      "inputs": {"x_tensor_uid": 0, "scale_tensor_uid": 1, "epsilon_tensor_uid": 2},
                      "outputs": {"y_tensor_uid": 3, "inv_rms_tensor_uid": 4}}],
           "tensors": [_tensor(0, "x", x), _tensor(1, "scale", scale),
                       _tensor(2, "eps", [1], value=1e-5, value_type="Float32Value"),
                       _tensor(3, "y", x), _tensor(4, "inv_rms", inv_rms)]}
    return load_bytes(json.dumps(doc).encode(), "rmsnorm.json")


def test_the_sweeps_rmsnorm_runs_and_matches_the_definition() -> None:
    """Accepted, and the reference normalizes over C (with the 1-sized axes): ``y = scale * x / rms``
    with ``rms = sqrt(mean over C of x^2 + eps)``, computed here directly."""
    graph = _rmsnorm([6, 5, 1, 1], [1, 5, 1, 1], [6, 1, 1, 1])
    assert rmsnorm_refusal(graph.nodes[0], graph) is None
    inputs = make_inputs(graph, seed=3)
    exact = executor.evaluate(graph, inputs).exact
    x, scale = inputs[0].astype(np.float64), inputs[1].astype(np.float64)
    rms = np.sqrt((x ** 2).mean(axis=(1, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(exact[3], scale * x / rms, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(exact[4], 1 / rms, rtol=1e-6)


def test_a_statistic_over_non_trailing_axes_is_still_refused_with_the_rule() -> None:
    graph = _rmsnorm([2, 3, 4, 4], [1, 3, 4, 4], [2, 1, 4, 1])
    refusal = rmsnorm_refusal(graph.nodes[0], graph)
    assert refusal is not None and "reduces non-trailing axes" in refusal


def test_norm_backward_reads_the_statistic_the_same_way() -> None:
    """x ``[N, C, 1, 1]`` with inv_rms ``[N, 1, 1, 1]`` on an RMSNorm backward: normalized from axis 1."""
    doc = {"name": "rmsb", "io_data_type": "float", "compute_data_type": "float", "intermediate_data_type": "float",
           "nodes": [{"type": "RMSNormBackwardAttributes", "name": "RMSNormBwd_0", "compute_data_type": "float",
                      "inputs": {"dy_tensor_uid": 0, "x_tensor_uid": 1, "inv_rms_tensor_uid": 2, "scale_tensor_uid": 3},
                      "outputs": {"dx_tensor_uid": 4, "dscale_tensor_uid": 5}}],
           "tensors": [_tensor(0, "dy", [6, 5, 1, 1]), _tensor(1, "x", [6, 5, 1, 1]),
                       _tensor(2, "inv_rms", [6, 1, 1, 1]), _tensor(3, "scale", [1, 5, 1, 1]),
                       _tensor(4, "dx", [6, 5, 1, 1]), _tensor(5, "dscale", [1, 5, 1, 1])]}
    graph = load_bytes(json.dumps(doc).encode(), "rmsnorm_backward.json")
    assert norm_backward_start(graph.nodes[0], graph) == 1

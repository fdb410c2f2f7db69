"""The torch backend on the CPU: same code path as on a GPU minus the device clock.

Outputs are compared with the float64 reference through the harness's own validation,
so a wrong port order, padding or statistic fails here without a GPU.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

# E402 below: these modules are imported only once importorskip("torch") has let the module run
from hipdnn_trace import backends  # noqa: E402
from hipdnn_trace.backends.base import RunOptions  # noqa: E402
from hipdnn_trace.backends.torch_backend import to_numpy, to_torch  # noqa: E402
from hipdnn_trace.bench.config import Config  # noqa: E402
from hipdnn_trace.bench.graph_run import RunSettings, run_graph  # noqa: E402
from hipdnn_trace.bench.loop import LoopSettings  # noqa: E402
from hipdnn_trace.graph.build import GraphBuilder  # noqa: E402
from hipdnn_trace.graph.sources import GraphSource, expand  # noqa: E402
from hipdnn_trace.graph.write import graph_to_json  # noqa: E402
from hipdnn_trace.markers import Markers  # noqa: E402

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"
SETTINGS = RunSettings(loop=LoopSettings(warmup=0, iters=1))


def _run(graph_or_path):
    if isinstance(graph_or_path, Path):
        if not graph_or_path.exists():
            pytest.skip(f"{graph_or_path.name} not present")
        source = expand([str(graph_or_path)])[0]
    else:
        import json

        data = json.dumps(graph_to_json(graph_or_path)).encode()
        source = GraphSource(graph_or_path.name + ".json", lambda: data)
    run = run_graph(source, [Config("torch", "torch")], SETTINGS, Markers())
    return run, run.configs[0]


@pytest.mark.parametrize("relative", [
    "conv/conv_fwd_asym_pad_dilated_fp16.json", "conv/conv_dgrad_nhwc_stride2_bf16.json",
    "conv/conv_wgrad_3d_ncdhw_fp32.json", "conv/conv_fwd_grouped_nhwc_fp16.json",
    "matmul/matmul_batched_broadcast_bt_bf16.json", "fused/matmul_bias_gelu_bf16.json",
    "norm/batchnorm_training_nhwc_fp16.json", "norm/batchnorm_backward_nhwc_fp32.json",
    "norm/batchnorm_inference_nchw_bf16.json", "norm/layernorm_fp32.json", "norm/rmsnorm_bf16.json",
    "pointwise/leaky_relu_fp32.json", "pointwise/relu_clip_fp16.json", "reduction/reduce_max_rows_bf16.json",
])
def test_sample_graph_matches_the_reference_on_cpu(relative: str) -> None:
    run, c = _run(GRAPHS / relative)
    assert c.status == "ok" and c.validation == "passed", (c.error, run.notes)


def test_asymmetric_dgrad_with_stride_matches_the_reference() -> None:
    b = GraphBuilder("dgrad_asym", io="float")
    dy = b.tensor("dy", [2, 4, 4, 3])
    w = b.tensor("w", [4, 3, 3, 2])
    b.conv_dgrad(dy, w, x_dims=[2, 3, 8, 6], pad=[1, 0], post_pad=[0, 1], stride=[2, 2])
    run, c = _run(b.build())
    assert c.validation == "passed", c.error


def test_hipdnn_grouped_matmul_batch_repeats_slices_in_place() -> None:
    b = GraphBuilder("grouped", io="float")
    a = b.tensor("a", [4, 3, 5])
    bb = b.tensor("b", [2, 5, 2])
    b.matmul(a, bb, out="c")
    run, c = _run(b.build())
    assert c.validation == "passed", c.error


def test_relu_with_nonzero_lower_clip_and_slope() -> None:
    b = GraphBuilder("relu_odd", io="float")
    x = b.tensor("x", [2, 8, 4, 4])
    b.pointwise("relu_fwd", x, relu_lower_clip=-0.5, relu_upper_clip=1.5, relu_lower_clip_slope=0.1, out="y")
    run, c = _run(b.build())
    assert c.validation == "passed", c.error


@pytest.mark.parametrize("mode", ["relu_bwd", "sigmoid_bwd", "tanh_bwd", "gelu_bwd", "swish_bwd"])
def test_backward_activations_read_dy_then_x(mode: str) -> None:
    b = GraphBuilder(f"{mode}_graph", io="float")
    dy = b.tensor("dy", [2, 4, 3, 3])
    x = b.tensor("x", [2, 4, 3, 3])
    b.pointwise(mode, dy, x, out="dx")
    run, c = _run(b.build())
    assert c.validation == "passed", c.error


@pytest.mark.parametrize("dtype", ["bfloat16", "half", "float", "int32"])
def test_strided_tensors_round_trip_bit_exactly(dtype: str) -> None:
    b = GraphBuilder("rt", io=dtype)
    t = b.tensor("x", [2, 3, 4, 5], layout="NHWC")
    import ml_dtypes

    np_type = {"bfloat16": ml_dtypes.bfloat16, "half": np.float16, "float": np.float32, "int32": np.int32}[dtype]
    array = (np.arange(120).reshape(2, 3, 4, 5) - 60).astype(np_type)
    device = torch.device("cpu")
    dev = to_torch(array, t, device)
    assert tuple(dev.stride()) == t.strides
    back = to_numpy(dev, t)
    assert back.dtype == np.dtype(np_type) and np.array_equal(back.view(np.uint8), array.view(np.uint8))


def test_cpu_session_reports_why_staged_timing_is_not_used() -> None:
    b = GraphBuilder("tiny", io="float")
    b.pointwise("abs", b.tensor("x", [2, 2]), out="y")
    graph = b.build()
    session = backends.get("torch").prepare(graph, None, RunOptions(timing="staged", extra={"torch_device": "cpu"}))
    try:
        info = session.info()
        assert info["timer"] == "host" and "staged timing needs a GPU" in info["timing_fallback"]
    finally:
        session.close()


def test_unsupported_types_are_reported_statically() -> None:
    b = GraphBuilder("fp4", io="float")
    x = b.tensor("x", [2, 2])
    b.pointwise("abs", x, out="y", dtype="fp4_e2m1")
    support = backends.get("torch").check(b.build())
    assert not support and "fp4_e2m1" in support.reason

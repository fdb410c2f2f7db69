"""Inputs made by torch are the host's, bit for bit: hashes, every type's fill, whole graphs
through make_inputs(device=...), and the way back with host_array. Runs on torch's CPU device
(the same int64 arithmetic and gathers a GPU runs); skipped where torch is not installed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ulps import derived_statistics, ulps_apart

from hipdnn_trace.bench.device_data import to_host
from hipdnn_trace.bench.graph_run import DEVICE_DATA_TYPES

torch = pytest.importorskip("torch")

# E402 below: these modules are imported only once importorskip("torch") has let the module run
from hipdnn_trace.bench import counter_rng as cr, device_arrays  # noqa: E402
from hipdnn_trace.bench.attention_inputs import undefined_elements  # noqa: E402
from hipdnn_trace.bench.inputs import host_array, make_inputs  # noqa: E402
from hipdnn_trace.graph import ops  # noqa: E402
from hipdnn_trace.graph.load import load_file  # noqa: E402

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"
STREAM = cr.Stream.of(3, "torch-vs-numpy", 11)


@pytest.mark.parametrize("start", [0, 12345, 2**32 - 7])
def test_hashes_agree(start: int) -> None:
    assert np.array_equal(cr.hashes_torch(STREAM, start, 5000, "cpu").numpy(), cr.hashes(STREAM, start, 5000))


def _torch_types() -> list[str]:
    from hipdnn_trace.backends.torch_ops import TORCH_DTYPES

    return sorted(TORCH_DTYPES)


@pytest.mark.parametrize("dtype", _torch_types())
def test_every_torch_type_fills_the_hosts_bits(dtype: str) -> None:
    wide = dtype in cr.WIDE
    for domain in cr.DOMAINS:
        values = cr.table(domain, dtype)
        for start, n in ((0, 4097), (2**33 - 5, 11), (7, 1000)):   # odd starts, 2^32-hash blocks
            host = np.empty(n, dtype=np.float64 if dtype == "double" else values.dtype)
            cr.fill(host, STREAM, values, wide=wide, start=start)
            raw = torch.float64 if dtype == "double" else device_arrays._raw_torch(host.dtype.itemsize)
            out = torch.empty(n, dtype=raw)
            cr.fill_torch(out, STREAM, device_arrays._values_on(domain, dtype, "cpu"), wide=wide,
                          start=start, chunk=333)
            assert out.numpy().tobytes() == host.tobytes(), (dtype, domain, start)


@pytest.mark.parametrize("dtype", ["half", "bfloat16", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3_fnuz", "fp8_e5m2_fnuz"])
def test_torch_converts_every_table_value_as_the_host_rounds_it(dtype: str) -> None:
    """Devices get narrow tables as bits, never converting; still, torch's float32 -> type
    conversion (round to nearest even) gives the same bits for every float32 the generator makes,
    so a backend that converted on the device would agree too."""
    target = device_arrays.torch_dtype(dtype)
    if target is None:
        pytest.skip(f"this torch has no {dtype}")
    for domain in cr.DOMAINS:
        converted = torch.from_numpy(cr.float_table(domain).copy()).to(target)
        bits = converted.view(device_arrays._raw_torch(converted.element_size())).numpy()
        assert bits.tobytes() == cr.table(domain, dtype).tobytes(), domain


GRAPH_FILES = ["matmul/" + p.name for p in sorted((GRAPHS / "matmul").glob("*.json"))][:3] + [
    "attention/sdpa_backward_gqa_causal_bf16.json", "attention/sdpa_backward_varlen_fp16.json",
    "attention/sdpa_paged_gqa_fp16.json", "attention/sdpa_boolean_mask_fp32.json",
    "moe/moe_grouped_matmul_scatter_top2_bf16.json", "moe/moe_mxfp4_experts_fp16.json",
    "norm/layernorm_backward_bf16.json", "norm/layernorm_backward_fp32.json", "norm/rmsnorm_backward_fp16.json",
    "norm/rmsnorm_backward_fp32.json",
    "norm/batchnorm_inference_variance_nhwc_fp16.json", "pool/maxpool_backward_2d_fp16.json",
    "blockscale/nvfp4_dequantize_global_scale_bf16.json", "blockscale/mxfp8_e4m3_dequantize_fp32.json",
]


@pytest.mark.parametrize("name", GRAPH_FILES)
def test_make_inputs_on_a_device_equals_the_host(name: str) -> None:
    graph = load_file(GRAPHS / name)
    host = make_inputs(graph, 2)
    device = make_inputs(graph, 2, device="cpu")
    assert host.keys() == device.keys()
    for uid, a in host.items():
        t = graph.by_uid[uid]
        d = device[uid]
        assert isinstance(d, torch.Tensor) and d.dtype == device_arrays.torch_dtype(t.data_type)
        assert tuple(d.shape) == tuple(t.dims)
        back = host_array(d, t)
        assert back.dtype == a.dtype and back.shape == a.shape
        if uid in derived_statistics(graph):   # float64 sums in torch's order: within a unit of the type
            assert int(ulps_apart(back, a).max()) <= 1, t.name
            continue
        assert back.tobytes() == a.tobytes(), t.name
        if t.data_type in DEVICE_DATA_TYPES:   # the validator's and the cache's host copy: the same bits
            copy = to_host(d)
            assert copy.shape == a.shape and copy.tobytes() == a.tobytes(), t.name
    assert ops.graph_flops(graph, device) == ops.graph_flops(graph, host)
    on_host, on_dev = undefined_elements(graph, host), undefined_elements(graph, device)
    assert on_host.keys() == on_dev.keys() and all(np.array_equal(on_host[u], on_dev[u]) for u in on_host)


def test_attention_backward_o_and_stats_come_from_the_forward_on_the_device(monkeypatch) -> None:
    """With a device, O and stats are the reference forward of the device's q, k, v run there
    (float64 torch tensors), not a host computation uploaded."""
    from hipdnn_trace.backends.reference.ops import sdpa as sdpa_module

    graph = load_file(GRAPHS / "attention/sdpa_backward_mha_bf16.json")
    seen = []
    real = sdpa_module.sdpa_forward

    def spy(q, k, v, **kw):
        seen.append(type(q))
        return real(q, k, v, **kw)

    monkeypatch.setattr("hipdnn_trace.backends.reference.ops.sdpa_forward", spy)
    make_inputs(graph, 0, device="cpu")
    assert seen == [torch.Tensor]


def test_upload_and_host_array_keep_every_bit() -> None:
    graph = load_file(GRAPHS / "blockscale/nvfp4_dequantize_global_scale_bf16.json")
    for t in graph.input_tensors:
        host = make_inputs(graph, 0)[t.uid]
        assert host_array(device_arrays.upload(host, t, "cpu"), t).tobytes() == host.tobytes()


NORM_BACKWARDS = ["norm/layernorm_backward_bf16.json", "norm/layernorm_backward_fp16.json",
                  "norm/layernorm_backward_fp32.json", "norm/rmsnorm_backward_bf16.json",
                  "norm/rmsnorm_backward_fp32.json"]


def _no_host(monkeypatch, *targets: str) -> None:
    """Make every named host-copy function raise: a call means the value visited the host."""
    def refuse(*args, **kwargs):
        raise AssertionError("a device value was copied to the host")

    for target in targets:
        monkeypatch.setattr(target, refuse)


@pytest.mark.parametrize("name", NORM_BACKWARDS)
def test_norm_saved_statistics_stay_on_the_device_torch_cpu_standing_in(monkeypatch, name: str) -> None:
    """A norm backward's saved statistics are computed and rounded where x is (torch CPU tensors
    stand in for device tensors): host_array / to_numpy would raise. Equal to the host's within one
    unit of their type (float64 sums in another order)."""
    from hipdnn_trace.bench import norm_inputs

    graph = load_file(GRAPHS / name)
    host = make_inputs(graph, 4)
    inputs = make_inputs(graph, 4, device="cpu")
    stats = derived_statistics(graph)
    device_inputs = {uid: v for uid, v in inputs.items() if uid not in stats}
    device_inputs.update({uid: torch.zeros(1) for uid in stats})   # present, to be computed
    _no_host(monkeypatch, "hipdnn_trace.bench.norm_inputs.host_array", "hipdnn_trace.bench.device_arrays.host_array",
             "hipdnn_trace.backends.reference.xp.to_numpy", "hipdnn_trace.backends.torch_backend.to_numpy")
    made = norm_inputs.derived(graph, device_inputs, 4, "cpu")
    assert set(made) == stats and stats
    for uid, value in made.items():
        t = graph.by_uid[uid]
        assert isinstance(value, torch.Tensor) and value.dtype == device_arrays.torch_dtype(t.data_type)
        assert tuple(value.shape) == tuple(t.dims) and value.is_contiguous()
        monkeypatch.undo()
        assert int(ulps_apart(host_array(value, t), host[uid]).max()) <= 1, t.name


def test_norm_statistics_of_a_type_torch_stores_otherwise_are_rounded_on_the_host() -> None:
    """A statistic whose rounded storage dtype is not its device dtype (fp4 is held as e2m1 codes on a
    device, float32 values by round_in) comes back as the host array round_to gives, for make_inputs
    to place."""
    from hipdnn_trace.backends.reference.ops.rounding import round_to
    from hipdnn_trace.graph.model import Tensor

    stats = torch.tensor([[0.3, -1.7, 5.9]], dtype=torch.float64)
    got = device_arrays.stored(stats, Tensor(uid=1, name="inv_rms", dims=(1, 3), strides=(3, 1), data_type="fp4_e2m1"))
    assert isinstance(got, np.ndarray) and got.tobytes() == round_to(stats.numpy(), "fp4_e2m1").tobytes()


def test_attention_o_and_stats_are_rounded_on_the_device_torch_cpu_standing_in(monkeypatch) -> None:
    """An attention backward's O and stats are rounded where the forward ran (torch CPU tensors
    stand in for device tensors): neither copied to the host (to_numpy) nor uploaded again, and
    bit for bit the host path's values."""
    from hipdnn_trace.bench.attention_inputs import forward_results

    graph = load_file(GRAPHS / "attention/sdpa_backward_gqa_causal_bf16.json")
    host = make_inputs(graph, 1)
    inputs = make_inputs(graph, 1, device="cpu")
    _no_host(monkeypatch, "hipdnn_trace.backends.reference.xp.to_numpy", "hipdnn_trace.bench.device_arrays.upload")
    made = forward_results(graph, inputs)
    monkeypatch.undo()
    assert made
    for uid, value in made.items():
        t = graph.by_uid[uid]
        assert isinstance(value, torch.Tensor) and value.dtype == device_arrays.torch_dtype(t.data_type)
        assert host_array(value, t).tobytes() == host[uid].tobytes(), t.name

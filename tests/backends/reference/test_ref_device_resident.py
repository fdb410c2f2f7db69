"""The reference on torch (CPU here, a GPU in production) with results kept on the device.

``evaluate(..., keep_on_device=True)`` rounds on the device and returns device tensors of the
graph's outputs. On the same torch device it must give exactly what the default path gives
(which brings each float64 result to the host and rounds it there with numpy): the same float64
bits and the same stored bytes; against numpy, float64 values within 1e-12 relative. Inputs may
already be device tensors in their storage dtypes, and nothing but the outputs and what a later
node reads may stay alive.
"""

from __future__ import annotations

import weakref

import numpy as np
import pytest
from repo_paths import GRAPHS

from hipdnn_trace.backends.reference import executor, ops as ref, xp as shim
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.graph.load import execution_order, load_bytes

torch = pytest.importorskip("torch")
from array_api_compat import torch as torch_xp  # noqa: E402 - only with torch

#: every family, with virtual intermediates (fused, MoE on dequantized weights) and integer outputs
RESIDENT_GRAPHS = [
    "fused/matmul_bias_gelu_bf16.json",
    "fused/conv_bias_relu_nhwc_fp32.json",
    "attention/sdpa_backward_gqa_causal_bf16.json",
    "norm/batchnorm_training_nhwc_bf16.json",
    "norm/layernorm_backward_bf16.json",
    "reduction/reduce_max_rows_bf16.json",
    "pool/maxpool_2d_index_fp16.json",
    "pool/maxpool_backward_2d_bf16.json",
    "pool/avgpool_exclude_padding_3d_fp32.json",
    "moe/moe_grouped_matmul_scatter_top2_bf16.json",
    "moe/moe_grouped_matmul_backward_fp16.json",
    "moe/moe_mxfp4_experts_bf16.json",
    "blockscale/mxfp8_e4m3_quantize_bf16.json",
    "blockscale/nvfp4_quantize_fp32.json",
    "blockscale/nvfp4_dequantize_global_scale_fp16.json",
]


def _graph(rel: str):
    path = GRAPHS / rel
    if not path.exists():
        pytest.skip(f"{rel} is not bundled")
    return load_bytes(path.read_bytes(), str(path))


def _outputs(graph) -> set[int]:
    return {t.uid for t in graph.output_tensors}


def _close(want: np.ndarray, have: np.ndarray) -> None:
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(have), finite)
    scale = max(float(np.abs(want[finite]).max(initial=0.0)), 1e-300)
    assert float(np.abs(have[finite] - want[finite]).max(initial=0.0)) <= 1e-12 * scale


@pytest.mark.parametrize("rel", RESIDENT_GRAPHS)
def test_resident_evaluation_equals_the_default_path_and_numpy(rel: str) -> None:
    graph = _graph(rel)
    inputs = make_inputs(graph, 0)
    on_host = executor.evaluate(graph, inputs)
    brought_back = executor.evaluate(graph, inputs, xp=torch_xp)
    resident = executor.evaluate(graph, inputs, xp=torch_xp, keep_on_device=True)
    assert set(resident.exact) == set(resident.stored) == _outputs(graph)
    assert set(resident.placement.values()) == {torch_xp.__name__}
    for uid in _outputs(graph):
        name = graph.by_uid[uid].data_type
        exact, stored = resident.exact[uid], resident.stored[uid]
        assert isinstance(exact, torch.Tensor) and exact.dtype == torch.float64
        assert isinstance(stored, torch.Tensor) and stored.dtype == shim.torch_storage_dtype(name)
        assert exact.numpy().tobytes() == brought_back.exact[uid].tobytes(), graph.by_uid[uid].name
        assert shim.storage_to_numpy(stored, name).tobytes() == brought_back.stored[uid].tobytes()
        _close(on_host.exact[uid], exact.numpy())


def test_inputs_already_on_the_device_in_their_storage_dtypes() -> None:
    graph = _graph("moe/moe_mxfp4_experts_fp16.json")   # fp16, fp4 (held as float32), e8m0 and int32 inputs
    inputs = make_inputs(graph, 0)
    on_device = {u: shim.to_storage(a, graph.by_uid[u].data_type) for u, a in inputs.items()}
    from_host = executor.evaluate(graph, inputs, xp=torch_xp, keep_on_device=True)
    given = executor.evaluate(graph, on_device, xp=torch_xp, keep_on_device=True)
    for uid in _outputs(graph):
        assert torch.equal(given.exact[uid], from_host.exact[uid])
    # the default path takes device tensors too: they come back to the host bit for bit
    brought_back = executor.evaluate(graph, on_device, xp=torch_xp)
    for uid in _outputs(graph):
        assert brought_back.exact[uid].tobytes() == from_host.exact[uid].numpy().tobytes()


@pytest.mark.parametrize("keep", [True, False], ids=["resident", "brought-back"])
def test_intermediates_are_freed_after_their_last_reader(monkeypatch: pytest.MonkeyPatch, keep: bool) -> None:
    """Every device tensor a node produced (float64 and stored) is gone once its last reader ran,
    unless it is a graph output: checked before each node and at the end."""
    graph = _graph("fused/matmul_bias_gelu_bf16.json")
    order = execution_order(graph)
    last_read = {u: step for step, i in enumerate(order) for u in graph.nodes[i].inputs.values() if isinstance(u, int)}
    step_of = {u: step for step, i in enumerate(order) for u in graph.nodes[i].outputs.values() if u is not None}
    made: dict[int, list[weakref.ref]] = {}
    current = {"step": 0}

    def alive_when_they_should_not_be() -> list[str]:
        return [graph.by_uid[u].name for u, refs in made.items()
                if u not in _outputs(graph) and last_read.get(u, step_of[u]) < current["step"]
                and any(r() is not None for r in refs)]

    def watching(handler):
        def run(node, g, args):
            assert not alive_when_they_should_not_be()
            out = handler(node, g, args)
            current["step"] += 1
            for port, value in out.items():
                if value is not None:
                    made.setdefault(node.outputs[port], []).append(weakref.ref(value))
            return out
        return run

    real_round_in = ref.round_in

    def remembering(values, name):   # the stored value of the one output of the node that just ran
        out = real_round_in(values, name)
        (uid,) = [u for u, s in step_of.items() if s == current["step"] - 1]
        made.setdefault(uid, []).append(weakref.ref(out))
        return out

    monkeypatch.setattr(executor, "HANDLERS", {k: watching(h) for k, h in executor.HANDLERS.items()})
    monkeypatch.setattr(ref, "round_in", remembering)
    virtual = [t.uid for t in graph.tensors if t.virtual]
    assert virtual, "the graph has intermediates"
    result = executor.evaluate(graph, make_inputs(graph, 0), xp=torch_xp, keep_on_device=keep)
    current["step"] = len(order) + 1
    assert not alive_when_they_should_not_be()
    assert all(u in made for u in virtual), "every intermediate was watched"
    assert set(result.exact) == (_outputs(graph) if keep else set(step_of))


def test_keep_on_device_on_the_cpu_is_the_host_evaluation() -> None:
    graph = _graph("pool/maxpool_2d_index_bf16.json")
    inputs = make_inputs(graph, 0)
    a, b = executor.evaluate(graph, inputs), executor.evaluate(graph, inputs, keep_on_device=True)
    assert a.exact.keys() == b.exact.keys()
    assert all(a.stored[u].tobytes() == b.stored[u].tobytes() for u in a.stored)


def test_keep_on_device_needs_a_torch_target() -> None:
    xs = pytest.importorskip("array_api_strict")
    graph = _graph("pool/maxpool_2d_index_bf16.json")
    with pytest.raises(ValueError, match="keep_on_device needs a torch device"):
        executor.evaluate(graph, make_inputs(graph, 0), xp=xs, keep_on_device=True)


@pytest.mark.gpu
@pytest.mark.cuda
@pytest.mark.slow
def test_cuda_resident_evaluation_equals_the_cuda_default_path() -> None:
    """On the GPU: stored bytes equal the host rounding of the same float64 (NaN payloads aside)."""
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    for rel in RESIDENT_GRAPHS:
        graph = _graph(rel)
        inputs = make_inputs(graph, 0)
        brought_back = executor.evaluate(graph, inputs, device="cuda")
        resident = executor.evaluate(graph, inputs, device="cuda", keep_on_device=True)
        for uid in _outputs(graph):
            name = graph.by_uid[uid].data_type
            exact = resident.exact[uid].cpu().numpy()
            assert exact.tobytes() == brought_back.exact[uid].tobytes(), rel
            assert shim.storage_to_numpy(resident.stored[uid], name).tobytes() == \
                ref.round_to(exact, name).tobytes(), rel


#: graphs whose every tensor has a torch-exact rounding (the reference rounds none on the host)
EXACT_TYPE_GRAPHS = ["blockscale/mxfp8_e4m3_quantize_bf16.json", "blockscale/mxfp8_e4m3_quantize_fp32.json",
                     "fused/matmul_bias_gelu_bf16.json", "attention/sdpa_backward_gqa_causal_bf16.json"]


@pytest.mark.parametrize("rel", EXACT_TYPE_GRAPHS)
def test_default_path_rounds_on_the_device_and_uploads_storage_types_torch_cpu_standing_in(monkeypatch, rel) -> None:
    """The default device path (results brought back to the host) on torch's CPU standing in for a
    GPU: host inputs go up in their own dtypes (``from_numpy``, which makes a host float64 copy, sees
    only arrays that already are float64, such as a rounding ladder) and results are rounded on the
    device (the host's ``round_to`` would raise): the stored values are the host's rounding of the
    same float64 results (fp8_e8m0 block scales included), which are the resident path's bits."""
    graph = _graph(rel)
    inputs = make_inputs(graph, 0)
    resident = executor.evaluate(graph, inputs, xp=torch_xp, keep_on_device=True)
    converted = []
    real_from_numpy = shim.from_numpy

    def refuse(*args, **kwargs):
        raise AssertionError("rounded on the host")

    def spy(xp, a, device=None):
        converted.append(np.asarray(a).dtype)
        return real_from_numpy(xp, a, device)

    monkeypatch.setattr(executor.ref, "round_to", refuse)
    monkeypatch.setattr(shim, "from_numpy", spy)
    on_device = executor.evaluate(graph, inputs, xp=torch_xp)
    monkeypatch.undo()
    assert all(d == np.float64 for d in converted), converted
    assert resident.exact.keys() <= on_device.exact.keys()
    for uid, exact in on_device.exact.items():   # the host's rounding of the same float64 values
        stored = ref.round_to(exact, graph.by_uid[uid].data_type)
        assert on_device.stored[uid].dtype == stored.dtype and on_device.stored[uid].tobytes() == stored.tobytes(), uid
    for uid, exact in resident.exact.items():    # the same float64 math as on the device
        assert on_device.exact[uid].tobytes() == exact.numpy().tobytes(), uid

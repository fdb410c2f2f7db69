"""MoE grouped matmul: the float64 reference against a per-row loop written from hipDNN's
definition, the weight gradient against finite differences, routing inputs with meaning,
hipDNN's routing contract, FLOPs from the real per-expert counts and the cuDNN plan."""

from __future__ import annotations

import numpy as np
import pytest
from finite_differences import numeric_grad
from graph_dicts import load_error

from hipdnn_trace.backends import cudnn_graph
from hipdnn_trace.backends.reference import executor
from hipdnn_trace.backends.reference.ops import moe_grouped_matmul, moe_grouped_matmul_backward
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph import moe, ops
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.load import parse_graph
from hipdnn_trace.graph.write import graph_to_json

RNG = np.random.default_rng(7)


def per_row_loop(token, weight, offsets, mode, top_k=0, index=None, ks=None, out_rows=None):
    """hipDNN's CpuFpReferenceMoeGroupedMatmul, one routed row and one dot product at a time."""
    experts, k, n = weight.shape
    total = len(index) if mode == "GATHER" else token.shape[1]
    out = np.zeros((out_rows or total, n))
    bounds = list(offsets) + [total]
    for g in range(len(offsets)):
        for r in range(bounds[g], bounds[g + 1]):
            src = index[r] if mode == "GATHER" else r
            dst = index[r] * top_k + ks[r] if mode == "SCATTER" else r
            for col in range(n):
                out[dst, col] = sum(token[0, src, i] * weight[g % experts, i, col] for i in range(k))
    return out[None]


@pytest.mark.parametrize("mode", ["NONE", "GATHER", "SCATTER"])
def test_forward_equals_the_per_row_definition(mode: str) -> None:
    experts, k, n, tokens, top_k = 4, 5, 3, 6, 2
    routed = tokens * top_k
    token = RNG.standard_normal((1, tokens if mode == "GATHER" else routed, k))
    weight = RNG.standard_normal((experts, k, n))
    offsets = [0, 3, 3, 7]                      # expert 1 empty
    index = RNG.permutation(routed) // top_k if mode != "NONE" else None
    ks = None
    if mode == "SCATTER":                       # a permutation of (token, k) destinations
        dst = RNG.permutation(routed)
        index, ks = dst // top_k, dst % top_k
    got = moe_grouped_matmul(token, weight, np.array(offsets), mode=mode, top_k=top_k, token_index=index,
                             token_ks=ks)
    want = per_row_loop(token, weight, offsets, mode, top_k, index, ks)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


def test_rows_before_the_first_offset_are_zero_and_groups_wrap_around_the_experts() -> None:
    token, weight = RNG.standard_normal((1, 8, 3)), RNG.standard_normal((2, 3, 2))
    offsets = np.array([2, 4, 5, 7])           # 4 groups over 2 experts: group g uses expert g % 2
    got = moe_grouped_matmul(token, weight, offsets)
    assert not got[0, :2].any()
    np.testing.assert_allclose(got[0, 5:7], token[0, 5:7] @ weight[0], rtol=1e-14)
    np.testing.assert_allclose(got[0, 7:], token[0, 7:] @ weight[1], rtol=1e-14)


@pytest.mark.parametrize(("offsets", "message"), [
    ([0, 5, 3], "non-decreasing"), ([0, 2, 99], "out of range"), ([-1, 2, 3], "out of range")])
def test_broken_offsets_are_refused(offsets, message) -> None:
    with pytest.raises(UnsupportedError, match=message):
        moe_grouped_matmul(np.ones((1, 6, 2)), np.ones((3, 2, 2)), np.array(offsets))


def test_duplicate_scatter_destinations_are_refused() -> None:
    with pytest.raises(UnsupportedError, match="duplicate SCATTER destination"):
        moe_grouped_matmul(np.ones((1, 4, 2)), np.ones((2, 2, 2)), np.array([0, 2]), mode="SCATTER", top_k=2,
                           token_index=np.array([0, 0, 1, 1]), token_ks=np.array([0, 0, 0, 1]))


def test_weight_gradient_matches_finite_differences_of_the_forward() -> None:
    token, weight = RNG.standard_normal((1, 9, 3)), RNG.standard_normal((3, 3, 2))
    dout, offsets = RNG.standard_normal((1, 9, 2)), np.array([0, 4, 4])
    loss = lambda: float((moe_grouped_matmul(token, weight, offsets) * dout).sum())
    np.testing.assert_allclose(moe_grouped_matmul_backward(dout, token, offsets), numeric_grad(loss, weight),
                               rtol=1e-7, atol=1e-8)


def test_backward_needs_the_first_expert_to_start_at_row_zero() -> None:
    with pytest.raises(UnsupportedError, match=r"first_token_offset\[0\] must be 0"):
        moe_grouped_matmul_backward(np.ones((1, 4, 2)), np.ones((1, 4, 2)), np.array([1, 2]))


def _graph(mode: str = "SCATTER", experts: int = 16, tokens: int = 200, top_k: int = 4):
    b = GraphBuilder("moe", io="bfloat16")
    routed = tokens * top_k
    token = b.tensor("token", [1, tokens if mode == "GATHER" else routed, 32])
    weight = b.tensor("weight", [experts, 32, 16], strides=[512, 1, 32])
    offsets = b.tensor("first_token_offset", [experts, 1, 1], dtype="int32")
    index = b.tensor("token_index", [1, routed, 1], dtype="int32") if mode != "NONE" else None
    ks = b.tensor("token_ks", [1, routed, 1], dtype="int32") if mode == "SCATTER" else None
    b.moe_grouped_matmul(token, weight, offsets, mode=mode, top_k=top_k if mode == "SCATTER" else 0,
                         token_index=index, token_ks=ks, name="experts")
    return b.build()


@pytest.mark.parametrize("mode", ["NONE", "GATHER", "SCATTER"])
def test_generated_routing_is_what_a_router_makes(mode: str) -> None:
    graph = _graph(mode)
    node = graph.nodes[0]
    x = make_inputs(graph, seed=3)
    offsets = x[node.inputs["first_token_offset"]].reshape(-1).astype(int)
    counts = np.diff(np.append(offsets, 800))
    assert offsets[0] == 0 and (counts >= 0).all() and counts.sum() == 800
    assert (counts == 0).sum() >= 2, "a realistic router leaves some experts empty"
    assert counts.max() > 3 * np.median(counts[counts > 0]) / 2, "popularity is skewed"
    if mode == "NONE":
        return
    index = x[node.inputs["token_index"]].reshape(-1).astype(int)
    assert index.min() >= 0 and index.max() < 200
    if mode == "SCATTER":
        ks = x[node.inputs["token_ks"]].reshape(-1).astype(int)
        assert sorted(index * 4 + ks) == list(range(800)), "destinations are a permutation"
    for start, end in zip(offsets, np.append(offsets[1:], 800)):   # a token never meets one expert twice
        assert len(set(index[start:end])) == end - start
    assert executor.evaluate(graph, x) is not None


def test_flops_count_the_routed_rows_from_the_bound_offsets() -> None:
    graph = _graph("NONE")
    node = graph.nodes[0]
    x = make_inputs(graph, seed=0)
    assert ops.graph_flops(graph, x) == 2.0 * 32 * 16 * 800
    x[node.inputs["first_token_offset"]] = np.array([100] * 16).reshape(16, 1, 1)
    assert ops.graph_flops(graph, x) == 2.0 * 32 * 16 * 700


@pytest.mark.parametrize(("edit", "fragment"), [
    (lambda n, t: n.update(top_k=0), "nodes[0].top_k: SCATTER needs 1 <= top_k <= 16"),
    (lambda n, t: n.update(mode="scattered"), "nodes[0].mode: unknown mode 'scattered'"),
    (lambda n, t: n["inputs"].pop("token_ks_tensor_uid"), "SCATTER mode requires the token_ks tensor"),
    (lambda n, t: t[2].update(data_type="int64"), "inputs.first_token_offset_tensor_uid: must be int32"),
    (lambda n, t: t[1].update(dims=[16, 31, 16]), "inputs.weight_tensor_uid: dims [16, 31, 16]: K 31"),
])
def test_the_routing_contract_and_shapes_are_checked_with_the_json_path(edit, fragment: str) -> None:
    assert fragment in load_error(_graph(), edit, "moe.json")


def test_cudnn_plan_passes_mode_top_k_and_a_batched_offset_table() -> None:
    plan = cudnn_graph.plan(_graph())
    (call,) = plan.ops
    assert call.method == "moe_grouped_matmul" and call.attrs["top_k"] == 4
    assert call.attrs["mode"].member == "SCATTER" and call.tensors["token_ks"] is not None
    raw = graph_to_json(_graph("NONE"))
    raw["tensors"][2]["dims"], raw["tensors"][2]["strides"] = [32, 1, 1], [1, 1, 1]
    (batched,) = cudnn_graph.plan(parse_graph(raw, "moe.json")).ops
    assert next(t for t in cudnn_graph.plan(parse_graph(raw, "moe.json")).inputs
                if t.name == "first_token_offset").dims == (32, 1, 1) and batched.method == "moe_grouped_matmul"
    assert moe.mode(parse_graph(raw, "moe.json").nodes[0]) == "NONE"


def test_cudnn_refuses_gather_on_versions_known_to_crash() -> None:
    from hipdnn_trace.backends.cudnn import MOE_GATHER_CRASHES_UP_TO, _refuse_known_crashes

    plan = cudnn_graph.plan(_graph("GATHER"))
    with pytest.raises(UnsupportedError, match="crashes executing MoE GATHER"):
        _refuse_known_crashes(plan, MOE_GATHER_CRASHES_UP_TO)
    _refuse_known_crashes(plan, MOE_GATHER_CRASHES_UP_TO + 100)   # a newer cuDNN is asked
    _refuse_known_crashes(cudnn_graph.plan(_graph("NONE")), MOE_GATHER_CRASHES_UP_TO)

"""The float64 reference's cost model (backends/reference/cost.py) on graphs whose work is known.

Every expected count is computed another way: GEMM FLOPs from the shapes, attention's computed
scores from the tiles the reference itself walks (counted while it evaluates), element passes from
the tensors' sizes. No timing is asserted: the seconds come from rates given here.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hipdnn_trace.backends.reference import cost, executor
from hipdnn_trace.backends.reference.ops import sdpa as sdpa_ops
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.graph import attention
from hipdnn_trace.graph.build import GraphBuilder

RATES = cost.Rates(gemm=1e10, passes=1e9, transcendental=1e8, call_s=1e-6, small_gemm=1e9)


def _matmul(m: int, k: int, n: int, io: str = "float"):
    b = GraphBuilder(f"mm_{m}x{k}x{n}", io=io)
    b.matmul(b.tensor("a", [1, m, k]), b.tensor("b", [1, k, n]), out="c")
    return b.build()


def _attention(b_: int, hq: int, hkv: int, sq: int, skv: int, d: int, **masking):
    b = GraphBuilder("attn", io="half")
    q = b.tensor("q", [b_, hq, sq, d])
    k = b.tensor("k", [b_, hkv, skv, d])
    v = b.tensor("v", [b_, hkv, skv, d])
    b.sdpa(q, k, v, **masking)
    return b.build()


def test_seconds_add_each_kind_of_work_at_its_rate() -> None:
    work = cost.Work(gemm_flops=2e10, passes=3e9, transcendental=1e8, calls=5e5, small_gemm_flops=4e9)
    assert RATES.seconds(work) == pytest.approx(2 + 3 + 1 + 0.5 + 4)
    assert (work + work).times(0.5) == work


def test_a_large_matmul_is_its_gemm_flops_plus_reading_and_rounding() -> None:
    m, k, n = 1024, 512, 2048
    work = cost.graph_work(_matmul(m, k, n))
    assert work.gemm_flops == 2 * m * k * n and work.small_gemm_flops == 0
    assert work.passes == cost.INPUT_PASSES * (m * k + k * n) + cost.OUTPUT_PASSES * m * n
    assert work.calls == cost.NODE_CALLS


def test_passes_over_arrays_that_fit_the_cache_cost_a_fraction() -> None:
    def relu(n: int):
        b = GraphBuilder(f"relu{n}", io="float")
        b.pointwise("relu_fwd", b.tensor("x", [1, n]), out="y")
        return b.build()

    small, big = relu(cost.CACHED_ELEMENTS), relu(cost.CACHED_ELEMENTS * 8)
    per_element = (cost.INPUT_PASSES + cost.OUTPUT_PASSES + cost.POINTWISE_PASSES)
    assert cost.graph_work(big).passes == per_element * cost.CACHED_ELEMENTS * 8
    assert cost.graph_work(small).passes == cost.CACHED_PASS_FACTOR * per_element * cost.CACHED_ELEMENTS


def test_a_small_matmul_runs_at_the_small_product_rate() -> None:
    work = cost.graph_work(_matmul(16, 32, 8))
    assert work.gemm_flops == 0 and work.small_gemm_flops == 2 * 16 * 32 * 8


def test_full_attention_computes_every_score_once() -> None:
    g = _attention(2, 8, 2, 100, 300, 64)
    scores, tiles = cost.attention_scores(attention.config(g.nodes[0], g))
    assert scores == 2 * 8 * 100 * 300
    assert tiles == 2   # one tile per batch entry: both kv heads' 8 x 100 x 300 scores fit one block
    work = cost.node_work(g.nodes[0], g)
    assert work.small_gemm_flops == 2 * (64 + 64) * scores and work.transcendental == scores


def test_causal_attention_skips_the_keys_each_row_block_cannot_see(monkeypatch: pytest.MonkeyPatch) -> None:
    # blocks of 1024 // (8 * G * skv) rows: with G 2, skv 16 that is 4 rows; block r sees keys [0, 4 (r + 1))
    monkeypatch.setattr(sdpa_ops, "SCORE_BLOCK_BYTES", 1024)
    g = _attention(1, 2, 1, 16, 16, 8, causal=True)
    scores, tiles = cost.attention_scores(attention.config(g.nodes[0], g))
    assert tiles == 4 and scores == 2 * 4 * (4 + 8 + 12 + 16)


@pytest.mark.parametrize("masking", [{}, {"causal": True}, {"causal": True, "left_bound": 5},
                                     {"causal": True, "alignment": "BOTTOM_RIGHT"}])
def test_the_model_walks_the_tiles_the_reference_computes(monkeypatch: pytest.MonkeyPatch, masking: dict) -> None:
    """Count the scores the reference really forms (every softmax block's size) while it evaluates."""
    monkeypatch.setattr(sdpa_ops, "SCORE_BLOCK_BYTES", 8 * 3 * 40 * 7)   # several row blocks
    seen: list[int] = []
    real = sdpa_ops._softmax_block

    def counting(products, *args, **kwargs):
        def counted():
            qk = products()
            seen.append(qk.shape[0] * qk.shape[1] * qk.shape[2])
            return qk
        return real(counted, *args, **kwargs)

    monkeypatch.setattr(sdpa_ops, "_softmax_block", counting)
    g = _attention(2, 6, 2, 37, 40, 8, **masking)
    executor.evaluate(g, make_inputs(g, 0))
    scores, tiles = cost.attention_scores(attention.config(g.nodes[0], g))
    assert (scores, tiles) == (sum(seen), len(seen))


def test_attention_backward_prices_three_blas_products_and_two_einsum_contractions_per_score() -> None:
    b = GraphBuilder("attn_bwd", io="half")
    q, k, v = (b.tensor(n, [1, 4, 64, 32]) for n in ("q", "k", "v"))
    o, do = b.tensor("o", [1, 4, 64, 32]), b.tensor("do", [1, 4, 64, 32])
    stats = b.tensor("stats", [1, 4, 64, 1], dtype="float")
    b.sdpa_backward(q, k, v, o, do, stats)
    g = b.build()
    work = cost.node_work(g.nodes[0], g)
    scores = 4 * 64 * 64
    assert work.small_gemm_flops == 2 * (2 * 32 + 32) * scores   # S, dP, dQ
    einsum = cost.CONTRACT_PASSES_PER_FLOP * 2 * (32 + 32) * scores   # dV, dK
    io = cost.INPUT_PASSES * 5 * 4 * 64 * 32 + cost.INPUT_PASSES * 4 * 64 + cost.OUTPUT_PASSES * 3 * 4 * 64 * 32
    # every array of this node fits the cache: its passes cost a fraction of a pass over memory
    assert work.passes == pytest.approx(cost.CACHED_PASS_FACTOR * (cost.SDPA_PASSES[True] * scores + einsum + io))
    # its inputs' O and stats come from a forward: half the forward's own work (measured)
    forward = cost.attention_work(dataclasses.replace(attention.config(g.nodes[0], g), backward=False))
    assert cost.derived_inputs_work(g.nodes[0], g) == forward.times(0.5)


def test_padded_attention_is_priced_at_the_lengths_the_inputs_get_on_average() -> None:
    assert cost.expected_lengths(100, 4) == [100, 50, 50, 50]
    b = GraphBuilder("varlen", io="half")
    q, k, v = (b.tensor(n, [4, 2, 100, 16]) for n in ("q", "k", "v"))
    lq = b.tensor("seq_len_q", [4, 1, 1, 1], dtype="int32")
    lkv = b.tensor("seq_len_kv", [4, 1, 1, 1], dtype="int32")
    b.sdpa(q, k, v, seq_len_q=lq, seq_len_kv=lkv)
    g = b.build()
    scores, _ = cost.attention_scores(attention.config(g.nodes[0], g))
    assert scores == 2 * (100 * 100 + 3 * 50 * 50)


def test_pooling_pays_per_window_tap_and_pointwise_per_transcendental() -> None:
    pool = GraphBuilder("pool", io="float")
    pool.pool(pool.tensor("x", [2, 3, 9, 9]), "MAXPOOL", 3, stride=3, out="y")   # y [2, 3, 3, 3], 9 taps
    work = cost.node_work(pool.build().nodes[0], pool.build())
    assert work.passes == cost.CACHED_PASS_FACTOR * (
        cost.POOL_PASSES["MAXPOOL"] * 9 * 54 + cost.INPUT_PASSES * 486 + cost.OUTPUT_PASSES * 54)
    b = GraphBuilder("gelu", io="float")
    x = b.tensor("x", [4, 1000])
    b.pointwise("gelu_fwd", x, out="y")
    g = b.build()
    work = cost.graph_work(g)
    assert work.transcendental == cost.POINTWISE_TRANSCENDENTAL["gelu_fwd"] * 4000
    assert work.gemm_flops == work.small_gemm_flops == 0


def test_measured_rates_are_positive_and_cached() -> None:
    rates = cost.measured_rates()
    assert min(rates.gemm, rates.passes, rates.transcendental, rates.small_gemm) > 0 and rates.call_s > 0
    assert cost.measured_rates() is rates
    assert np.isfinite(cost.graph_seconds(_matmul(64, 64, 64), rates))


def test_work_adds_and_scales_every_field():
    """``Work`` adds and scales field by field (written out for the plan's speed): a field added later
    and left out of either would be lost from every estimate."""
    names = [f.name for f in dataclasses.fields(cost.Work)]
    a = cost.Work(**{n: float(i + 1) for i, n in enumerate(names)})
    b = cost.Work(**{n: 10.0 ** (i + 1) for i, n in enumerate(names)})
    assert dataclasses.asdict(a + b) == {n: getattr(a, n) + getattr(b, n) for n in names}
    assert dataclasses.asdict(a.times(3.0)) == {n: 3.0 * getattr(a, n) for n in names}
    assert cost.total([a, b, a]) == a + b + a

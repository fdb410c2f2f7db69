"""The float64 attention reference against direct definitions, finite differences and identities.

Every expected value here is computed another way: explicit Python loops over (b, h, i, j)
with the masking rule written out, numerical derivatives of the forward, or GQA as MHA with
repeated heads. Nothing compares the blockwise code with itself except block sizes.
"""

from __future__ import annotations

import dataclasses
import math
import tracemalloc

import numpy as np
import pytest
from finite_differences import numeric_grad

from hipdnn_trace.backends.reference.ops.sdpa import (
    Masking,
    gather_pages,
    sdpa_backward,
    sdpa_forward,
)
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph import attention

RNG = np.random.default_rng(7)


def _qkv(b=2, hq=6, hkv=2, sq=5, skv=7, dqk=3, dv=4):
    return (RNG.standard_normal((b, hq, sq, dqk)), RNG.standard_normal((b, hkv, skv, dqk)),
            RNG.standard_normal((b, hkv, skv, dv)))


def _kept(m: Masking, b: int, i: int, j: int, sq: int, skv: int) -> bool:
    """The masking rule, written out for one pair."""
    lq = sq if m.seq_len_q is None else m.seq_len_q[b]
    lkv = skv if m.seq_len_kv is None else m.seq_len_kv[b]
    if i >= lq or j >= lkv:
        return False
    off = lkv - lq if m.bottom_right else 0
    right = m.right_bound if m.right_bound is not None else (0 if m.causal else None)
    if right is not None and j > i + off + right:
        return False
    if m.left_bound is not None and j <= i + off - m.left_bound:
        return False
    return True


#: ``_loops``' default masking: none (one instance, as a default argument would be).
_NO_MASKING = Masking()


def _loops(q, k, v, scale, m=_NO_MASKING, bias=None, allow=None, sink=None):
    """Attention by explicit loops: (o, stats)."""
    b_, hq, sq, _ = q.shape
    _, hkv, skv, _ = k.shape
    g = hq // hkv
    o = np.zeros((b_, hq, sq, v.shape[-1]))
    stats = np.full((b_, hq, sq), -np.inf)
    for b in range(b_):
        for h in range(hq):
            for i in range(sq):
                logits = {}
                for j in range(skv):
                    if not _kept(m, b, i, j, sq, skv):
                        continue
                    if allow is not None and not np.broadcast_to(allow, (b_, hq, sq, skv))[b, h, i, j]:
                        continue
                    s = scale * float(np.dot(q[b, h, i], k[b, h // g, j]))
                    if bias is not None:
                        s += float(np.broadcast_to(bias, (b_, hq, sq, skv))[b, h, i, j])
                    logits[j] = s
                extra = [] if sink is None else [float(sink[h])]
                values = list(logits.values()) + extra
                if not values:
                    continue
                top = max(values)
                denom = sum(math.exp(x - top) for x in values)
                for j, s in logits.items():
                    o[b, h, i] += math.exp(s - top) / denom * v[b, h // g, j]
                stats[b, h, i] = top + math.log(denom)
    return o, stats


MASKINGS = [
    Masking(),
    Masking(causal=True),
    Masking(causal=True, bottom_right=True),
    Masking(causal=True, left_bound=2),
    Masking(left_bound=3, right_bound=1),
    Masking(causal=True, seq_len_q=(3, 5), seq_len_kv=(7, 2)),
    Masking(causal=True, bottom_right=True, seq_len_q=(4, 2), seq_len_kv=(6, 7)),
]


@pytest.mark.parametrize("m", MASKINGS, ids=lambda m: f"c{m.causal}br{m.bottom_right}l{m.left_bound}"
                         f"r{m.right_bound}len{m.seq_len_q is not None}")
@pytest.mark.parametrize("shape", [(5, 7), (8, 4)])
def test_forward_equals_explicit_loops(m: Masking, shape: tuple[int, int]) -> None:
    sq, skv = shape
    if m.seq_len_q is not None and (max(m.seq_len_q) > sq or max(m.seq_len_kv) > skv):   # type: ignore[arg-type]
        m = dataclasses.replace(m, seq_len_q=tuple(min(x, sq) for x in m.seq_len_q),      # type: ignore[union-attr]
                                seq_len_kv=tuple(min(x, skv) for x in m.seq_len_kv))      # type: ignore[union-attr]
    q, k, v = _qkv(sq=sq, skv=skv)
    out = sdpa_forward(q, k, v, scale=0.4, masking=m, budget=8 * 2 * skv)   # one head, two rows a tile
    o, stats = _loops(q, k, v, 0.4, m)
    np.testing.assert_allclose(out["o"], o, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out["stats"][..., 0], stats, rtol=1e-12, atol=1e-12)
    finite = out["sum_exp"] > 0
    np.testing.assert_allclose(out["stats"][finite], out["max"][finite] + np.log(out["sum_exp"][finite]),
                               rtol=1e-12)


def test_bias_boolean_mask_and_sinks_equal_explicit_loops() -> None:
    q, k, v = _qkv()
    bias = RNG.standard_normal((1, 1, 5, 7))
    allow = RNG.random((2, 1, 5, 7)) < 0.7
    sink = RNG.standard_normal(6)
    for kw in ({"bias": bias}, {"allow": allow}, {"sink": sink}, {"bias": RNG.standard_normal((2, 1, 1, 7))}):
        out = sdpa_forward(q, k, v, scale=0.3, masking=Masking(causal=True, bottom_right=True), **kw)
        o, stats = _loops(q, k, v, 0.3, Masking(causal=True, bottom_right=True), **kw)
        np.testing.assert_allclose(out["o"], o, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(out["stats"][..., 0], stats, rtol=1e-12, atol=1e-12)


def test_a_row_with_no_key_is_zero_with_minus_inf_stats() -> None:
    q, k, v = _qkv(b=1, sq=3, skv=3)
    out = sdpa_forward(q, k, v, scale=1.0, masking=Masking(seq_len_q=(2,), seq_len_kv=(3,)))
    assert (out["o"][0, :, 2] == 0).all() and np.isneginf(out["stats"][0, :, 2]).all()
    assert (out["sum_exp"][0, :, 2] == 0).all()


def test_gqa_equals_mha_with_repeated_heads() -> None:
    q, k, v = _qkv(hq=6, hkv=3)
    gqa = sdpa_forward(q, k, v, scale=0.5, masking=Masking(causal=True))
    mha = sdpa_forward(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1), scale=0.5, masking=Masking(causal=True))
    np.testing.assert_allclose(gqa["o"], mha["o"], rtol=1e-13, atol=1e-13)
    do = RNG.standard_normal(gqa["o"].shape)
    g1 = sdpa_backward(q, k, v, do, scale=0.5, masking=Masking(causal=True))
    g2 = sdpa_backward(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1), do, scale=0.5,
                       masking=Masking(causal=True))
    np.testing.assert_allclose(g1["dq"], g2["dq"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g1["dk"], g2["dk"].reshape(2, 3, 2, 7, 3).sum(axis=2), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("budget", [1, 8 * 7 * 2, 8 * 7 * 3 * 2], ids=["1head1row", "1head2rows", "3heads2rows"])
def test_blocks_do_not_change_results(budget: int) -> None:
    q, k, v = _qkv()
    m = Masking(causal=True, left_bound=3)
    do = RNG.standard_normal((2, 6, 5, 4))
    ref_f, ref_b = sdpa_forward(q, k, v, scale=0.7, masking=m), sdpa_backward(q, k, v, do, scale=0.7, masking=m)
    f = sdpa_forward(q, k, v, scale=0.7, masking=m, budget=budget)
    b = sdpa_backward(q, k, v, do, scale=0.7, masking=m, budget=budget)
    np.testing.assert_allclose(f["o"], ref_f["o"], rtol=1e-12, atol=1e-14)
    for key in ("dq", "dk", "dv"):
        np.testing.assert_allclose(b[key], ref_b[key], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("m", [Masking(), Masking(causal=True, left_bound=2),
                               Masking(causal=True, bottom_right=True, seq_len_q=(3, 2), seq_len_kv=(4, 3))],
                         ids=["dense", "causal-window", "varlen-bottom-right"])
def test_backward_equals_finite_differences(m: Masking) -> None:
    q, k, v = _qkv(b=2, hq=4, hkv=2, sq=3, skv=4, dqk=2, dv=3)
    bias = RNG.standard_normal((1, 4, 3, 4))
    sink = RNG.standard_normal(4)
    do = RNG.standard_normal((2, 4, 3, 3))

    def loss() -> float:
        return float(np.sum(sdpa_forward(q, k, v, scale=0.6, masking=m, bias=bias, sink=sink)["o"] * do))

    got = sdpa_backward(q, k, v, do, scale=0.6, masking=m, bias=bias, sink=sink)
    for name, arr in (("dq", q), ("dk", k), ("dv", v), ("dbias", bias), ("dsink", sink)):
        np.testing.assert_allclose(got[name], numeric_grad(loss, arr), rtol=1e-6, atol=1e-8, err_msg=name)


def test_backward_reads_the_given_output_for_the_softmax_gradient_term() -> None:
    """D = rowsum(dO * O) comes from the O the op receives: a shifted O moves dq, not dv."""
    q, k, v = _qkv()
    do = RNG.standard_normal((2, 6, 5, 4))
    exact = sdpa_forward(q, k, v, scale=0.5)["o"]
    same = sdpa_backward(q, k, v, do, scale=0.5, o=exact)
    recomputed = sdpa_backward(q, k, v, do, scale=0.5)
    np.testing.assert_allclose(same["dq"], recomputed["dq"], rtol=1e-12, atol=1e-12)
    shifted = sdpa_backward(q, k, v, do, scale=0.5, o=exact + 0.01)
    assert not np.allclose(shifted["dq"], recomputed["dq"])
    np.testing.assert_allclose(shifted["dv"], recomputed["dv"], rtol=1e-12)


def test_identities_ones_values_zero_scale_and_key_permutation() -> None:
    q, k, v = _qkv()
    ones = np.ones_like(v)
    np.testing.assert_allclose(sdpa_forward(q, k, ones, scale=0.8, masking=Masking(causal=True))["o"], 1.0,
                               rtol=1e-13)
    zero = sdpa_forward(q, k, v, scale=0.0)["o"]
    np.testing.assert_allclose(zero, np.repeat(v.mean(axis=2, keepdims=True), 3, axis=1).repeat(5, axis=2),
                               rtol=1e-12)
    perm = RNG.permutation(7)
    np.testing.assert_allclose(sdpa_forward(q, k[:, :, perm], v[:, :, perm], scale=0.8)["o"],
                               sdpa_forward(q, k, v, scale=0.8)["o"], rtol=1e-12)


def test_gather_pages_rebuilds_the_dense_cache_and_refuses_bad_indices() -> None:
    dense = RNG.standard_normal((2, 3, 12, 4))                       # B, H, S, D with pages of 4
    container = np.zeros((7, 3, 4, 4))
    table = np.array([[5, 0, 3], [1, 6, 2]])
    for b in range(2):
        for p in range(3):
            container[table[b, p]] = dense[b, :, 4 * p:4 * p + 4]
    np.testing.assert_array_equal(gather_pages(container, table, 10), dense[:, :, :10])
    with pytest.raises(UnsupportedError, match="page table entries"):
        gather_pages(container, np.array([[0, 7, 1]]), 10)


def _cfg(**kw) -> attention.AttentionConfig:
    base = attention.AttentionConfig(backward=False, batch=1, heads_q=1, heads_kv=1, seq_q=1, seq_kv=1, d_qk=1,
                                     d_v=1, scale=1.0, scale_source="x", causal=False, bottom_right=False,
                                     left_bound=None, right_bound=None, padded=False, paged=False)
    return dataclasses.replace(base, **kw)


@pytest.mark.parametrize("causal,br,left,right", [(False, False, None, None), (True, False, None, 0),
                                                  (True, True, None, 0), (True, False, 3, 0),
                                                  (False, True, 2, 1), (False, False, 4, None)])
def test_kept_pairs_counts_exactly(causal: bool, br: bool, left: int | None, right: int | None) -> None:
    cfg = _cfg(causal=causal, bottom_right=br, left_bound=left, right_bound=right)
    m = Masking(causal=causal, bottom_right=br, left_bound=left, right_bound=right)
    for lq in (1, 3, 8):
        for lkv in (1, 5, 8, 11):
            brute = int(m.keep(range(lq), range(lkv), lq, lkv).sum())
            assert attention.kept_pairs(cfg, lq, lkv) == brute, (lq, lkv)


def test_score_blocks_stay_bounded() -> None:
    """A 2048x2048 causal attention never holds the whole float64 score matrix (32 MiB)."""
    q, k, v = (RNG.standard_normal((1, 1, 2048, 16)) for _ in range(3))
    tracemalloc.start()
    sdpa_forward(q, k, v, scale=0.25, masking=Masking(causal=True), budget=8 * 64 * 2048)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 2048 * 2048 * 8 / 2, peak

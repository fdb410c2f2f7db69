"""The tiled attention reference (ops/sdpa.py) against the unchunked direct definition.

The oracle here forms the whole [B, Hq, Sq, Skv] score matrix with GQA as repeated heads, the
masking rule written out with index arithmetic, a dense softmax with the sink in its
denominator, and the backward's textbook formulas (dV = P^T dO, dS = P (dO V^T - rowsum(dO O)),
dQ = scale dS K, dK = scale dS^T Q). The reference runs with budgets that force one head and
one query row per tile (and a few in between), so every chunk boundary (heads of a group, rows,
key ranges, pages) is crossed; results must agree to float64 rounding.
"""

from __future__ import annotations

import numpy as np
import pytest

from hipdnn_trace.backends.reference.ops.sdpa import (
    Masking,
    PagedKV,
    TilePlan,
    sdpa_backward,
    sdpa_forward,
    tile_plan,
    tile_shape,
    visible_keys,
)

RNG = np.random.default_rng(33)
#: 1 byte: one head and one row a tile; then a few rows of one head; then two heads of a group
BUDGETS = [1, 8 * 11 * 3, 8 * 11 * 2 * 2]


def _allowed(m: Masking, b: int, sq: int, skv: int) -> np.ndarray:
    """[Sq, Skv] bool: the masking rule (docs/hipdnn-format.md 3.10) written out with index arithmetic."""
    lq = sq if m.seq_len_q is None else min(m.seq_len_q[b], sq)
    lkv = skv if m.seq_len_kv is None else min(m.seq_len_kv[b], skv)
    i, j = np.arange(sq)[:, None], np.arange(skv)[None, :]
    off = lkv - lq if m.bottom_right else 0
    ok = (i < lq) & (j < lkv)
    right = m.right_bound if m.right_bound is not None else (0 if m.causal else None)
    if right is not None:
        ok &= j - i - off <= right
    if m.left_bound is not None:
        ok &= i + off - j < m.left_bound
    return ok


def _dense(q, k, v, scale, m, bias=None, allow=None, sink=None):
    """(o, stats, p, p_sink) from the whole score matrix."""
    b_, hq, sq, _ = q.shape
    g, skv = hq // k.shape[1], k.shape[2]
    kk, vv = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = scale * q @ kk.swapaxes(-1, -2) + (0.0 if bias is None else bias)
    keep = np.stack([_allowed(m, b, sq, skv) for b in range(b_)])[:, None]
    if allow is not None:
        keep = keep & (allow != 0)
    s = np.where(keep, s, -np.inf)
    mx = s.max(axis=-1)
    if sink is not None:
        mx = np.maximum(mx, sink[None, :, None])
    safe = np.where(np.isfinite(mx), mx, 0.0)
    e = np.exp(s - safe[..., None])
    total = e.sum(axis=-1) + (0.0 if sink is None else np.exp(sink[None, :, None] - safe))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(total[..., None] > 0, e / total[..., None], 0.0)
        p_sink = None if sink is None else np.where(total > 0, np.exp(sink[None, :, None] - safe) / total, 0.0)
        stats = np.where(total > 0, safe + np.log(total), -np.inf)
    return p @ vv, stats, p, p_sink


def _dense_backward(q, k, v, do, scale, m, bias=None, sink=None):
    o, _, p, p_sink = _dense(q, k, v, scale, m, bias=bias, sink=sink)
    g = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    delta = (do * o).sum(axis=-1)
    ds = p * (do @ vv.swapaxes(-1, -2) - delta[..., None])

    def per_kv_head(a):
        return a.reshape(a.shape[0], -1, g, *a.shape[2:]).sum(axis=2)

    out = {"dq": scale * ds @ kk, "dk": per_kv_head(scale * ds.swapaxes(-1, -2) @ q),
           "dv": per_kv_head(p.swapaxes(-1, -2) @ do)}
    if bias is not None:
        out["dbias"] = ds.sum(axis=tuple(i for i, n in enumerate(bias.shape) if n == 1), keepdims=True)
    if sink is not None:
        out["dsink"] = -(p_sink * delta).sum(axis=(0, 2))
    return out


def _qkv(b=2, hq=4, hkv=2, sq=9, skv=11, d=3, dv=5):
    return (RNG.standard_normal((b, hq, sq, d)), RNG.standard_normal((b, hkv, skv, d)),
            RNG.standard_normal((b, hkv, skv, dv)))


CASES = {
    "gqa": ({}, {}),
    "causal": ({"causal": True}, {}),
    "causal_bottom_right": ({"causal": True, "bottom_right": True}, {}),
    "sliding_window": ({"causal": True, "left_bound": 4}, {}),
    "window_both_sides": ({"left_bound": 3, "right_bound": 2}, {}),
    "varlen": ({"causal": True, "bottom_right": True, "seq_len_q": (9, 5), "seq_len_kv": (11, 6)}, {}),
    "sinks": ({"causal": True}, {"sink": True}),
    "additive_mask": ({}, {"bias": (2, 1, 9, 11)}),
    "boolean_mask": ({"causal": True}, {"allow": (2, 4, 9, 11)}),
}


def _extras(spec: dict) -> dict:
    out = {}
    if "sink" in spec:
        out["sink"] = RNG.standard_normal(4)
    if "bias" in spec:
        out["bias"] = RNG.standard_normal(spec["bias"])
    if "allow" in spec:
        out["allow"] = RNG.random(spec["allow"]) < 0.7
    return out


@pytest.mark.parametrize("budget", BUDGETS, ids=["1head1row", "1head3rows", "2heads2rows"])
@pytest.mark.parametrize("case", list(CASES))
def test_tiled_forward_equals_the_whole_score_matrix(case: str, budget: int) -> None:
    masking, spec = CASES[case]
    m, extra = Masking(**masking), _extras(spec)
    q, k, v = _qkv()
    got = sdpa_forward(q, k, v, scale=0.45, masking=m, budget=budget, **extra)
    o, stats, _, _ = _dense(q, k, v, 0.45, m, **extra)
    np.testing.assert_allclose(got["o"], o, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(got["stats"][..., 0], stats, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("budget", BUDGETS, ids=["1head1row", "1head3rows", "2heads2rows"])
@pytest.mark.parametrize("case", ["gqa", "causal", "sliding_window", "varlen", "sinks", "additive_mask"])
def test_tiled_backward_equals_the_dense_formulas(case: str, budget: int) -> None:
    masking, spec = CASES[case]
    m, extra = Masking(**masking), _extras(spec)
    q, k, v = _qkv()
    do = RNG.standard_normal((2, 4, 9, 5))
    bias_shape = extra["bias"].shape if "bias" in extra else None
    got = sdpa_backward(q, k, v, do, scale=0.45, masking=m, budget=budget, bias_shape=bias_shape, **extra)
    want = _dense_backward(q, k, v, do, 0.45, m, bias=extra.get("bias"), sink=extra.get("sink"))
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-11, atol=1e-12, err_msg=name)


def _paged(dense: np.ndarray, page: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``dense`` [B, H, S, D] scattered into a shuffled page container, with its table."""
    b_, h, s, d = dense.shape
    per_seq = -(-s // page)
    table = rng.permutation(b_ * per_seq + 3)[: b_ * per_seq].reshape(b_, per_seq)
    container = rng.standard_normal((b_ * per_seq + 3, h, page, d))   # unused pages hold noise
    for b in range(b_):
        for p in range(per_seq):
            chunk = dense[b, :, p * page:(p + 1) * page]
            container[table[b, p], :, :chunk.shape[1]] = chunk
    return container, table


@pytest.mark.parametrize("budget", BUDGETS, ids=["1head1row", "1head3rows", "2heads2rows"])
@pytest.mark.parametrize("masking", [{}, {"causal": True}, {"causal": True, "left_bound": 4},
                                     {"causal": True, "bottom_right": True, "seq_len_q": (9, 4),
                                      "seq_len_kv": (11, 7)}], ids=["dense", "causal", "window", "varlen"])
def test_paged_keys_gathered_per_tile_equal_the_dense_cache(masking: dict, budget: int) -> None:
    q, k, v = _qkv()
    kc, kt = _paged(k, 4, RNG)
    vc, vt = _paged(v, 4, RNG)
    m = Masking(**masking)
    got = sdpa_forward(q, PagedKV.of(kc, kt, 11), PagedKV.of(vc, vt, 11), scale=0.3, masking=m, budget=budget)
    o, stats, _, _ = _dense(q, k, v, 0.3, m)
    np.testing.assert_allclose(got["o"], o, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(got["stats"][..., 0], stats, rtol=1e-12, atol=1e-13)


def test_inputs_in_their_stored_type_are_converted_per_tile() -> None:
    """bfloat16 inputs (as the executor holds them) give the float64 result of their float64 values."""
    import ml_dtypes

    q, k, v = (a.astype(ml_dtypes.bfloat16) for a in _qkv())
    m = Masking(causal=True)
    got = sdpa_forward(q, k, v, scale=0.5, masking=m, budget=1)
    o, _, _, _ = _dense(*(a.astype(np.float64) for a in (q, k, v)), 0.5, m)
    np.testing.assert_allclose(got["o"], o, rtol=1e-12, atol=1e-13)


def test_torch_namespace_tiles_equal_numpy() -> None:
    """The ops stay namespace-generic: torch CPU tensors through the same tiles give numpy's values."""
    torch = pytest.importorskip("torch")
    q, k, v = _qkv()
    do = RNG.standard_normal((2, 4, 9, 5))
    m = Masking(causal=True, left_bound=5)
    t = [torch.from_numpy(a) for a in (q, k, v, do)]
    f = sdpa_forward(*t[:3], scale=0.4, masking=m, budget=1)
    g = sdpa_backward(*t, scale=0.4, masking=m, budget=8 * 11 * 3)
    np.testing.assert_allclose(f["o"].numpy(), _dense(q, k, v, 0.4, m)[0], rtol=1e-12, atol=1e-13)
    want = _dense_backward(q, k, v, do, 0.4, m)
    for name in ("dq", "dk", "dv"):
        np.testing.assert_allclose(g[name].numpy(), want[name], rtol=1e-11, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("group,skv,budget,expected", [
    (4, 1000, 8 * 4 * 1000 * 16, (4, 16)),       # the whole group, 16 rows
    (4, 1000, 8 * 1000 * 2, (2, 1)),             # two heads of one row: the group is split
    (8, 10**6, 64 << 20, (8, 1)),                # 64 MiB holds eight rows of a million keys
    (128, 10**6, 64 << 20, (8, 1)),              # MQA with 128 heads: eight heads a tile
    (4, 10**9, 64 << 20, (1, 1)),                # never less than one head and one row
])
def test_tile_shape_keeps_the_scores_within_the_budget(group: int, skv: int, budget: int,
                                                       expected: tuple[int, int]) -> None:
    heads, rows = tile_shape(group, skv, budget)
    assert (heads, rows) == expected
    assert heads * rows * skv * 8 <= budget or (heads, rows) == (1, 1)


def _spanning_budget(g: int, sq: int, skv: int, kv_heads: int, m: Masking) -> int:
    """A budget whose tiles hold exactly ``kv_heads`` kv heads' whole groups and all ``sq`` rows."""
    return 8 * kv_heads * g * sq * visible_keys(m, sq, skv)


@pytest.mark.parametrize("sq", [1, 4])
@pytest.mark.parametrize("case", ["gqa", "causal_bottom_right", "sliding_window", "varlen", "sinks", "additive_mask",
                                  "boolean_mask"])
def test_tiles_over_several_kv_heads_equal_the_whole_score_matrix(case: str, sq: int) -> None:
    """Tiles of two kv heads' groups side by side, the last with one (3 kv heads): every query head
    still reads its own kv head's keys and values."""
    masking, spec = CASES[case]
    masking = {**masking, **({"seq_len_q": (sq, max(1, sq - 2))} if "seq_len_q" in masking else {})}
    q, k, v = _qkv(hq=6, hkv=3, sq=sq)
    extra = _extras({**spec, **({"bias": (2, 1, sq, 11)} if "bias" in spec else {}),
                     **({"allow": (2, 6, sq, 11)} if "allow" in spec else {})})
    if "sink" in extra:
        extra["sink"] = RNG.standard_normal(6)
    m = Masking(**masking)
    budget = _spanning_budget(2, sq, 11, 2, m)
    assert tile_plan(2, 3, sq, 11, m, budget).kv_heads == 2
    got = sdpa_forward(q, k, v, scale=0.45, masking=m, budget=budget, **extra)
    o, stats, _, _ = _dense(q, k, v, 0.45, m, bias=extra.get("bias"), allow=extra.get("allow"),
                            sink=extra.get("sink"))
    np.testing.assert_allclose(got["o"], o, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(got["stats"][..., 0], stats, rtol=1e-12, atol=1e-13)


def test_paged_tiles_over_several_kv_heads_equal_the_dense_cache() -> None:
    q, k, v = _qkv(hq=6, hkv=3, sq=1)
    kc, kt = _paged(k, 4, RNG)
    vc, vt = _paged(v, 4, RNG)
    m = Masking(causal=True, bottom_right=True, seq_len_kv=(11, 6))
    budget = _spanning_budget(2, 1, 11, 3, m)
    assert tile_plan(2, 3, 1, 11, m, budget).kv_heads == 3
    got = sdpa_forward(q, PagedKV.of(kc, kt, 11), PagedKV.of(vc, vt, 11), scale=0.3, masking=m, budget=budget)
    o, stats, _, _ = _dense(q, k, v, 0.3, m)
    np.testing.assert_allclose(got["o"], o, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(got["stats"][..., 0], stats, rtol=1e-12, atol=1e-13)


def test_a_decode_step_is_one_tile_per_batch_entry() -> None:
    """llama3-8B decode (32 query heads on 8 kv heads, one query row, 4096 keys): one tile of every kv
    head, not eight; a prefill's tiles stay those of tile_shape (its rows already fill the budget)."""
    assert tile_plan(4, 8, 1, 4096) == TilePlan(8, 4, 1)
    heads, rows = tile_shape(4, 4096)
    assert tile_plan(4, 8, 4096, 4096, Masking(causal=True)) == TilePlan(1, heads, rows)


def test_a_sliding_window_tile_takes_the_rows_its_keys_allow() -> None:
    """gpt-oss (64 query heads on 8 kv heads, a 128-key window, 4096 tokens): a tile's rows see at most
    rows + 127 keys, so a tile holds more rows than tile_shape's (which counts all 4096 keys)."""
    m = Masking(causal=True, left_bound=128)
    plan = tile_plan(8, 8, 4096, 4096, m)
    old_heads, old_rows = tile_shape(8, 4096)
    assert plan.count(8, 8, 4096) < TilePlan(1, old_heads, old_rows).count(8, 8, 4096)
    assert 8 * plan.kv_heads * plan.heads * plan.rows * visible_keys(m, plan.rows, 4096) <= 64 << 20


@pytest.mark.parametrize("group,hkv,q_len,kv_len", [(4, 8, 1, 4096), (1, 128, 4096, 4096), (8, 8, 4096, 4096),
                                                     (2, 3, 9, 11), (16, 1, 7, 10**6), (4, 2, 0, 5)])
@pytest.mark.parametrize("masking", [Masking(), Masking(causal=True), Masking(causal=True, left_bound=128),
                                     Masking(left_bound=3, right_bound=2)], ids=["full", "causal", "window", "both"])
@pytest.mark.parametrize("budget", [1, 8 * 11 * 3, 1 << 20, 64 << 20])
def test_every_tile_plan_keeps_its_scores_within_the_budget(group: int, hkv: int, q_len: int, kv_len: int,
                                                            masking: Masking, budget: int) -> None:
    """Scores of one tile (its kv heads' query heads x rows x the keys those rows can see) fit the budget,
    unless even one head and one row does not; and a plan never makes more tiles than tile_shape's."""
    plan = tile_plan(group, hkv, q_len, kv_len, masking, budget)
    rows = min(plan.rows, max(q_len, 1))
    scores = 8 * plan.kv_heads * plan.heads * rows * visible_keys(masking, rows, kv_len)
    assert scores <= budget or (plan.kv_heads, plan.heads, plan.rows) == (1, 1, 1)
    heads, old_rows = tile_shape(group, kv_len, budget)
    assert plan.count(group, hkv, q_len) <= TilePlan(1, heads, old_rows).count(group, hkv, q_len)
    assert tile_plan(group, hkv, q_len, kv_len, masking, budget, span=False).kv_heads == 1

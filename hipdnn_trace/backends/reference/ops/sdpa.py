"""Scaled dot-product attention, forward and backward, in float64, blockwise.

``O = softmax(scale * Q K^T + bias, masked) V`` per batch and query head, with GQA/MQA
(query head ``h`` reads key/value head ``h // (Hq / Hkv)``), d_qk != d_v (MLA),
additive or boolean masks broadcast to ``[B, Hq, Sq, Skv]``, causal masks with either
diagonal alignment, sliding windows, per-sequence lengths (padded varlen), per-head
sink logits that join the softmax's denominator, and the softmax statistics
(``stats`` = natural-log sum-exp of the masked scaled scores, ``max``, ``sum_exp``).
docs/hipdnn-format.md section 3.10 gives the sources for each rule.

Memory: nothing sequence-sized is made beyond the inputs and the outputs. The work is cut into
tiles of (batch entry, key/value head, a chunk of its query group's heads, a block of query
rows) so one tile's scores, ``heads * rows * Skv`` float64 values, stay under the budget
(:data:`SCORE_BLOCK_BYTES`, 64 MiB, or the ``budget`` argument); a group whose heads do not fit
together is split, down to one head and one row. Each tile reads its slice of q, k, v, dO, O and
the mask in their stored types and converts only that slice to float64, keys and values a chunk
of :func:`key_chunk` keys at a time (so one kv head's keys are never converted whole: 1 GiB at a
million tokens); paged K/V is gathered the same way, only the pages a chunk's keys live in
(:class:`PagedKV`). Keys a tile cannot see (beyond a causal diagonal or outside a window) are
not computed at all. Every tile is the same float64 math on a subset of rows and heads, so
results do not depend on the budget beyond float64 rounding (the sums over keys are per row,
never split across tiles; ``P V`` and ``dS K`` over more keys than one chunk, and the backward's
dk, dv, dsink and dbias sums over query rows and heads, are added chunk by chunk).

The backward pass recomputes the probabilities in float64 from q and k (not from the
rounded stats a GPU kernel reads) and forms ``D = rowsum(dO * O)`` from the O the op
was given, which is how the backward op is defined (see :func:`sdpa_backward`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from hipdnn_trace.backends.reference import xp as shim
from hipdnn_trace.backends.reference.ops._arrays import as_array, f64, shape_of
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.attention import AttentionConfig

__all__ = ["SCORE_BLOCK_BYTES", "Masking", "PagedKV", "TilePlan", "gather_pages", "key_chunk", "masking_of",
           "sdpa_backward", "sdpa_forward", "tile_plan", "tile_shape", "visible_keys"]

#: Upper bound of one tile of float64 scores (and each same-sized temporary): the default budget.
SCORE_BLOCK_BYTES = 64 << 20


@dataclass(frozen=True)
class Masking:
    """Which (query i, key j) pairs of one batch entry take part.

    With ``offset = 0`` (TOP_LEFT) or ``offset = kv_len - q_len`` (BOTTOM_RIGHT), a pair
    is kept when ``j <= i + offset + right`` (causal: right = 0) and
    ``j > i + offset - left`` (a window of ``left`` keys ending at the diagonal), and
    when ``i < q_len`` and ``j < kv_len`` for the sequence's own lengths.
    """

    causal: bool = False
    bottom_right: bool = False
    left_bound: int | None = None
    right_bound: int | None = None
    seq_len_q: tuple[int, ...] | None = None
    seq_len_kv: tuple[int, ...] | None = None

    def lengths(self, b: int, sq: int, skv: int) -> tuple[int, int]:
        """The real (query, key) lengths of batch entry ``b``."""
        q_len = sq if self.seq_len_q is None else min(int(self.seq_len_q[b]), sq)
        kv_len = skv if self.seq_len_kv is None else min(int(self.seq_len_kv[b]), skv)
        return max(q_len, 0), max(kv_len, 0)

    def upper(self) -> int | None:
        """Largest kept ``j - i - offset`` (None: unbounded)."""
        if self.right_bound is not None:
            return int(self.right_bound)
        return 0 if self.causal else None

    def key_range(self, rows: range, q_len: int, kv_len: int) -> tuple[int, int]:
        """Half-open key range any row of ``rows`` can see (a superset, for skipping work)."""
        off = kv_len - q_len if self.bottom_right else 0
        hi = kv_len
        up = self.upper()
        if up is not None:
            hi = min(hi, rows.stop - 1 + off + up + 1)
        lo = 0
        if self.left_bound is not None:
            lo = max(lo, rows.start + off - int(self.left_bound) + 1)
        return max(lo, 0), max(min(hi, kv_len), 0)

    def keep(self, rows: range, cols: range, q_len: int, kv_len: int, xp: object = np,
             device: object = None) -> np.ndarray:
        """Boolean [len(rows), len(cols)]: True where the pair takes part (in namespace ``xp``)."""
        i = xp.reshape(xp.arange(rows.start, rows.stop, device=device), (-1, 1))
        j = xp.reshape(xp.arange(cols.start, cols.stop, device=device), (1, -1))
        off = kv_len - q_len if self.bottom_right else 0
        ok = (i < q_len) & (j < kv_len)
        up = self.upper()
        if up is not None:
            ok &= j <= i + off + up
        if self.left_bound is not None:
            ok &= j > i + off - int(self.left_bound)
        return ok


def masking_of(cfg: AttentionConfig) -> Masking:
    """The masking rule of a graph's attention node (the cost model and the memory estimate walk its tiles)."""
    return Masking(causal=cfg.causal, bottom_right=cfg.bottom_right, left_bound=cfg.left_bound,
                   right_bound=cfg.right_bound)


def gather_pages(container: np.ndarray, table: np.ndarray, seq_len: int) -> np.ndarray:
    """Paged K or V ``[pages, H, page_size, D]`` + table ``[B, pages_per_seq]`` -> ``[B, H, seq_len, D]``
    (whole: the direct definition; the ops read :class:`PagedKV` tile by tile instead)."""
    paged = PagedKV.of(container, table, seq_len)
    xp = shim.namespace(paged.container)
    b, n = paged.table.shape
    flat = xp.take(paged.container, xp.reshape(paged.table, (-1,)), axis=0)   # [B * pages_per_seq, H, page, D]
    _, h, p, d = flat.shape
    gathered = xp.reshape(flat, (b, n, h, p, d))
    return xp.reshape(xp.permute_dims(gathered, (0, 2, 1, 3, 4)), (b, h, n * p, d))[:, :, :seq_len, :]


@dataclass(frozen=True)
class PagedKV:
    """Paged K or V seen as ``[B, H, seq_len, D]`` without gathering it whole: ``container``
    ``[pages, H, page_size, D]``, ``table`` ``[B, pages_per_seq]`` (int64), and :meth:`keys` gathers
    only the pages one tile's keys live in (a gathered float64 copy of the S4096 prefill's K and V
    was 34 GB when the container's pages were the graph's 4096 tokens long)."""

    container: np.ndarray
    table: np.ndarray
    seq_len: int

    @classmethod
    def of(cls, container: np.ndarray, table: np.ndarray, seq_len: int) -> PagedKV:
        """Checked: every entry indexes a page, and a sequence's pages hold ``seq_len`` tokens."""
        container, table = as_array(container), as_array(table)
        xp = shim.namespace(container, table)
        table = xp.astype(xp.reshape(table, (table.shape[0], -1)), xp.int64)
        pages, _, page_size, _ = container.shape
        if table.shape[0] * table.shape[1] and (int(xp.min(table)) < 0 or int(xp.max(table)) >= pages):
            raise UnsupportedError(f"page table entries must index the {pages} pages of the container "
                                   f"(found {int(xp.min(table))}..{int(xp.max(table))})")
        if table.shape[1] * page_size < seq_len:
            raise UnsupportedError(f"{table.shape[1]} pages of {page_size} tokens hold fewer than "
                                   f"max_seq_len_kv = {seq_len}")
        return cls(container, table, int(seq_len))

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (int(self.table.shape[0]), int(self.container.shape[1]), self.seq_len, int(self.container.shape[3]))

    def keys(self, b: int, kv: slice, cs: slice) -> np.ndarray:
        """Tokens ``cs`` of sequence ``b``, kv heads ``kv``: ``[heads, len, D]`` in the container's dtype."""
        xp = shim.namespace(self.container)
        size, d = int(self.container.shape[2]), int(self.container.shape[3])
        first, last = cs.start // size, max(cs.start, cs.stop - 1) // size + 1
        # the pages first, then the heads: a take over container[:, h] copied the whole head's cache
        pages = xp.take(self.container, self.table[b, first:last], axis=0)[:, kv, ...]   # [n, heads, page, D]
        flat = xp.reshape(xp.permute_dims(pages, (1, 0, 2, 3)), (int(pages.shape[1]), -1, d))
        return flat[:, cs.start - first * size: cs.stop - first * size, ...]


def _keys(src: np.ndarray | PagedKV, b: int, kv: slice, cs: slice) -> np.ndarray:
    """One tile's keys (or values) of kv heads ``kv`` in float64, ``[heads, len, D]``: a slice of a dense
    cache, or gathered pages."""
    return f64(src.keys(b, kv, cs) if isinstance(src, PagedKV) else src[b, kv, cs, ...])


def key_chunk(d: int, budget: int | None = None) -> int:
    """Keys converted to float64 at a time: ``key_chunk * d`` float64 values within the budget (65536
    keys of d 128 at 64 MiB; a tile over more keys goes through them in chunks, so a kv head's keys
    are never converted whole at a million tokens). A tile over several kv heads passes ``d`` times
    their number."""
    return max(1, (budget or SCORE_BLOCK_BYTES) // (8 * max(d, 1)))


def _chunks(cs: slice, n: int) -> list[slice]:
    return [slice(a, min(cs.stop, a + n)) for a in range(cs.start, cs.stop, n)]


def _per_kv_head(x: np.ndarray, kv: slice) -> np.ndarray:
    """``[heads, r, n]`` -> ``[kv heads, (heads of each) * r, n]``: a tile's query rows stacked by the kv
    head they read, so one batched product per kv head serves them all (no broadcast copy of the keys)."""
    heads, rows, n = (int(d) for d in x.shape)
    kv_heads = kv.stop - kv.start
    return shim.namespace(x).reshape(x, (kv_heads, heads // kv_heads * rows, n))


def _merged(x: np.ndarray, rows: int) -> np.ndarray:
    """``[kv heads, (heads of each) * rows, n]`` -> ``[heads, rows, n]`` (the inverse of :func:`_per_kv_head`)."""
    kv_heads, stacked, n = (int(d) for d in x.shape)
    return shim.namespace(x).reshape(x, (kv_heads * stacked // rows, rows, n))


def _against_keys(x: np.ndarray, src: np.ndarray | PagedKV, b: int, kv: slice, cs: slice,
                  budget: int | None) -> np.ndarray:
    """``x @ keys^T`` ([heads, r, d] -> [heads, r, c]), each query head against its own kv head's keys,
    converted a chunk at a time: each element is the same dot product over d."""
    xp = shim.namespace(x)
    rows, grouped = int(x.shape[-2]), _per_kv_head(x, kv)          # [kv, heads of each * r, d]
    n = key_chunk(int(x.shape[-1]) * (kv.stop - kv.start), budget)
    if cs.stop - cs.start <= n:
        return _merged(xp.matmul(grouped, xp.matrix_transpose(_keys(src, b, kv, cs))), rows)
    parts = [xp.matmul(grouped, xp.matrix_transpose(_keys(src, b, kv, c))) for c in _chunks(cs, n)]
    return _merged(xp.concat(parts, axis=-1), rows)


def _times_keys(w: np.ndarray, src: np.ndarray | PagedKV, b: int, kv: slice, cs: slice, d: int,
                budget: int | None) -> np.ndarray:
    """``w @ keys`` ([heads, r, c] -> [heads, r, d]), each query head with its own kv head's values,
    summed over key chunks (float64 rounding only)."""
    xp = shim.namespace(w)
    rows, grouped = int(w.shape[-2]), _per_kv_head(w, kv)          # [kv, heads of each * r, c]
    n = key_chunk(d * (kv.stop - kv.start), budget)
    if cs.stop - cs.start <= n:
        return _merged(xp.matmul(grouped, _keys(src, b, kv, cs)), rows)
    out = None
    for c in _chunks(cs, n):
        part = xp.matmul(grouped[..., c.start - cs.start:c.stop - cs.start], _keys(src, b, kv, c))
        out = part if out is None else out + part
    return _merged(out, rows)


def _group(hq: int, hkv: int) -> int:
    if hkv < 1 or hq % hkv:
        raise UnsupportedError(f"{hq} query heads are not a multiple of {hkv} key/value heads")
    return hq // hkv


def tile_shape(group: int, skv: int, budget: int | None = None) -> tuple[int, int]:
    """(heads, rows) of one tile: ``heads * rows * skv`` float64 scores within ``budget`` bytes
    (:data:`SCORE_BLOCK_BYTES` by default); the whole query group when one row of it fits, else
    fewer heads; never less than one head and one row."""
    per_row = 8 * max(skv, 1)
    limit = budget or SCORE_BLOCK_BYTES
    heads = max(1, min(group, limit // per_row))
    return heads, max(1, limit // (per_row * heads))


def visible_keys(masking: Masking, rows: int, kv_len: int) -> int:
    """The most keys a block of ``rows`` query rows can see (:meth:`Masking.key_range`'s width at most):
    every key, or a sliding window's ``rows + left + right - 1``."""
    upper = masking.upper()
    if masking.left_bound is None or upper is None:
        return max(kv_len, 1)
    return max(1, min(kv_len, rows + int(masking.left_bound) + upper - 1))


def _rows_within(limit: int, heads: int, q_len: int, kv_len: int, masking: Masking) -> int:
    """The most query rows, at most ``max(q_len, 1)``, whose scores for ``heads`` heads stay within
    ``limit`` bytes against the keys they can see; 0 when not even one row does."""
    def fits(rows: int) -> bool:
        return 8 * heads * rows * visible_keys(masking, rows, kv_len) <= limit

    if not fits(1):
        return 0
    low, high = 1, max(q_len, 1)
    while low < high:   # the score bytes grow with the rows: the largest that fits
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(mid) else (low, mid - 1)
    return low


@dataclass(frozen=True)
class TilePlan:
    """How one batch entry's attention is cut into tiles: ``kv_heads`` kv heads side by side (each with
    its whole query group), ``heads`` query heads of one group, ``rows`` query rows."""

    kv_heads: int
    heads: int
    rows: int

    def count(self, group: int, hkv: int, q_len: int) -> int:
        """Tiles of one batch entry of ``q_len`` query rows."""
        return -(-hkv // self.kv_heads) * -(-group // self.heads) * -(-q_len // self.rows)


def tile_plan(group: int, hkv: int, q_len: int, kv_len: int, masking: Masking = Masking(),
              budget: int | None = None, span: bool = True) -> TilePlan:
    """The tiles of one batch entry: :func:`tile_shape`'s heads, with as many rows as the scores the rows
    can see allow (a sliding window sees ``rows + left`` keys, not all of them), and with ``span`` (the
    forward) several kv heads' groups side by side when that makes fewer tiles: a decode step's one
    query row per head made a tile per (batch entry, kv head), 128 launches-bound tiles of 4 x 1 x 4096
    scores for llama3-8B at batch 16. Every tile keeps its scores within the budget."""
    return _tile_plan(group, hkv, q_len, kv_len, masking.left_bound, masking.upper(), budget or SCORE_BLOCK_BYTES,
                      span)


@functools.lru_cache(maxsize=1024)
def _tile_plan(group: int, hkv: int, q_len: int, kv_len: int, left: int | None, upper: int | None,
               limit: int, span: bool) -> TilePlan:
    masking = Masking(left_bound=left, right_bound=upper)
    heads, _ = tile_shape(group, visible_keys(masking, 1, kv_len), limit)   # tile_shape's, for one row's keys
    best = TilePlan(1, heads, max(1, _rows_within(limit, heads, q_len, kv_len, masking)))
    if heads < group:            # not one row of the whole group fits: fewer heads, one kv head
        return best
    for kv_heads in range(2, hkv + 1) if span else ():
        rows = _rows_within(limit, kv_heads * group, q_len, kv_len, masking)
        if rows == 0:
            break
        plan = TilePlan(kv_heads, group, rows)
        if plan.count(group, hkv, q_len) < best.count(group, hkv, q_len):
            best = plan
    return best


def _row_blocks(sq: int, rows: int) -> Iterator[range]:
    for start in range(0, sq, rows):
        yield range(start, min(sq, start + rows))


@dataclass(frozen=True)
class _Tile:
    """One row block of some query heads, all reading the kv heads ``kv`` (the whole groups of several
    kv heads, or some heads of one kv head's group), and the keys it can see."""

    b: int
    kv: slice
    heads: slice
    rs: slice
    cs: slice
    keep: np.ndarray          # [rows, cols] bool from the masking rule


def _tiles(b_: int, hkv: int, g: int, sq: int, skv: int, masking: Masking, budget: int | None,
           like: np.ndarray, span: bool) -> Iterator[_Tile]:
    """Every (batch, kv heads, head chunk, row block) of :func:`tile_plan` with its visible key range, as
    both directions walk them; masks are made in ``like``'s namespace and on its device."""
    xp, device = shim.namespace(like), shim.device_of(like)
    for b in range(b_):
        q_len, kv_len = masking.lengths(b, sq, skv)
        plan = tile_plan(g, hkv, q_len, kv_len, masking, budget, span)
        for k0 in range(0, hkv, plan.kv_heads):
            kv = slice(k0, min(hkv, k0 + plan.kv_heads))
            for h0 in range(0, g, plan.heads):
                chunk = slice(k0 * g + h0, (kv.stop - 1) * g + min(g, h0 + plan.heads))
                for rows in _row_blocks(q_len, plan.rows):
                    lo, hi = masking.key_range(rows, q_len, kv_len)
                    cols = range(lo, max(lo, hi))
                    yield _Tile(b, kv, chunk, slice(rows.start, rows.stop), slice(cols.start, cols.stop),
                                masking.keep(rows, cols, q_len, kv_len, xp, device))


def _broadcast4(a: np.ndarray | None, shape: tuple[int, int, int, int], what: str) -> np.ndarray | None:
    if a is None:
        return None
    arr = as_array(a)
    xp = shim.namespace(arr)
    if arr.ndim > 4:
        raise UnsupportedError(f"{what} has rank {arr.ndim}; attention masks have rank <= 4")
    arr = xp.reshape(arr, (1,) * (4 - arr.ndim) + tuple(arr.shape))
    try:
        return xp.broadcast_to(arr, shape)
    except (ValueError, RuntimeError):   # torch says RuntimeError
        raise UnsupportedError(f"{what} {list(arr.shape)} does not broadcast to [B, Hq, Sq, Skv] "
                               f"{list(shape)}") from None


def _sinks(sink: np.ndarray | None, hq: int) -> np.ndarray | None:
    if sink is None:
        return None
    s = f64(sink)
    s = shim.namespace(s).reshape(s, (-1,))
    if s.shape[0] != hq:
        raise UnsupportedError(f"sink_token has {s.shape[0]} values, expected one per query head ({hq})")
    return s


def _softmax_block(products: Callable[[], np.ndarray], scale: float, keep: np.ndarray,
                   bias_blk: np.ndarray | None, allow_blk: np.ndarray | None,
                   sink: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    """(p, max, sum_exp, p_sink, mask) from a tile's raw products q k^T, [heads, r, c], made by calling
    ``products`` here: an array passed in would stay alive (the caller holds it) beside the masked copy."""
    s = products()
    xp = shim.namespace(s)
    s *= scale   # [heads, r, c]
    if bias_blk is not None:
        s += bias_blk
    mask = xp.broadcast_to(keep, tuple(s.shape))
    if allow_blk is not None:
        mask = mask & allow_blk
    s = xp.where(mask, s, -np.inf)
    # the max of no keys is -inf (numpy's initial=-inf; the standard's max refuses an empty axis)
    m = xp.max(s, axis=-1) if s.shape[-1] else xp.full(tuple(s.shape[:-1]), -np.inf, dtype=s.dtype,
                                                         device=shim.device_of(s))   # [G, r]
    if sink is not None:
        m = xp.maximum(m, sink[:, None])
    safe = xp.where(xp.isfinite(m), m, 0.0)
    e = xp.exp(s - safe[..., None])                              # exp(-inf) = 0 where masked
    total = xp.sum(e, axis=-1)
    p_sink = None
    if sink is not None:
        sink_e = xp.exp(sink[:, None] - safe)
        total = total + sink_e
    with shim.quiet(xp):
        p = xp.where(total[..., None] > 0, e / xp.where(total > 0, total, 1.0)[..., None], 0.0)
        if sink is not None:
            p_sink = xp.where(total > 0, sink_e / xp.where(total > 0, total, 1.0), 0.0)
    return p, m, total, p_sink, mask


def _checked_shapes(q: np.ndarray, k: np.ndarray | PagedKV, v: np.ndarray | PagedKV) -> tuple[int, ...]:
    """(B, Hq, Sq, d_qk, Hkv, Skv, d_v, G) after checking that q, k and v agree."""
    b_, hq, sq, dqk = (int(n) for n in q.shape)
    _, hkv, skv, _ = (int(n) for n in k.shape)
    if tuple(k.shape[:3]) != tuple(v.shape[:3]) or k.shape[0] != b_ or k.shape[-1] != dqk:
        raise UnsupportedError(f"attention shapes do not agree: q {list(q.shape)}, k {list(k.shape)}, "
                               f"v {list(v.shape)}")
    return b_, hq, sq, dqk, hkv, skv, int(v.shape[-1]), _group(hq, hkv)


def _masks(bias: np.ndarray | None, allow: np.ndarray | None,
           shape4: tuple[int, int, int, int]) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The additive and boolean masks as broadcast views in their stored types (each tile converts its slice)."""
    return (_broadcast4(None if bias is None else as_array(bias), shape4, "attn_mask"),
            _broadcast4(None if allow is None else as_array(allow), shape4, "attn_mask"))


def _tile_scores(t: _Tile, q: np.ndarray, k: np.ndarray | PagedKV, scale: float, bias4: np.ndarray | None,
                 allow4: np.ndarray | None, sinks: np.ndarray | None,
                 budget: int | None) -> tuple[np.ndarray, ...]:
    """(q rows, p, max, sum_exp, p_sink) of one tile, each slice converted to float64 here."""
    b, heads, rs, cs = t.b, t.heads, t.rs, t.cs
    qb = f64(q[b, heads, rs, ...])
    p, m, total, p_sink, _ = _softmax_block(
        lambda: _against_keys(qb, k, b, t.kv, cs, budget), scale, t.keep,
        None if bias4 is None else f64(bias4[b, heads, rs, cs]),
        None if allow4 is None else allow4[b, heads, rs, cs] != 0, None if sinks is None else sinks[heads])
    return qb, p, m, total, p_sink


def sdpa_forward(
    q: np.ndarray, k: np.ndarray | PagedKV, v: np.ndarray | PagedKV, *, scale: float,
    masking: Masking = Masking(), bias: np.ndarray | None = None, allow: np.ndarray | None = None,
    sink: np.ndarray | None = None, budget: int | None = None,
) -> dict[str, np.ndarray]:
    """Attention forward: ``o`` [B,Hq,Sq,Dv], ``stats`` / ``max`` / ``sum_exp`` [B,Hq,Sq,1].

    ``k`` and ``v`` are dense ``[B, Hkv, Skv, D]`` arrays or :class:`PagedKV`; ``bias`` is added to
    the scaled scores, ``allow`` (boolean) keeps pairs where True; both broadcast to
    [B, Hq, Sq, Skv]. Rows with no kept key (and no sink) give o = 0, max = -inf, sum_exp = 0 and
    stats = -inf. ``budget``: bytes of one tile's float64 scores (default :data:`SCORE_BLOCK_BYTES`).
    """
    q = as_array(q)
    xp, device = shim.namespace(q), shim.device_of(q)
    b_, hq, sq, _, hkv, skv, dv, g = _checked_shapes(q, k, v)
    bias4, allow4 = _masks(bias, allow, (b_, hq, sq, skv))
    sinks = _sinks(sink, hq)
    o = xp.zeros((b_, hq, sq, dv), dtype=xp.float64, device=device)
    row_max = xp.full((b_, hq, sq), -np.inf, dtype=xp.float64, device=device)
    sum_exp = xp.zeros((b_, hq, sq), dtype=xp.float64, device=device)
    for t in _tiles(b_, hkv, g, sq, skv, masking, budget, q, span=True):
        b, heads, rs = t.b, t.heads, t.rs
        _, p, m, total, _ = _tile_scores(t, q, k, scale, bias4, allow4, sinks, budget)
        o[b, heads, rs, ...] = _times_keys(p, v, b, t.kv, t.cs, dv, budget)
        row_max[b, heads, rs] = m
        sum_exp[b, heads, rs] = xp.where(xp.isfinite(m), total, 0.0)
    with shim.quiet(xp):
        stats = xp.where(sum_exp > 0, row_max + xp.log(xp.where(sum_exp > 0, sum_exp, 1.0)), -np.inf)
    return {"o": o, "stats": stats[..., None], "max": row_max[..., None], "sum_exp": sum_exp[..., None]}


def sdpa_backward(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, do: np.ndarray, *, scale: float,
    masking: Masking = Masking(), bias: np.ndarray | None = None, allow: np.ndarray | None = None,
    sink: np.ndarray | None = None, bias_shape: tuple[int, ...] | None = None,
    o: np.ndarray | None = None, budget: int | None = None,
) -> dict[str, np.ndarray]:
    """Gradients of :func:`sdpa_forward` for output gradient ``do``: dq, dk, dv, and
    ``dbias`` (summed down to ``bias_shape``, default the bias's shape) and ``dsink``.

    ``o``, when given, is the forward output the op received: the softmax-gradient term
    ``D = rowsum(dO * O)`` is formed from it, as the backward op is defined (FlashAttention,
    cuDNN) and as a kernel computes it. Without it, O is recomputed exactly. The two differ
    by the rounding of O (a bf16 O moves D by ~2^-9 of sum|dO*O|), which on an H100 put
    1 in 15000 bf16 dq elements outside tolerance until the reference used the given O.
    """
    q, k, v, do = as_array(q), as_array(k), as_array(v), as_array(do)
    xp, device = shim.namespace(q, k, v, do), shim.device_of(q)
    b_, hq, sq, d_qk, hkv, skv, d_v, g = _checked_shapes(q, k, v)
    shape4 = (b_, hq, sq, skv)
    bias4, allow4 = _masks(bias, allow, shape4)
    sinks = _sinks(sink, hq)
    want_dbias = bias is not None or bias_shape is not None
    dbias_shape = tuple(bias_shape) if bias_shape is not None else (shape_of(bias) if bias is not None else ())
    dbias_full = _reduced_accumulator(dbias_shape, shape4, q) if want_dbias else None
    dq, dk, dv = (xp.zeros(tuple(a.shape), dtype=xp.float64, device=device) for a in (q, k, v))
    dsink = xp.zeros(hq, dtype=xp.float64, device=device)
    for t in _tiles(b_, hkv, g, sq, skv, masking, budget, q, span=False):   # one kv head a tile
        b, kv, heads, rs, cs = t.b, t.kv, t.heads, t.rs, t.cs
        hk = kv.start
        qb, p, _, _, p_sink = _tile_scores(t, q, k, scale, bias4, allow4, sinks, budget)
        dob = f64(do[b, heads, rs, ...])
        o_rows = _times_keys(p, v, b, kv, cs, d_v, budget) if o is None else f64(o[b, heads, rs, ...])
        delta = xp.sum(dob * o_rows, axis=-1)                                     # [heads, r]
        ds = p * (_against_keys(dob, v, b, kv, cs, budget) - delta[..., None])     # d(score incl. bias)
        dv[b, hk, cs, ...] += shim.contract_leading(xp, p, dob)
        dq[b, heads, rs, ...] += scale * _times_keys(ds, k, b, kv, cs, d_qk, budget)
        dk[b, hk, cs, ...] += scale * shim.contract_leading(xp, ds, qb)
        if p_sink is not None:
            dsink[heads] -= xp.sum(p_sink * delta, axis=-1)
        if dbias_full is not None:
            _accumulate_bias(dbias_full, ds, b, heads, rs, cs)
    out = {"dq": dq, "dk": dk, "dv": dv, "dsink": dsink}
    if dbias_full is not None:
        out["dbias"] = xp.reshape(dbias_full, dbias_shape)
    return out


def _reduced_accumulator(shape: tuple[int, ...], full: tuple[int, int, int, int], like: np.ndarray) -> np.ndarray:
    """A rank-4 zero array of ``shape`` padded with leading 1s (a broadcast of it fills ``full``),
    in ``like``'s namespace and on its device."""
    shape4 = (1,) * (4 - len(shape)) + tuple(shape)
    if any(s not in (1, f) for s, f in zip(shape4, full)):
        raise UnsupportedError(f"dbias {list(shape)} does not broadcast to [B, Hq, Sq, Skv] {list(full)}")
    xp = shim.namespace(like)
    return xp.zeros(shape4, dtype=xp.float64, device=shim.device_of(like))


def _accumulate_bias(acc: np.ndarray, ds: np.ndarray, b: int, heads: slice, rs: slice, cs: slice) -> None:
    """Add one block's score gradient into the (possibly broadcast) bias gradient."""
    xp = shim.namespace(ds)
    block = ds                                                    # [G, r, c]
    if acc.shape[2] == 1:
        block = xp.sum(block, axis=1, keepdims=True)
        rs = slice(0, 1)
    if acc.shape[3] == 1:
        block = xp.sum(block, axis=2, keepdims=True)
        cs = slice(0, 1)
    if acc.shape[1] == 1:
        block = xp.sum(block, axis=0, keepdims=True)
        heads = slice(0, 1)
    bi = 0 if acc.shape[0] == 1 else b
    acc[bi, heads, rs, cs] += block

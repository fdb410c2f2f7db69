"""Attention in torch: ``F.scaled_dot_product_attention`` where it can say the graph.

What maps to what (the rules themselves live in ``graph/attention.py``):

* GQA/MQA: ``enable_gqa=True`` (kv head ``h // g`` serves query head ``h``, as hipDNN);
* causal TOP_LEFT with nothing else: ``is_causal=True``; every other mask (bottom-right
  diagonal, windows, per-sequence lengths, hipDNN's attn_mask) becomes one explicit
  mask, boolean (keep = True) or additive, so torch picks a kernel that takes masks;
* paged K/V: gathered through the page tables into dense ``[B, Hkv, S, D]`` first (torch
  has no paged SDPA: the gather is part of the timed work, as for a torch user);
* rows a sequence does not have (past ``seq_len_q``) and rows with no kept key are 0;
* ragged tensors (``ragged_offset_tensor_uid``, hipDNN RFC 0014): each sequence computed alone at the
  lengths its offset tensors give (a varlen loop), forward and backward;
* sinks, or the softmax statistics as outputs (stats / max / sum_exp): torch's SDPA
  returns neither, so those graphs run as an explicit float32 composite
  (scores, masked softmax with the sink in the denominator, P V);
* on the CPU every forward runs that composite, in tiles of at most ``CPU_SCORE_TILE_BYTES`` of
  scores (batch entry, query heads, query rows), so the ``[B, Hq, Sq, Skv]`` matrix is never whole;
* the backward pass: autograd through the same forward (torch cannot take hipDNN's
  O and stats), so a backward row times forward recompute + backward.

``--torch-sdpa-backend flash|efficient|math|cudnn`` pins torch's kernel choice
(``torch.nn.attention.sdpa_kernel``); ``default`` lets torch choose.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import torch
import torch.nn.functional as F

from hipdnn_trace.backends.torch_ops._common import Ctx, OpFn, Values
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph import attention
from hipdnn_trace.graph.model import Graph, Node

#: --torch-sdpa-backend choices -> torch.nn.attention.SDPBackend member names.
SDPA_BACKENDS = {"default": None, "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
                 "math": "MATH", "cudnn": "CUDNN_ATTENTION"}


def attention_refusal(node: Node, graph: Graph) -> str | None:
    """Why torch cannot run this attention node (what the reference does not model), or None."""
    return attention.unmodelled(attention.config(node, graph), node)


def _kernel_choice(ctx: Ctx) -> Any:
    name = SDPA_BACKENDS.get(getattr(ctx, "sdpa_backend", "default") or "default")
    if name is None:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, name)])


def _gather(container: torch.Tensor, table: torch.Tensor, seq: int) -> torch.Tensor:
    """[pages, H, page, D] + table [B, ...pages_per_seq...] -> [B, H, seq, D]."""
    idx = table.reshape(table.shape[0], -1).long()
    g = container[idx]                                    # [B, n, H, page, D]
    b, n, h, p, d = g.shape
    return g.permute(0, 2, 1, 3, 4).reshape(b, h, n * p, d)[:, :, :seq]


def _lengths(x: Values, port: str, batch: int, full: int, device: torch.device) -> torch.Tensor:
    t = x.get(port)
    if t is None:
        return torch.full((batch,), full, device=device, dtype=torch.long)
    return t.reshape(-1)[:batch].long().clamp(0, full)


def _keep_mask(cfg: attention.AttentionConfig, x: Values, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(keep [B, 1, Sq, Skv] bool from diagonal, window and lengths; valid rows [B, 1, Sq, 1])."""
    lq = _lengths(x, "seq_len_q", cfg.batch, cfg.seq_q, device)
    lkv = _lengths(x, "seq_len_kv", cfg.batch, cfg.seq_kv, device)
    i = torch.arange(cfg.seq_q, device=device).view(1, -1, 1)
    j = torch.arange(cfg.seq_kv, device=device).view(1, 1, -1)
    off = (lkv - lq).view(-1, 1, 1) if cfg.bottom_right else torch.zeros((cfg.batch, 1, 1), device=device,
                                                                           dtype=torch.long)
    keep = (i < lq.view(-1, 1, 1)) & (j < lkv.view(-1, 1, 1))
    if cfg.right_bound is not None:
        keep = keep & (j <= i + off + cfg.right_bound)
    if cfg.left_bound is not None:
        keep = keep & (j > i + off - cfg.left_bound)
    rows = (i < lq.view(-1, 1, 1)).unsqueeze(1)
    return keep.unsqueeze(1), rows.reshape(cfg.batch, 1, cfg.seq_q, 1)


def _plain_causal(cfg: attention.AttentionConfig) -> bool:
    """Only a top-left causal diagonal: torch's is_causal says exactly that."""
    return (cfg.causal and not cfg.bottom_right and cfg.right_bound == 0 and cfg.left_bound is None
            and not cfg.padded and cfg.mask_kind is None)


def _needs_mask(cfg: attention.AttentionConfig) -> bool:
    return cfg.right_bound is not None or cfg.left_bound is not None or cfg.padded


def _scale(cfg: attention.AttentionConfig, node: Node, ctx: Ctx) -> float:
    return cfg.scale if cfg.scale is not None else ctx.scalar(node, "scale")


def _keys_values(cfg: attention.AttentionConfig, x: Values) -> tuple[torch.Tensor, torch.Tensor]:
    k, v = x["k"], x["v"]
    assert k is not None and v is not None
    if cfg.paged:
        k = _gather(k, x["page_table_k"], cfg.seq_kv)   # type: ignore[arg-type]
        v = _gather(v, x["page_table_v"], cfg.seq_kv)   # type: ignore[arg-type]
    return k, v


def _forward(cfg: attention.AttentionConfig, node: Node, x: Values, ctx: Ctx, q: torch.Tensor,
             k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None,
             sink: torch.Tensor | None, composite: bool) -> dict[str, torch.Tensor]:
    scale = _scale(cfg, node, ctx)
    keep = rows = None
    if _needs_mask(cfg) and not _plain_causal(cfg):
        keep, rows = _keep_mask(cfg, x, q.device)
    mask = x.get("attn_mask")
    if cfg.mask_kind == "boolean" and mask is not None:
        keep = mask.bool() if keep is None else keep & mask.bool()
    if composite or ctx.cpu:
        return _composite(cfg, q, k, v, scale, keep, bias, sink, rows, cpu=ctx.cpu)
    attn_mask: torch.Tensor | None = keep
    if bias is not None:
        add = bias.to(q.dtype)
        attn_mask = add if keep is None else torch.where(keep, add, torch.full((), float("-inf"), dtype=add.dtype,
                                                                                device=add.device))
    with _kernel_choice(ctx):
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale,
                                           is_causal=_plain_causal(cfg), enable_gqa=cfg.group > 1)
    if keep is not None:   # rows with no key give NaN in some kernels; hipDNN's reference gives 0
        o = torch.where(keep.any(dim=-1, keepdim=True), o, torch.zeros((), dtype=o.dtype, device=o.device))
    return {"o": o}


def _composite(cfg: attention.AttentionConfig, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               scale: float, keep: torch.Tensor | None, bias: torch.Tensor | None,
               sink: torch.Tensor | None, rows: torch.Tensor | None, *, cpu: bool = False) -> dict[str, torch.Tensor]:
    """Attention in float32 torch ops: the path for sinks and softmax statistics (and the CPU).
    On the CPU it walks tiles (:func:`score_tiles`), so the whole ``[B, Hq, Sq, Skv]`` score
    matrix is never made: dnn-benchmarking's B 4, H 48, S 4096 graph needs 13 GB per copy of it."""
    if not cpu:
        kf, vf = k.float(), v.float()
        if cfg.group > 1:
            kf, vf = kf.repeat_interleave(cfg.group, dim=1), vf.repeat_interleave(cfg.group, dim=1)
        return _composite_tile(cfg, q.float(), kf, vf, scale, keep, bias, sink, 0)
    batch, heads, sq, _ = q.shape
    group = heads // k.shape[1]
    sinks = None if sink is None else sink.reshape(-1)
    done: dict[int, dict[int, list[dict[str, torch.Tensor]]]] = {}
    for b, hs, rs in score_tiles(batch, heads, sq, k.shape[2], CPU_SCORE_TILE_BYTES):
        part = _composite_tile(cfg, q[b, hs, rs].float().unsqueeze(0), _kv_heads(k, b, hs, group),
                               _kv_heads(v, b, hs, group), scale, _part(keep, b, hs, rs),
                               _part(bias, b, hs, rs), None if sinks is None else sinks[hs], rs.start)
        done.setdefault(b, {}).setdefault(hs.start, []).append(part)
    # joined, not written into a preallocated tensor: torch's tracer (torch_script.py) follows cat
    return {port: torch.cat([torch.cat([torch.cat([t[port] for t in rows], dim=2) for rows in chunks.values()],
                                       dim=1) for chunks in done.values()], dim=0)
            for port in ("o", "stats", "max", "sum_exp")}


#: The CPU composite's budget: one tile's float32 scores stay within this many bytes (a few
#: temporaries of that size live at once), whatever the graph's size.
CPU_SCORE_TILE_BYTES = 64 * 2**20


def score_tiles(batch: int, heads: int, sq: int, skv: int, budget: int) -> Iterator[tuple[int, slice, slice]]:
    """(batch entry, query heads, query rows) of every tile: ``heads * rows * skv`` float32 scores
    within ``budget`` bytes, all heads of a row when one row of them fits, never less than one head
    and one row (the reference's rule, ``ops/sdpa.py`` ``tile_shape``, in float32)."""
    per_row = 4 * max(skv, 1)
    hh = max(1, min(heads, budget // per_row))
    rr = max(1, budget // (per_row * hh))
    for b in range(batch):
        for h0 in range(0, heads, hh):
            for r0 in range(0, sq, rr):
                yield b, slice(h0, min(heads, h0 + hh)), slice(r0, min(sq, r0 + rr))


def _kv_heads(t: torch.Tensor, b: int, hs: slice, group: int) -> torch.Tensor:
    """K or V of batch entry ``b`` as float32, one kv head per query head of ``hs`` (GQA: kv head
    ``h // group``); slices only, so torch's tracer (``torch_script.py``) can follow it."""
    first, last = hs.start // group, (hs.stop - 1) // group + 1
    own = t[b, first:last].float().repeat_interleave(group, dim=0)
    return own[hs.start - first * group:hs.stop - first * group].unsqueeze(0)


def _part(t: torch.Tensor | None, b: int, hs: slice, rs: slice) -> torch.Tensor | None:
    """A mask's or bias's share of one tile, its rank made 4 and its size-1 dims kept (broadcast)."""
    if t is None:
        return None
    t = t.reshape((1,) * (4 - t.dim()) + tuple(t.shape))
    pick = [slice(b, b + 1), hs, rs]
    return t[tuple(s if t.shape[i] > 1 else slice(None) for i, s in enumerate(pick))]


def _composite_tile(cfg: attention.AttentionConfig, qf: torch.Tensor, kf: torch.Tensor, vf: torch.Tensor,
                    scale: float, keep: torch.Tensor | None, bias: torch.Tensor | None,
                    sink: torch.Tensor | None, row0: int) -> dict[str, torch.Tensor]:
    """One tile (or the whole problem): float32 q rows ``row0..``, k and v one kv head per q head."""
    s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    if bias is not None:
        s = s + bias.float()
    if keep is None and _plain_causal(cfg):
        i = torch.arange(row0, row0 + qf.shape[2], device=qf.device).view(-1, 1)
        j = torch.arange(kf.shape[2], device=qf.device).view(1, -1)
        keep = (j <= i).view(1, 1, qf.shape[2], kf.shape[2])
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    m, e, total, stats = _softmax_parts(s, sink)
    p = e / torch.where(total > 0, total, torch.ones_like(total))
    o = torch.matmul(p, vf)
    return {"o": o, "stats": stats, "max": m, "sum_exp": total}


def _softmax_parts(s: torch.Tensor, sink: torch.Tensor | None
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(row max, exp(s - max), row sum incl. the sink, log-sum-exp stats; -inf for rows with no key)."""
    m = s.amax(dim=-1, keepdim=True)
    if sink is not None:
        m = torch.maximum(m, sink.float().reshape(1, -1, 1, 1))
    safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(s - safe)
    total = e.sum(dim=-1, keepdim=True)
    if sink is not None:
        total = total + torch.exp(sink.float().reshape(1, -1, 1, 1) - safe)
    stats = torch.where(total > 0, safe + torch.log(torch.where(total > 0, total, torch.ones_like(total))),
                        torch.full_like(total, float("-inf")))
    return m, e, total, stats


def _needs_composite(cfg: attention.AttentionConfig, node: Node) -> bool:
    return cfg.sink or any(node.outputs.get(p) is not None for p in ("stats", "max", "sum_exp"))


def _config(node: Node, graph: Graph, ctx: Ctx) -> attention.AttentionConfig:
    """The node's config, parsed once per session (execute runs inside the timed region)."""
    cache = ctx.__dict__.setdefault("_attention_configs", {})
    if node.name not in cache:
        cache[node.name] = attention.config(node, graph)
    return cache[node.name]


def _ragged_forward(cfg: attention.AttentionConfig, node: Node, x: Values, ctx: Ctx, k: torch.Tensor,
                    v: torch.Tensor) -> dict[str, torch.Tensor]:
    """Packed (ragged) query rows: each sequence in its own batch entry, then packed back."""
    q = x["q"]
    assert q is not None
    lens = _lengths(x, "seq_len_q", cfg.sequences, cfg.seq_q_each, q.device).tolist()

    def zeros(shape: tuple[int, ...], dtype: torch.dtype = q.dtype) -> torch.Tensor:
        return torch.zeros(shape, dtype=dtype, device=q.device)

    each = attention.per_sequence(cfg)
    out = _forward(each, node, x, ctx, attention.unpack_rows(cfg, q, lens, zeros), k, v, None,
                   x.get("sink_token"), _needs_composite(cfg, node))
    return {key: attention.pack_rows(cfg, a, lens, lambda shape, a=a: zeros(shape, a.dtype))
            for key, a in out.items()}


def _offset_lengths(node: Node, graph: Graph, x: Values) -> tuple[list[int], list[int]]:
    """Per-sequence (query, key) lengths of a ragged (RFC 0014) node from its bound offset tensors."""
    return attention.seq_lengths(node, graph, {u: x[p] for u, p in attention.length_uids(node, graph).items()
                                               if x.get(p) is not None})


def _each_sequence(cfg: attention.AttentionConfig, x: Values, nq: int, nk: int, b: int, ports: tuple[str, ...]
                   ) -> tuple[attention.AttentionConfig, dict[str, Any]]:
    """One ragged sequence as a batch of one at its own lengths: the slices of ``ports``' tensors."""
    each = replace(cfg, batch=1, seq_q=nq, seq_kv=nk, padded=False, ragged_offsets=())
    xb = {p: t for p, t in x.items() if p not in ("seq_len_q", "seq_len_kv") and "." not in p}
    for port in ports:
        t = xb.get(port)
        if t is not None:
            xb[port] = t[b:b + 1, :, :(nk if port in ("k", "v") else nq)]
    return each, xb


def _per_sequence(cfg: attention.AttentionConfig, lq: list[int], lkv: list[int], run: Any) -> dict[str, torch.Tensor]:
    """``run(b, nq, nk)``'s [1, H, n, D] results placed in rows 0..n-1 of batch entry b (zero elsewhere:
    rows past a sequence's length have no meaning, docs/hipdnn-format.md 3.10)."""
    out: dict[str, torch.Tensor] = {}
    for b, (nq, nk) in enumerate(zip(lq, lkv)):
        if nq == 0 or nk == 0:
            continue
        for key, a in run(b, nq, nk).items():
            rows = cfg.seq_kv if key in ("dk", "dv") else cfg.seq_q
            if key not in out:
                out[key] = torch.zeros((cfg.batch, a.shape[1], rows, a.shape[3]), dtype=a.dtype, device=a.device)
            out[key][b:b + 1, :, :a.shape[2]] = a
    if not out:
        raise UnsupportedError("no ragged sequence has both queries and keys: nothing to compute")
    for key in ("stats", "max"):   # a sequence with queries but no keys: the empty-row contract
        for b in (b for b, (nq, nk) in enumerate(zip(lq, lkv)) if nq and not nk and key in out):
            out[key][b, :, :lq[b]] = float("-inf")
    return out


def _ragged_offsets_forward(cfg: attention.AttentionConfig, node: Node, graph: Graph, x: Values, ctx: Ctx,
                            k: torch.Tensor, v: torch.Tensor) -> dict[str, torch.Tensor]:
    """Ragged (RFC 0014) tensors: each sequence computed alone at its own lengths (a varlen loop)."""
    lq, lkv = _offset_lengths(node, graph, x)
    composite = _needs_composite(cfg, node)

    def run(b: int, nq: int, nk: int) -> dict[str, torch.Tensor]:
        each, xb = _each_sequence(cfg, {**x, "k": k, "v": v}, nq, nk, b, ("q", "k", "v"))
        return _forward(each, node, xb, ctx, xb["q"], xb["k"], xb["v"], None, None, composite)

    return _per_sequence(cfg, lq, lkv, run)


def sdpa(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    cfg = _config(node, graph, ctx)
    k, v = _keys_values(cfg, x)
    bias = x.get("attn_mask") if cfg.mask_kind == "additive" else None
    if cfg.ragged_offsets:
        out = _ragged_offsets_forward(cfg, node, graph, x, ctx, k, v)
    elif cfg.ragged_batch:
        out = _ragged_forward(cfg, node, x, ctx, k, v)
    else:
        out = _forward(cfg, node, x, ctx, x["q"], k, v, bias, x.get("sink_token"),   # type: ignore[arg-type]
                       _needs_composite(cfg, node))
    result = {"o": out["o"].to(ctx.out_dtype(node, "o"))}
    for port in ("stats", "max", "sum_exp"):
        if node.outputs.get(port) is not None:
            if port not in out:
                raise UnsupportedError(f"{node.op} {node.name!r}: output {port} needs the composite path")
            result[port] = out[port].reshape(ctx.out_dims(node, port)).to(ctx.out_dtype(node, port))
    return result


def _composite_backward(cfg: attention.AttentionConfig, node: Node, x: Values, ctx: Ctx
                        ) -> dict[str, torch.Tensor]:
    """The backward of the float32 composite written out, with D = rowsum(dO * O) from the
    O the node was given (the op's definition; autograd would use its own O)."""
    q, k, v = x["q"].float(), x["k"].float(), x["v"].float()        # type: ignore[union-attr]
    do, o = x["do"].float(), x["o"].float()                          # type: ignore[union-attr]
    scale = _scale(cfg, node, ctx)
    keep, _ = _keep_mask(cfg, x, q.device) if _needs_mask(cfg) else (None, None)
    if cfg.mask_kind == "boolean" and x.get("attn_mask") is not None:
        keep = x["attn_mask"].bool() if keep is None else keep & x["attn_mask"].bool()   # type: ignore[union-attr]
    bias = x.get("attn_mask") if cfg.mask_kind == "additive" else None
    sink = x.get("sink_token")
    kr = k.repeat_interleave(cfg.group, dim=1) if cfg.group > 1 else k
    vr = v.repeat_interleave(cfg.group, dim=1) if cfg.group > 1 else v
    s = torch.matmul(q, kr.transpose(-1, -2)) * scale   # the scores once: stats and P both come from them
    if bias is not None:
        s = s + bias.float()
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    stats = _softmax_parts(s, sink)[3]
    p = torch.where(torch.isfinite(stats), torch.exp(s - torch.where(torch.isfinite(stats), stats,
                                                                       torch.zeros_like(stats))),
                    torch.zeros_like(s))
    delta = (do * o).sum(dim=-1, keepdim=True)
    ds = p * (torch.matmul(do, vr.transpose(-1, -2)) - delta)
    dq = scale * torch.matmul(ds, kr)
    dk = scale * torch.matmul(ds.transpose(-1, -2), q)
    dv = torch.matmul(p.transpose(-1, -2), do)
    if cfg.group > 1:
        b_, _, skv, _ = k.shape
        dk = dk.reshape(b_, cfg.heads_kv, cfg.group, skv, -1).sum(dim=2)
        dv = dv.reshape(b_, cfg.heads_kv, cfg.group, skv, -1).sum(dim=2)
    out = {"dq": dq.to(ctx.out_dtype(node, "dq")), "dk": dk.to(ctx.out_dtype(node, "dk")),
           "dv": dv.to(ctx.out_dtype(node, "dv"))}
    if node.outputs.get("dbias") is not None:
        dims = ctx.out_dims(node, "dbias")
        db = ds
        for axis, size in enumerate(dims):
            if size == 1 and db.shape[axis] != 1:
                db = db.sum(dim=axis, keepdim=True)
        out["dbias"] = db.reshape(dims).to(ctx.out_dtype(node, "dbias"))
    if node.outputs.get("dsink_token") is not None and sink is not None:
        p_sink = torch.exp(sink.float().reshape(1, -1, 1, 1) - torch.where(torch.isfinite(stats), stats,
                                                                            torch.zeros_like(stats)))
        dsink = -(p_sink * delta).sum(dim=(0, 2, 3))
        out["dsink_token"] = dsink.reshape(ctx.out_dims(node, "dsink_token")).to(ctx.out_dtype(node, "dsink_token"))
    return out


def sdpa_backward(node: Node, graph: Graph, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    """dq, dk, dv (and dbias, dsink): autograd through torch's SDPA where it can say the
    graph (its kernels use their own O and LSE); the explicit composite backward, which
    reads the given O, for sinks, per-sequence lengths and the CPU."""
    cfg = _config(node, graph, ctx)
    if cfg.ragged_offsets:   # RFC 0014: each sequence alone at its own lengths
        lq, lkv = _offset_lengths(node, graph, x)

        def run(b: int, nq: int, nk: int) -> dict[str, torch.Tensor]:
            each, xb = _each_sequence(cfg, x, nq, nk, b, ("q", "k", "v", "o", "do", "stats"))
            return (_composite_backward if ctx.cpu else _autograd_backward)(each, node, xb, ctx)

        return _per_sequence(cfg, lq, lkv, run)
    if cfg.sink or cfg.padded or ctx.cpu:
        return _composite_backward(cfg, node, x, ctx)
    return _autograd_backward(cfg, node, x, ctx)


def _autograd_backward(cfg: attention.AttentionConfig, node: Node, x: Values, ctx: Ctx) -> dict[str, torch.Tensor]:
    q = x["q"].detach().requires_grad_(True)          # type: ignore[union-attr]
    k = x["k"].detach().requires_grad_(True)          # type: ignore[union-attr]
    v = x["v"].detach().requires_grad_(True)          # type: ignore[union-attr]
    bias = sink = None
    if cfg.mask_kind == "additive" and x.get("attn_mask") is not None:
        bias = x["attn_mask"].detach().float().requires_grad_(node.outputs.get("dbias") is not None)  # type: ignore[union-attr]
    if x.get("sink_token") is not None:
        sink = x["sink_token"].detach().float().requires_grad_(node.outputs.get("dsink_token") is not None)  # type: ignore[union-attr]
    with torch.enable_grad():
        out = _forward(cfg, node, x, ctx, q, k, v, bias, sink, False)["o"]
        grads_of = [q, k, v] + [t for t in (bias, sink) if t is not None and t.requires_grad]
        grads = torch.autograd.grad(out, grads_of, grad_outputs=x["do"].to(out.dtype))  # type: ignore[union-attr]
    result = {"dq": grads[0].to(ctx.out_dtype(node, "dq")), "dk": grads[1].to(ctx.out_dtype(node, "dk")),
              "dv": grads[2].to(ctx.out_dtype(node, "dv"))}
    rest = list(grads[3:])
    if bias is not None and bias.requires_grad:
        result["dbias"] = rest.pop(0).reshape(ctx.out_dims(node, "dbias")).to(ctx.out_dtype(node, "dbias"))
    if sink is not None and sink.requires_grad:
        result["dsink_token"] = rest.pop(0).reshape(ctx.out_dims(node, "dsink_token")).to(
            ctx.out_dtype(node, "dsink_token"))
    return result


def check(node: Node, graph: Graph) -> str | None:
    return attention_refusal(node, graph)

OPS: dict[str, OpFn] = {attention.SDPA: sdpa, attention.SDPA_BACKWARD: sdpa_backward}

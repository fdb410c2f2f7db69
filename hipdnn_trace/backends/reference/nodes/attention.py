"""Attention nodes (SDPA forward and backward) -> ``ops/sdpa.py``: masking, paged keys and values,
per-sequence lengths; features the reference does not model are refused (``graph/attention.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from hipdnn_trace.backends.reference import xp as shim
from hipdnn_trace.backends.reference.nodes._common import Handler, Inputs, Outputs, scalar
from hipdnn_trace.backends.reference.ops.sdpa import Masking, PagedKV, sdpa_backward, sdpa_forward
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph import attention
from hipdnn_trace.graph.model import Graph, Node


def attention_refusal(cfg: attention.AttentionConfig, node: Node) -> str | None:
    """Why the float64 reference does not compute this attention node, or None."""
    return attention.unmodelled(cfg, node)


def attention_masking(cfg: attention.AttentionConfig, lq: list[int], lkv: list[int]) -> Masking:
    """The reference's masking rule for a node's config and per-sequence lengths."""
    return Masking(causal=cfg.causal, bottom_right=cfg.bottom_right, left_bound=cfg.left_bound,
                   right_bound=cfg.right_bound, seq_len_q=tuple(lq) if cfg.padded else None,
                   seq_len_kv=tuple(lkv) if cfg.padded else None)


def _inputs(node: Node, graph: Graph, x: Inputs) -> tuple[attention.AttentionConfig, dict[str, Any]]:
    """The config and the keyword arguments both attention directions share."""
    cfg = attention.config(node, graph)
    reason = attention_refusal(cfg, node)
    if reason:
        raise UnsupportedError(reason)
    lq, lkv = attention.seq_lengths(node, graph, {u: shim.to_numpy(x[p]) for u, p in
                                                  attention.length_uids(node, graph).items() if x.get(p) is not None})
    scale = cfg.scale if cfg.scale is not None else scalar(x["scale"], "attention scale")
    mask = x.get("attn_mask")
    kwargs: dict[str, Any] = {
        "scale": scale,
        "masking": attention_masking(cfg, lq, lkv),
        "bias": mask if cfg.mask_kind == "additive" else None,
        "allow": mask if cfg.mask_kind == "boolean" else None,
        "sink": x.get("sink_token"),
    }
    return cfg, kwargs


def _keys_values(cfg: attention.AttentionConfig, x: Inputs) -> tuple[np.ndarray | PagedKV, np.ndarray | PagedKV]:
    """Dense K and V, or paged ones the op gathers tile by tile (never whole)."""
    if not cfg.paged:
        return x["k"], x["v"]   # type: ignore[return-value]
    return (PagedKV.of(x["k"], x["page_table_k"], cfg.seq_kv),   # type: ignore[arg-type]
            PagedKV.of(x["v"], x["page_table_v"], cfg.seq_kv))   # type: ignore[arg-type]


def _sdpa(node: Node, graph: Graph, x: Inputs) -> Outputs:
    cfg, kwargs = _inputs(node, graph, x)
    k, v = _keys_values(cfg, x)
    if not cfg.ragged_batch:
        return dict(sdpa_forward(x["q"], k, v, **kwargs))
    # packed (ragged) rows: each sequence in its own batch entry, then packed back
    q = x["q"]
    xp, device = shim.namespace(q), shim.device_of(q)
    def zeros(shape: tuple[int, ...]) -> Any:
        return xp.zeros(shape, dtype=xp.float64, device=device)
    lq = list(kwargs["masking"].seq_len_q)
    out = sdpa_forward(attention.unpack_rows(cfg, q, lq, zeros), k, v, **kwargs)
    return {key: attention.pack_rows(cfg, a, lq, zeros) for key, a in out.items()}


def _sdpa_backward(node: Node, graph: Graph, x: Inputs) -> Outputs:
    cfg, kwargs = _inputs(node, graph, x)
    dbias_uid = node.outputs.get("dbias")
    shape = tuple(graph.by_uid[dbias_uid].dims) if isinstance(dbias_uid, int) else None
    out = sdpa_backward(x["q"], x["k"], x["v"], x["do"], bias_shape=shape, o=x.get("o"), **kwargs)
    result: Outputs = {"dq": out["dq"], "dk": out["dk"], "dv": out["dv"]}
    if "dbias" in out:
        result["dbias"] = out["dbias"]
    if node.outputs.get("dsink_token") is not None:
        result["dsink_token"] = out["dsink"]
    return result


def check(node: Node, graph: Graph) -> str | None:
    return attention_refusal(attention.config(node, graph), node)


HANDLERS: dict[str, Handler] = {attention.SDPA: _sdpa, attention.SDPA_BACKWARD: _sdpa_backward}

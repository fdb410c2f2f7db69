"""Attention inputs that mean something: valid metadata and forward results for the backward.

Random integers in [-8, 8] as sequence lengths or page tables would send negative
lengths and out-of-range page indices to a GPU kernel. So, per attention node:

* ``seq_len_q`` / ``seq_len_kv``: lengths in [1, max] (the padded dims or
  max_seq_len_kv), one per batch entry, the first at the maximum so the padded size
  is exercised;
* ``page_table_k`` / ``page_table_v``: each sequence's pages distinct and existing,
  drawn without replacement from the container (shared across sequences only when the
  container has fewer pages than the batch needs in total);
* a ``scale`` tensor: 1/sqrt(d_qk); a boolean ``attn_mask``: mostly True, with
  every row keeping key 0 so no row is empty by chance;
* a backward node's ``o`` and ``stats``: the float64 forward of the generated q, k, v
  (and mask, lengths, sinks), rounded to their types, and never random.

Everything is drawn from the same per-(seed, graph, tensor) streams as other inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from hipdnn_trace.bench import device_arrays
from hipdnn_trace.bench.device_arrays import host_array
from hipdnn_trace.graph import attention, ragged
from hipdnn_trace.graph.model import Graph, Node, Tensor
from hipdnn_trace.graph.opspec import port_tensor

RngFor = Callable[[int], np.random.Generator]
#: Share of pairs a generated boolean attention mask keeps.
BOOLEAN_MASK_KEEP = 0.85


def attention_nodes(graph: Graph) -> list[Node]:
    return [n for n in graph.nodes if n.type in (attention.SDPA, attention.SDPA_BACKWARD)]


def metadata_value(graph: Graph, tensor: Tensor, rng_for: RngFor) -> np.ndarray | None:
    """The value of ``tensor`` when an attention node gives it a meaning, else None."""
    for node in attention_nodes(graph):
        offsets = _ragged_offsets(node, graph, tensor, rng_for)
        if offsets is not None:
            return offsets
        port = next((p for p, u in node.inputs.items() if u == tensor.uid), None)
        if port is None:
            continue
        cfg = attention.config(node, graph)
        rng = rng_for(tensor.uid)
        if port in ("seq_len_q", "seq_len_kv"):
            top = cfg.seq_q_each if port == "seq_len_q" else cfg.seq_kv
            return _lengths(rng, cfg.sequences, top).reshape(tensor.dims).astype(np.float64)
        if port in ("page_table_k", "page_table_v"):
            return _page_table(rng, cfg).reshape(tensor.dims).astype(np.float64)
        if port == "scale":
            return np.full(tensor.dims, 1.0 / math.sqrt(cfg.d_qk))
        if port == "attn_mask" and tensor.data_type == "boolean":
            keep = rng.random(tensor.dims) < BOOLEAN_MASK_KEEP
            keep[..., 0] = True
            return keep.astype(np.float64)
    return None


def ragged_lengths(node: Node, graph: Graph, rng_for: RngFor) -> tuple[list[int], list[int]]:
    """Seeded (query, key) lengths of a node with ragged (RFC 0014) tensors, each in [1, S_max] with the
    first at S_max: the query side's from q's offset tensor's stream, the key side's from k's (one set
    for both when they share an offset tensor). A paged node's key lengths are not ragged (seq_len_kv)."""
    cfg = attention.config(node, graph)
    q, k = port_tensor(node, graph, "q"), port_tensor(node, graph, "k")
    assert q is not None and k is not None and q.ragged_offset_tensor_uid is not None
    if ragged.linked(node, graph):
        both = _lengths(rng_for(q.ragged_offset_tensor_uid), cfg.batch, min(cfg.seq_q, cfg.seq_kv)).tolist()
        return both, both
    lq = _lengths(rng_for(q.ragged_offset_tensor_uid), cfg.batch, cfg.seq_q).tolist()
    if k.ragged_offset_tensor_uid is None:
        return lq, [cfg.seq_kv] * cfg.batch
    return lq, _lengths(rng_for(k.ragged_offset_tensor_uid), cfg.batch, cfg.seq_kv).tolist()


def _ragged_offsets(node: Node, graph: Graph, tensor: Tensor, rng_for: RngFor) -> np.ndarray | None:
    """``tensor``'s contents when it is a ragged offset tensor of ``node``: the seeded lengths packed
    from element 0 (``ragged.offsets_for``, in the units its multiplier says), else None."""
    for port in ragged.ragged_ports(node, graph):
        t = port_tensor(node, graph, port)
        if t is None or t.ragged_offset_tensor_uid != tensor.uid:
            continue
        lq, lkv = ragged_lengths(node, graph, rng_for)
        values = ragged.offsets_for(lq if port in ragged.QUERY_PORTS else lkv, t)
        return np.asarray(values, dtype=np.float64).reshape(tensor.dims)
    return None


def _lengths(rng: np.random.Generator, batch: int, top: int) -> np.ndarray:
    lengths = rng.integers(1, top + 1, size=batch)
    lengths[0] = top
    return lengths


def _page_table(rng: np.random.Generator, cfg: attention.AttentionConfig) -> np.ndarray:
    per_seq, pages, n = cfg.pages_per_seq, cfg.pages, cfg.sequences
    if n * per_seq <= pages:
        return rng.permutation(pages)[: n * per_seq].reshape(n, per_seq)
    if per_seq <= pages:
        return np.stack([rng.permutation(pages)[:per_seq] for _ in range(n)])
    # more page slots than pages: only the slots max_seq_len_kv reaches must be distinct
    used = -(-cfg.seq_kv // cfg.page_size)
    table = np.stack([np.resize(rng.permutation(pages), per_seq) for _ in range(n)])
    if used > pages:
        raise ValueError(f"max_seq_len_kv {cfg.seq_kv} needs {used} distinct pages, the container has {pages}")
    return table


def _lengths_on_host(node: Node, graph: Graph, inputs: Mapping[int, Any]) -> dict[int, np.ndarray]:
    """The node's sequence-length inputs (seq_len_q / seq_len_kv, ragged offset tensors) as host arrays
    (a few integers, even when the inputs live on a device), for :func:`attention.seq_lengths`."""
    return {uid: host_array(inputs[uid], graph.by_uid[uid]) for uid in attention.length_uids(node, graph)
            if uid in inputs}


def forward_results(graph: Graph, inputs: Mapping[int, Any]) -> dict[int, Any]:
    """For each backward node: its ``o`` and ``stats`` inputs from the float64 forward.

    Values are returned rounded to the tensors' types, keyed by uid; ``inputs`` must
    already hold q, k, v, dO and the metadata. When they are torch tensors on a device, the same
    reference op runs on float64 copies there (LLM shapes would take minutes on the host), and its
    results are rounded there (``device_arrays.stored``: ``round_to``'s bits) when torch stores their
    type as a device input, else rounded on the host (host arrays, which ``make_inputs`` uploads).
    """
    from hipdnn_trace.backends.reference.nodes.attention import attention_masking
    from hipdnn_trace.backends.reference.ops import sdpa_forward

    out: dict[int, Any] = {}
    for node in attention_nodes(graph):
        if node.type != attention.SDPA_BACKWARD:
            continue
        wanted = {p: node.inputs.get(p) for p in ("o", "stats")}
        if not any(isinstance(u, int) and u in inputs for u in wanted.values()):
            continue
        cfg = attention.config(node, graph)
        lq, lkv = attention.seq_lengths(node, graph, _lengths_on_host(node, graph, inputs))
        mask_uid = node.inputs.get("attn_mask")
        mask = inputs.get(mask_uid) if isinstance(mask_uid, int) else None
        sink_uid = node.inputs.get("sink_token")
        scale = cfg.scale
        if scale is None:
            uid = node.inputs["scale"]
            scale = float(np.asarray(host_array(inputs[uid], graph.by_uid[uid]), dtype=np.float64).reshape(-1)[0])
        fwd = sdpa_forward(
            inputs[node.inputs["q"]], inputs[node.inputs["k"]], inputs[node.inputs["v"]], scale=scale,
            masking=attention_masking(cfg, lq, lkv),
            bias=mask if cfg.mask_kind == "additive" else None,
            allow=mask if cfg.mask_kind == "boolean" else None,
            sink=inputs.get(sink_uid) if isinstance(sink_uid, int) else None,
        )
        for port, key in (("o", "o"), ("stats", "stats")):
            uid = wanted[port]
            if isinstance(uid, int) and uid in inputs:
                t = graph.by_uid[uid]
                out[uid] = device_arrays.stored(fwd[key], t)
    return out


def derived(graph: Graph, inputs: Mapping[int, Any], seed: int, device: Any) -> dict[int, Any]:
    """The inputs computed from others (a backward's ``o`` and ``stats``): :func:`forward_results`."""
    return forward_results(graph, inputs) if attention_nodes(graph) else {}


def undefined_elements(graph: Graph, inputs: Mapping[int, Any]) -> dict[int, np.ndarray]:
    """Per output uid, a boolean mask of elements outside every sequence's real length.

    With per-sequence lengths an attention output has no defined value in rows past
    ``seq_len_q`` (o, stats, dq) or ``seq_len_kv`` (dk, dv): seen on an H100, cuDNN 9.19's
    fp32 engine leaves them unwritten while its bf16 flash engine writes zeros. They are
    excluded from validation (and counted in its message), not compared against zero.
    """
    out: dict[int, np.ndarray] = {}
    for node in attention_nodes(graph):
        cfg = attention.config(node, graph)
        if not cfg.padded:
            continue
        lq, lkv = attention.seq_lengths(node, graph, _lengths_on_host(node, graph, inputs))
        rows_q = np.arange(cfg.seq_q)[None, :] >= np.asarray(lq)[:, None]        # [B, Sq]
        if cfg.ragged_batch:   # packed rows: a row is defined when some sequence covers it
            covered = attention.pack_rows(cfg, np.ones((cfg.sequences, 1, cfg.seq_q_each, 1)), lq, np.zeros)
            rows_q = covered[:, 0, :, 0] == 0
        rows_kv = np.arange(cfg.seq_kv)[None, :] >= np.asarray(lkv)[:, None]    # [B, Skv]
        for port, rows in (("o", rows_q), ("stats", rows_q), ("max", rows_q), ("sum_exp", rows_q),
                           ("dq", rows_q), ("dk", rows_kv), ("dv", rows_kv)):
            uid = node.outputs.get(port)
            if not isinstance(uid, int) or (cfg.paged and port in ("dk", "dv")):
                continue
            dims = graph.by_uid[uid].dims
            out[uid] = np.broadcast_to(rows[:, None, :, None], (dims[0], dims[1], dims[2], dims[3])).copy()
    return out

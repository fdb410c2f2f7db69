"""Attention (``SdpaAttributes`` / ``SdpaBackwardAttributes``): ports, shape rules, cost.

One :class:`AttentionConfig` is read from a node and every consumer uses it: the
loader's shape check, FLOPs and bytes, ``inspect``'s notes, the seeded inputs (valid
lengths and page tables), the float64 reference and each backend's mapping. So a
graph means the same thing everywhere, and what is refused is refused with the same
words. Sources for each rule: docs/hipdnn-format.md sections 2.10 and 3.10.

Dims are hipDNN's BHSD order (q ``[B, Hq, Sq, Dqk]``, k ``[B, Hkv, Skv, Dqk]``, v
``[B, Hkv, Skv, Dv]``, o ``[B, Hq, Sq, Dv]``) with any strides (BSHD storage is a
stride permutation). With paged K/V, k and v are page containers
``[pages, Hkv, page_size, D]`` and the page tables map each sequence's pages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from hipdnn_trace.graph import dtypes, ragged, umd
from hipdnn_trace.graph.opspec import OpSpec, option_path, port_path, port_tensor
from hipdnn_trace.graph.option_types import BOOL_OR_NULL, INT_OR_NULL, NUMBER_OR_NULL, STRING_OR_NULL

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Graph, Node, Tensor

SDPA = "SdpaAttributes"
SDPA_BACKWARD = "SdpaBackwardAttributes"

FWD_OPTIONAL_INPUTS = (
    "attn_mask", "scale", "seq_len_q", "seq_len_kv", "seed", "offset", "dropout_mask", "dropout_scale",
    "page_table_k", "page_table_v", "block_mask", "sink_token", "descale_q", "descale_k", "descale_v",
    "descale_s", "scale_s", "scale_o",
)
FWD_OPTIONAL_OUTPUTS = ("stats", "max", "sum_exp", "rng_dump", "amax_s", "amax_o")
BWD_OPTIONAL_INPUTS = (
    "scale", "attn_mask", "seq_len_q", "seq_len_kv", "seed", "offset", "dropout_mask", "dropout_scale",
    "dropout_scale_inv", "sink_token", "page_table_k", "page_table_v",
)
BWD_OPTIONAL_OUTPUTS = ("dbias", "dsink_token")

_COMMON_OPTIONS = ("alibi_mask", "padding_mask", "causal_mask", "causal_mask_bottom_right",
                   "dropout_probability", "attn_scale_value", "left_bound", "right_bound",
                   "max_seq_len_kv", "diagonal_alignment")
FWD_OPTIONS = (*_COMMON_OPTIONS, "generate_stats", "mma_core_mode", "implementation", *umd.FIELDS)
BWD_OPTIONS = (*_COMMON_OPTIONS, "max_seq_len_q", "deterministic", "mma_core_mode", "implementation", *umd.FIELDS)

DIAGONAL_ALIGNMENTS = ("TOP_LEFT", "BOTTOM_RIGHT")
#: ``AttentionImplementation`` (sdpa_attributes.fbs @ 01b4ecd0): which of hipDNN's kernel paths runs the
#: op; the math is the same for each, read case-insensitively like diagonal_alignment.
IMPLEMENTATIONS = ("AUTO", "COMPOSITE", "UNIFIED")
#: Ports that make a graph fp8 attention (descale/scale/amax): cast factors around the matmuls.
FP8_PORTS = ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o", "amax_s", "amax_o")
DROPOUT_PORTS = ("seed", "offset", "dropout_mask", "dropout_scale", "dropout_scale_inv", "rng_dump")


@dataclass(frozen=True)
class AttentionConfig:
    """What one attention node computes, in numbers."""

    backward: bool
    batch: int
    heads_q: int
    heads_kv: int
    seq_q: int
    seq_kv: int             # logical keys per sequence (paged: max_seq_len_kv)
    d_qk: int
    d_v: int
    scale: float | None     # None: a scale tensor supplies it at run time
    scale_source: str       # "attn_scale_value", "scale tensor" or "default 1/sqrt(d_qk)"
    causal: bool
    bottom_right: bool
    left_bound: int | None
    right_bound: int | None
    padded: bool            # per-sequence lengths: seq_len_q / seq_len_kv given, or ragged offsets
    paged: bool
    page_size: int = 0
    pages_per_seq: int = 0
    pages: int = 0
    ragged_batch: int = 0             # >0: page tables / lengths list this many sequences packed in q's rows
    mask_kind: str | None = None      # "additive" | "boolean" | None
    sink: bool = False
    dropout: bool = False
    fp8: bool = False
    alibi: bool = False
    ragged_offsets: tuple[str, ...] = ()   # ports whose tensors carry ragged_offset_tensor_uid (RFC 0014)

    @property
    def sequences(self) -> int:
        """Sequences computed: q's batch, or the packed count of a ragged graph."""
        return self.ragged_batch or self.batch

    @property
    def per_row(self) -> int:
        """Packed sequences per q batch row (1 when not ragged)."""
        return self.ragged_batch // self.batch if self.ragged_batch else 1

    @property
    def seq_q_each(self) -> int:
        """The most query rows one sequence can have (q's Sq, shared by a row's packed sequences)."""
        return self.seq_q // self.per_row

    @property
    def group(self) -> int:
        return self.heads_q // self.heads_kv

    @property
    def kind(self) -> str:
        if self.heads_kv == self.heads_q:
            return "MHA"
        return "MQA" if self.heads_kv == 1 else "GQA"

    def masking_text(self) -> str:
        parts = []
        if self.causal:
            parts.append(f"causal {'BOTTOM_RIGHT' if self.bottom_right else 'TOP_LEFT'}")
        elif self.right_bound is not None:
            parts.append(f"right_bound {self.right_bound}")
        if self.left_bound is not None:
            parts.append(f"window left {self.left_bound}")
        if self.padded:
            parts.append("per-sequence lengths")
        if self.mask_kind:
            parts.append(f"{self.mask_kind} attn_mask")
        if self.sink:
            parts.append("sink logits")
        return ", ".join(parts) or "none"


def _int_option(node: Node, key: str) -> int | None:
    value = node.params.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _flag(node: Node, key: str) -> bool:
    return node.params.get(key) is True


def _alignment(node: Node) -> str:
    return str(node.params.get("diagonal_alignment") or "TOP_LEFT").strip().upper()


def _lengths_given(node: Node) -> bool:
    return node.inputs.get("seq_len_q") is not None or node.inputs.get("seq_len_kv") is not None


def config(node: Node, graph: Graph) -> AttentionConfig:
    """The node's attention problem. Assumes :func:`check` found no problem."""
    q, k, v = (port_tensor(node, graph, p) for p in ("q", "k", "v"))
    assert q is not None and k is not None and v is not None
    backward = node.type == SDPA_BACKWARD
    b, hq, sq, dqk = q.dims
    paged = node.inputs.get("page_table_k") is not None
    page_size = pages_per_seq = pages = packed = 0
    if paged:
        table = port_tensor(node, graph, "page_table_k")
        assert table is not None
        pages, _, page_size, _ = k.dims
        rows = table.dims[0]
        packed = rows if rows != b else 0
        pages_per_seq = table.numel // rows
        skv = _int_option(node, "max_seq_len_kv") or pages_per_seq * page_size
    else:
        skv = k.dims[2]
    scale_value = node.params.get("attn_scale_value")
    if node.inputs.get("scale") is not None:
        scale, source = None, "scale tensor"
    elif isinstance(scale_value, (int, float)) and not isinstance(scale_value, bool):
        scale, source = float(scale_value), "attn_scale_value"
    else:
        scale, source = 1.0 / math.sqrt(dqk), "default 1/sqrt(d_qk)"
    right = _int_option(node, "right_bound")
    left = _int_option(node, "left_bound")
    causal = _flag(node, "causal_mask") or _flag(node, "causal_mask_bottom_right") or right == 0
    bottom_right = _flag(node, "causal_mask_bottom_right") or _alignment(node) == "BOTTOM_RIGHT"
    mask = port_tensor(node, graph, "attn_mask")
    mask_kind = None if mask is None else ("boolean" if mask.data_type == "boolean" else "additive")
    dropout_p = node.params.get("dropout_probability")
    offsets = ragged.ragged_ports(node, graph)
    return AttentionConfig(
        backward=backward, batch=b, heads_q=hq, heads_kv=k.dims[1], seq_q=sq, seq_kv=skv, d_qk=dqk,
        d_v=v.dims[3], scale=scale, scale_source=source, causal=causal, bottom_right=bottom_right,
        left_bound=left if left is not None and left >= 0 else None,
        right_bound=right if right is not None and right >= 0 else (0 if causal else None),
        padded=_lengths_given(node) or bool(offsets), paged=paged, page_size=page_size, pages_per_seq=pages_per_seq,
        pages=pages, ragged_batch=packed, mask_kind=mask_kind, sink=node.inputs.get("sink_token") is not None,
        dropout=any(node.inputs.get(p) is not None or node.outputs.get(p) is not None for p in DROPOUT_PORTS)
        or (isinstance(dropout_p, (int, float)) and not isinstance(dropout_p, bool) and dropout_p > 0),
        fp8=any(node.inputs.get(p) is not None or node.outputs.get(p) is not None for p in FP8_PORTS),
        alibi=_flag(node, "alibi_mask"), ragged_offsets=offsets,
    )


# ---------------------------------------------------------------- shape rules

def _dims(t: Tensor) -> list[int]:
    return list(t.dims)


def _check_ports_rank(node: Node, graph: Graph) -> list[tuple[str, str]]:
    problems = []
    for port in ("q", "k", "v", "o", "do", "dq", "dk", "dv"):
        t = port_tensor(node, graph, port)
        if t is not None and len(t.dims) != 4:
            problems.append((port_path(node, port), f"{port} must have 4 dims [B, H, S, D] "
                             f"(hipDNN's BHSD order), got {_dims(t)}"))
    return problems


def _options_problems(node: Node) -> list[tuple[str, str]]:
    problems = []
    sec = "parameters" if node.type == SDPA_BACKWARD else "attributes"
    for key in ("alibi_mask", "padding_mask", "causal_mask", "causal_mask_bottom_right", "generate_stats"):
        value = node.params.get(key)
        if value is not None and not isinstance(value, bool):
            problems.append((option_path(node, key, sec), f"expected true, false or null, got {value!r}"))
    for key in ("left_bound", "right_bound", "max_seq_len_kv", "max_seq_len_q"):
        value = node.params.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            problems.append((option_path(node, key, sec), f"expected an integer or null, got {value!r}"))
    for key in ("attn_scale_value", "dropout_probability"):
        value = node.params.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value)):
            problems.append((option_path(node, key, sec), f"expected a finite number or null, got {value!r}"))
    p = node.params.get("dropout_probability")
    if isinstance(p, (int, float)) and not isinstance(p, bool) and not 0.0 <= p < 1.0:
        problems.append((option_path(node, "dropout_probability", sec), f"{p} is not in [0, 1)"))
    align = node.params.get("diagonal_alignment")
    if align is not None and (not isinstance(align, str) or align.strip().upper() not in DIAGONAL_ALIGNMENTS):
        problems.append((option_path(node, "diagonal_alignment", sec),
                         f"unknown diagonal_alignment {align!r} (hipDNN: {', '.join(DIAGONAL_ALIGNMENTS)})"))
    problems.extend(_enum_problems(node, sec))
    if node.params.get("max_seq_len_kv") is not None and isinstance(node.params["max_seq_len_kv"], int) \
            and not isinstance(node.params["max_seq_len_kv"], bool) and node.params["max_seq_len_kv"] < 1:
        problems.append((option_path(node, "max_seq_len_kv", sec), "must be >= 1"))
    if _flag(node, "causal_mask") and _flag(node, "causal_mask_bottom_right"):
        problems.append((option_path(node, "causal_mask_bottom_right", sec),
                         "causal_mask and causal_mask_bottom_right are both set; choose one "
                         "(or causal_mask with diagonal_alignment)"))
    return problems


def _enum_problems(node: Node, sec: str) -> list[tuple[str, str]]:
    """``implementation`` one of :data:`IMPLEMENTATIONS`; ``mma_core_mode`` a hipDNN data type in any
    spelling its repositories write (the frontend ``UNSET``, dnn-providers ``float``: dtypes.spelled)."""
    problems = []
    impl = node.params.get("implementation")
    if impl is not None and (not isinstance(impl, str) or impl.strip().upper() not in IMPLEMENTATIONS):
        problems.append((option_path(node, "implementation", sec),
                         f"unknown implementation {impl!r} (hipDNN: {', '.join(IMPLEMENTATIONS)})"))
    mode = node.params.get("mma_core_mode")
    if mode is not None and (not isinstance(mode, str) or dtypes.spelled(mode) is None):
        problems.append((option_path(node, "mma_core_mode", sec),
                         f"unknown mma_core_mode {mode!r} (a hipDNN data type or unset)"))
    return problems


def _per_batch(t: Tensor, batch: int) -> bool:
    """[B], [B, 1], [B, 1, 1, 1]...: one value per batch entry."""
    return t.dims[0] == batch and t.numel == batch


def check(node: Node, graph: Graph) -> list[tuple[str, str]]:
    """Cross-tensor rules for Sdpa and SdpaBackward; (JSON path, problem) pairs."""
    problems = _options_problems(node) + _check_ports_rank(node, graph)
    if problems:
        return problems
    q, k, v = (port_tensor(node, graph, p) for p in ("q", "k", "v"))
    if q is None or k is None or v is None:
        return []
    b, hq, sq, dqk = q.dims
    paged = node.inputs.get("page_table_k") is not None
    problems += ragged.problems(node, graph, b)   # RFC 0014 offsets (graph/ragged.py)
    if paged != (node.inputs.get("page_table_v") is not None):
        return [(port_path(node, "page_table_v" if paged else "page_table_k"),
                 "paged attention needs both page_table_k and page_table_v")]
    if k.dims[1] != v.dims[1] or k.dims[0] != v.dims[0] or k.dims[2] != v.dims[2]:
        return [(port_path(node, "v"), f"v {_dims(v)} and k {_dims(k)} differ in pages/batch, heads or sequence")]
    hkv = k.dims[1]
    if k.dims[3] != dqk:
        return [(port_path(node, "k"), f"k's head dim {k.dims[3]} differs from q's {dqk} (d_qk)")]
    if hq % hkv:
        return [(port_path(node, "k"), f"q has {hq} heads, not a multiple of k/v's {hkv} (GQA/MQA "
                 "needs Hq = g * Hkv)")]
    if paged:
        problems += _paged_problems(node, graph, b, k)
    elif k.dims[0] != b:
        return [(port_path(node, "k"), f"k's batch {k.dims[0]} differs from q's {b}")]
    dv = v.dims[3]
    skv = k.dims[2] if not paged else (_int_option(node, "max_seq_len_kv") or 0)
    want_o = [b, hq, sq, dv]
    for port in ("o", "do", "dq", "dk", "dv"):
        t = port_tensor(node, graph, port)
        if t is None:
            continue
        want = {"o": want_o, "do": want_o, "dq": list(q.dims), "dk": list(k.dims), "dv": list(v.dims)}[port]
        if _dims(t) != want:
            problems.append((port_path(node, port), f"dims {_dims(t)} differ from the expected {want}"))
    for port in ("stats", "max", "sum_exp"):
        t = port_tensor(node, graph, port)
        if t is not None and (t.numel != b * hq * sq or list(t.dims[:3]) != [b, hq, sq]):
            problems.append((port_path(node, port), f"dims {_dims(t)}: expected [B, Hq, Sq, 1] = {[b, hq, sq, 1]}"))
    for port in ("seq_len_q", "seq_len_kv"):
        t = port_tensor(node, graph, port)
        if t is None:
            continue
        if t.data_type not in ("int32", "int64"):
            problems.append((port_path(node, port), f"sequence lengths must be int32 or int64, got {t.data_type}"))
        elif not _per_batch(t, b) and not _per_batch(t, _table_rows(node, graph, b)):
            problems.append((port_path(node, port), f"dims {_dims(t)}: expected one length per batch entry "
                             f"([{b}] or [{b}, 1, 1, 1])"))
    mask = port_tensor(node, graph, "attn_mask")
    if mask is not None and skv:
        problems += _mask_problems(node, mask, [b, hq, sq, skv])
    for port in ("dbias",):
        t = port_tensor(node, graph, port)
        if t is not None and skv:
            problems += _mask_problems(node, t, [b, hq, sq, skv], port)
    sink = port_tensor(node, graph, "sink_token")
    if sink is not None and (sink.numel != hq or (len(sink.dims) == 4 and sink.dims[1] != hq)):
        problems.append((port_path(node, "sink_token"), f"dims {_dims(sink)}: expected one logit per query "
                         f"head, [1, {hq}, 1, 1]"))
    scale = port_tensor(node, graph, "scale")
    if scale is not None and not scale.is_value and scale.numel != 1:
        problems.append((port_path(node, "scale"), f"a scale tensor holds one value, this has {scale.numel}"))
    if _int_option(node, "left_bound") == 0:
        section = "parameters" if node.type == SDPA_BACKWARD else "attributes"
        problems.append((option_path(node, "left_bound", section),
                         "left_bound 0 keeps no key; use a positive window length (or null / -1 for none)"))
    return problems


def _table_rows(node: Node, graph: Graph, b: int) -> int:
    """Sequences a paged node's page table lists (q's batch unless q packs several)."""
    table = port_tensor(node, graph, "page_table_k")
    return table.dims[0] if table is not None else b


def _paged_problems(node: Node, graph: Graph, b: int, k: Tensor) -> list[tuple[str, str]]:
    problems = []
    rows = _table_rows(node, graph, b)
    seq_q = port_tensor(node, graph, "seq_len_q")
    if rows != b and (seq_q is None or seq_q.numel != rows):
        return [(port_path(node, "page_table_k"), f"{rows} page-table rows but q's batch is {b} and no "
                 f"seq_len_q lists {rows} sequences")]
    if rows != b and (rows % b or port_tensor(node, graph, "q").dims[2] < rows // b):  # type: ignore[union-attr]
        return [(port_path(node, "page_table_k"), f"{rows} packed sequences do not share q's {b} batch rows "
                 "evenly with at least one query row each (docs/hipdnn-format.md, ragged attention)")]
    max_kv = _int_option(node, "max_seq_len_kv")
    for port in ("page_table_k", "page_table_v"):
        t = port_tensor(node, graph, port)
        assert t is not None
        if t.data_type not in ("int32", "int64"):
            problems.append((port_path(node, port), f"page tables must be int32 or int64, got {t.data_type}"))
        elif t.dims[0] != rows or t.numel % rows:
            problems.append((port_path(node, port), f"dims {_dims(t)}: expected [B, 1, pages_per_seq, 1] "
                             f"with B = {rows}"))
    if problems:
        return problems
    table = port_tensor(node, graph, "page_table_k")
    assert table is not None
    capacity = table.numel // rows * k.dims[2]
    if max_kv is None:
        problems.append((option_path(node, "max_seq_len_kv", "attributes"),
                         "paged attention needs max_seq_len_kv (the longest key sequence)"))
    elif max_kv > capacity:
        problems.append((option_path(node, "max_seq_len_kv", "attributes"),
                         f"{max_kv} is more than the {table.numel // rows} pages x {k.dims[2]} tokens a "
                         "sequence's page table can hold"))
    return problems


def _mask_problems(node: Node, t: Tensor, full: list[int], port: str = "attn_mask") -> list[tuple[str, str]]:
    dims = [1] * (4 - len(t.dims)) + list(t.dims)
    if len(t.dims) > 4 or any(d not in (1, f) for d, f in zip(dims, full)):
        return [(port_path(node, port), f"dims {_dims(t)} do not broadcast to [B, Hq, Sq, Skv] = {full}")]
    return []


# ---------------------------------------------------------------- cost

def seq_lengths(node: Node, graph: Graph, values: dict[int, Any] | None = None) -> tuple[list[int], list[int]]:
    """Per batch entry (query, key) lengths: from bound int tensors when given (seq_len_q / seq_len_kv,
    or the ragged offset tensors: :func:`length_uids`), else the maxima.

    Without values (``inspect``, FLOP counts before inputs exist) a varlen graph is counted
    at its padded lengths; the harness counts real lengths once inputs exist.
    """
    cfg = config(node, graph)
    n = cfg.sequences
    lq, lkv = [cfg.seq_q_each] * n, [cfg.seq_kv] * n
    if values:
        for port, out, cap in (("seq_len_q", lq, cfg.seq_q_each), ("seq_len_kv", lkv, cfg.seq_kv)):
            uid = node.inputs.get(port)
            if isinstance(uid, int) and uid in values:
                flat = [int(x) for x in list(_flat(values[uid]))[:n]]
                out[:] = [min(max(x, 0), cap) for x in flat]
        for ports, out in ((ragged.QUERY_PORTS, lq), (ragged.KEY_PORTS, lkv)):
            found = ragged.side_lengths(node, graph, values, ports, n) if cfg.ragged_offsets else None
            if found is not None:
                out[:] = found
    return lq, lkv


def length_uids(node: Node, graph: Graph) -> dict[int, str]:
    """uid -> port of the tensors that hold a node's sequence lengths: seq_len_q / seq_len_kv and every
    ragged offset tensor (``Graph.reads``' ``<port>.ragged_offset``)."""
    ports = ("seq_len_q", "seq_len_kv")
    return {u: p for p, u in graph.reads(node).items() if p in ports or p.endswith(ragged.RAGGED_SUFFIX)}


def _flat(a: Any) -> Any:
    try:
        return a.reshape(-1)
    except AttributeError:
        return a


def kept_pairs(cfg: AttentionConfig, q_len: int, kv_len: int) -> int:
    """Exact number of (query, key) pairs one batch entry and head computes: row i keeps
    keys in ``[max(0, i+off-left+1), min(kv_len, i+off+right+1))`` (docs/hipdnn-format.md 3.10)."""
    import numpy as np

    off = kv_len - q_len if cfg.bottom_right else 0
    i = np.arange(max(q_len, 0), dtype=np.int64)
    hi = np.full(i.shape, kv_len, dtype=np.int64)
    if cfg.right_bound is not None:
        hi = np.minimum(hi, i + off + cfg.right_bound + 1)
    lo = np.zeros(i.shape, dtype=np.int64)
    if cfg.left_bound is not None:
        lo = np.maximum(lo, i + off - cfg.left_bound + 1)
    return int(np.clip(hi - lo, 0, None).sum())


def pairs(node: Node, graph: Graph, values: dict[int, Any] | None = None) -> int:
    """Unmasked (query, key) pairs summed over batch entries, for one head."""
    cfg = config(node, graph)
    lq, lkv = seq_lengths(node, graph, values)
    return sum(kept_pairs(cfg, a, b) for a, b in zip(lq, lkv))


#: Backward matmul work relative to the forward's two: dV = P^T dO, dP = dO V^T,
#: dQ = dS K, dK = dS^T Q and the recomputed S = Q K^T (FlashAttention-2's count, 2.5x).
BACKWARD_FACTOR = 2.5


def flops(node: Node, graph: Graph, values: dict[int, Any] | None = None) -> float:
    """Forward: 2 * Hq * (d_qk + d_v) * P (the two matmuls over the P kept pairs of each
    batch entry); backward: 2.5x that. Softmax and masking are not counted (as
    FlashAttention and cuDNN report attention TFLOPS)."""
    cfg = config(node, graph)
    fwd = 2.0 * cfg.heads_q * (cfg.d_qk + cfg.d_v) * pairs(node, graph, values)
    return fwd * BACKWARD_FACTOR if cfg.backward else fwd


def notes(node: Node, graph: Graph) -> list[str]:
    """What inspect should say about an attention node beyond its tensors."""
    cfg = config(node, graph)
    out = [f"{cfg.kind} attention: B {cfg.batch}, Hq {cfg.heads_q}, Hkv {cfg.heads_kv}, Sq {cfg.seq_q}, "
           f"Skv {cfg.seq_kv}, d_qk {cfg.d_qk}, d_v {cfg.d_v}; masking: {cfg.masking_text()}"]
    if cfg.scale_source.startswith("default"):
        out.append(f"attn_scale_value absent: hipDNN's reference default 1/sqrt(d_qk) = {cfg.scale:.6g} "
                   "is used (cuDNN's own default would be 1.0)")
    elif cfg.scale is not None:
        out.append(f"scale {cfg.scale:.6g} from attn_scale_value")
    per_head = pairs(node, graph)
    full = cfg.sequences * cfg.seq_q_each * cfg.seq_kv
    out.append(f"FLOPs count {per_head} of {full} (query, key) pairs per head"
               + (" (padded lengths; real lengths are counted at run time)" if cfg.padded else "")
               + (", x2.5 for the backward" if cfg.backward else ""))
    if cfg.ragged_offsets:
        out.append(f"ragged (RFC 0014): {', '.join(cfg.ragged_offsets)} packed token by token, each sequence's "
                   "offsets and length from its offset tensor (docs/hipdnn-format.md 3.10)")
    if cfg.ragged_batch:
        out.append(f"packed (ragged) rows: {cfg.ragged_batch} sequences in q's {cfg.batch} batch row(s), up to "
                   f"{cfg.seq_q_each} query rows each (docs/hipdnn-format.md 3.10)")
    if cfg.paged:
        out.append(f"paged K/V: {cfg.pages} pages of {cfg.page_size} tokens, {cfg.pages_per_seq} per "
                   f"sequence, max_seq_len_kv {cfg.seq_kv}")
    return out


_SDPA_KINDS = {
    **dict.fromkeys(("alibi_mask", "padding_mask", "causal_mask", "causal_mask_bottom_right"), BOOL_OR_NULL),
    "dropout_probability": NUMBER_OR_NULL, "attn_scale_value": NUMBER_OR_NULL,
    "left_bound": INT_OR_NULL, "right_bound": INT_OR_NULL, "max_seq_len_kv": INT_OR_NULL,
    "diagonal_alignment": STRING_OR_NULL, "mma_core_mode": STRING_OR_NULL, "implementation": STRING_OR_NULL,
    **dict.fromkeys(umd.FIELDS, umd.expression_kind),   # hipDNN's FLOP/byte models (RFC 0019, graph/umd.py)
}

SPECS: tuple[OpSpec, ...] = (
    OpSpec(SDPA, ("q", "k", "v"), ("o",), optional_inputs=FWD_OPTIONAL_INPUTS,
           optional_outputs=FWD_OPTIONAL_OUTPUTS, options=dict.fromkeys(FWD_OPTIONS, "attributes"),
           option_kinds={**_SDPA_KINDS, "generate_stats": BOOL_OR_NULL},
           check=check, flops=flops, notes=notes, flops_use_values=True),
    OpSpec(SDPA_BACKWARD, ("q", "k", "v", "o", "do", "stats"), ("dq", "dk", "dv"),
           optional_inputs=BWD_OPTIONAL_INPUTS, optional_outputs=BWD_OPTIONAL_OUTPUTS,
           options=dict.fromkeys(BWD_OPTIONS, "parameters"),
           option_kinds={**_SDPA_KINDS, "max_seq_len_q": INT_OR_NULL, "deterministic": BOOL_OR_NULL},
           check=check, flops=flops, notes=notes,
           flops_use_values=True),
)


def unmodelled(cfg: AttentionConfig, node: Node) -> str | None:
    """What the float64 reference cannot compute, so no backend's output could be validated:
    the same words from the reference and from torch (cudnn adds its own limits)."""
    what = f"{node.op} {node.name!r}"
    layout = layout_refusal(cfg, node)
    if layout:
        return layout
    if cfg.dropout:
        return (f"{what}: dropout needs hipDNN's RNG stream (Philox seed/offset as its kernels draw it); "
                "attention is modelled without dropout only")
    if cfg.fp8:
        return f"{what}: fp8 descale/scale/amax ports are not modelled"
    if cfg.alibi:
        return f"{what}: alibi_mask is not modelled"
    if node.inputs.get("block_mask") is not None:
        return f"{what}: block_mask is not modelled"
    if cfg.backward and cfg.paged:
        return f"{what}: paged K/V in the backward pass is not modelled"
    if cfg.ragged_batch and cfg.mask_kind:
        return f"{what}: an attn_mask over packed (ragged) query rows is not modelled"
    return None


def layout_refusal(cfg: AttentionConfig, node: Node) -> str | None:
    """A ragged (RFC 0014) form no backend here models, with the reason (the same words everywhere)."""
    what = f"{node.op} {node.name!r}"
    if not cfg.ragged_offsets:
        return None
    if cfg.mask_kind or node.outputs.get("dbias") is not None:
        return (f"{what}: an attn_mask / dbias over ragged (ragged_offset_tensor_uid) tensors is not modelled: "
                "hipDNN's ragged SDPA takes no mask (GpuSdpaRaggedFwdPlan.hpp), so its layout is undefined")
    if cfg.sink:
        return (f"{what}: sink_token with ragged (ragged_offset_tensor_uid) tensors is not modelled (hipDNN's "
                "ragged references have no sink)")
    if cfg.ragged_batch:
        return (f"{what}: packed q rows and ragged_offset_tensor_uid together are not modelled (one packing "
                "or the other)")
    return None


def per_sequence(cfg: AttentionConfig) -> AttentionConfig:
    """The same problem with each packed sequence in its own batch entry (padded to
    :attr:`AttentionConfig.seq_q_each` rows): what backends compute for a ragged node."""
    return replace(cfg, batch=cfg.sequences, seq_q=cfg.seq_q_each, ragged_batch=0)


def spans(per_row: int, lq: list[int]) -> list[tuple[int, int, int]]:
    """(q batch row, first row, rows) of each packed sequence when each q row packs ``per_row``: a row's
    sequences follow each other from row 0 in order (docs/hipdnn-format.md, ragged attention)."""
    out, start = [], 0
    for i, n in enumerate(lq):
        if i % per_row == 0:
            start = 0
        out.append((i // per_row, start, n))
        start += n
    return out


def ragged_element_offsets(lq: list[int], per_row: int, seq_q: int, token_stride: int) -> list[int]:
    """cuDNN's ragged offsets for packed rows: sequence i's first element (row * Sq + first row,
    times the token stride H * D of a [B, S, H, D] tensor), then the end of the last one
    (cudnn-frontend docs/operations/Attention.md, "Ragged Offset Tensor": B + 1 offsets in elements)."""
    placed = spans(per_row, lq)
    out = [(row * seq_q + start) * token_stride for row, start, _ in placed]
    last = placed[-1] if placed else (0, 0, 0)
    return [*out, (last[0] * seq_q + last[1] + last[2]) * token_stride]


def unpack_rows(cfg: AttentionConfig, packed: Any, lq: list[int], zeros: Any) -> Any:
    """[B, H, Sq, D] packed rows -> [sequences, H, seq_q_each, D], rows past a length zero.
    ``zeros(shape)`` makes the result (numpy or torch): the slicing works on both."""
    out = zeros((cfg.sequences, packed.shape[1], cfg.seq_q_each, packed.shape[3]))
    for i, (row, start, n) in enumerate(spans(cfg.per_row, lq)):
        out[i, :, :n] = packed[row, :, start:start + n]
    return out


def pack_rows(cfg: AttentionConfig, padded: Any, lq: list[int], zeros: Any) -> Any:
    """Inverse of :func:`unpack_rows`: rows no sequence covers are 0."""
    out = zeros((cfg.batch, padded.shape[1], cfg.seq_q, padded.shape[3]))
    for i, (row, start, n) in enumerate(spans(cfg.per_row, lq)):
        out[row, :, start:start + n] = padded[i, :, :n]
    return out

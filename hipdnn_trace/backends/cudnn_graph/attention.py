"""Attention -> cuDNN frontend ``sdpa`` / ``sdpa_backward``.

The hipDNN node's meaning comes from ``graph.attention.config``; this module says it
in the frontend's words (kwarg names as in nvidia-cudnn-frontend 1.32's
``cudnn/_sdpa_validate.py`` and its pybind): ``attn_scale`` (float or by-value tensor),
``bias`` (additive only: cuDNN rejects boolean bias), ``use_padding_mask`` with
``seq_len_q`` / ``seq_len_kv`` as [B, 1, 1, 1] int32, ``diagonal_alignment`` with
``diagonal_band_right_bound`` (0 = causal) and ``diagonal_band_left_bound`` (the window
length, the same number hipDNN's left_bound holds), ``paged_attention_k_table`` /
``_v_table`` as [B, 1, pages, 1] int32 with ``paged_attention_max_seq_len_kv``, and
``sink_token`` as [1, H, 1, 1] float; packed (ragged) q rows as Q and O with ragged offset
tensors (``set_ragged_offset``) the session computes from seq_len_q. score_max / score_sum_exp and dBias are
outputs the frontend takes as arguments (``output_kwargs``).

What cuDNN cannot say is refused here with the reason, before any library call:
dropout (another RNG stream than hipDNN's), fp8 ports, ALiBi (not modelled by the
reference), boolean masks, int64 lengths or page tables.
"""

from __future__ import annotations

from typing import Any

from hipdnn_trace.backends.cudnn_graph.builder import PlanFn, _Builder
from hipdnn_trace.backends.cudnn_graph.plan_types import EnumValue, TensorDecl
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph import attention, ragged
from hipdnn_trace.graph.model import Node, Tensor
from hipdnn_trace.graph.opspec import port_tensor


def _refuse(cfg: attention.AttentionConfig, node: Node) -> None:
    what = f"{node.op} {node.name!r}"
    layout = attention.layout_refusal(cfg, node)
    if layout:
        raise UnsupportedError(layout)
    if cfg.dropout:
        raise UnsupportedError(f"{what}: dropout needs hipDNN's RNG stream; cuDNN's Philox draws other "
                               "numbers, so the output could not be validated")
    if cfg.fp8:
        raise UnsupportedError(f"{what}: fp8 attention (descale/scale/amax ports) is not mapped to sdpa_fp8")
    if cfg.alibi:
        raise UnsupportedError(f"{what}: alibi_mask is not modelled by the float64 reference")
    if node.inputs.get("block_mask") is not None:
        raise UnsupportedError(f"{what}: block_mask is not mapped")
    if cfg.mask_kind == "boolean":
        raise UnsupportedError(f"{what}: cuDNN takes an additive bias only ('Bias mask data type cannot be "
                               "boolean')")
    if cfg.backward and cfg.paged:
        raise UnsupportedError(f"{what}: cuDNN's sdpa_backward has no paged K/V")


def _int32(b: _Builder, node: Node, port: str, dims: list[int]) -> str:
    t = b.graph.by_uid[node.inputs[port]]   # type: ignore[index]
    if t.data_type != "int32":
        raise UnsupportedError(f"{node.op} {node.name!r}: cuDNN takes {port} as int32, not {t.data_type}")
    return b.reshaped(t.uid, dims, port)


def _common(b: _Builder, node: Node, cfg: attention.AttentionConfig) -> tuple[dict[str, str | None], dict[str, Any]]:
    """Tensors and attributes both directions share: scale, bias, lengths, masks, sinks."""
    i = node.inputs
    tensors: dict[str, str | None] = {"q": b.tensor(i["q"], "q"), "k": b.tensor(i["k"], "k"),   # type: ignore[arg-type]
                                      "v": b.tensor(i["v"], "v")}                                # type: ignore[arg-type]
    attrs: dict[str, Any] = {}
    if cfg.scale is not None:
        attrs["attn_scale"] = float(cfg.scale)
    else:
        tensors["attn_scale"] = b.scalar(i["scale"], None, "scale")   # type: ignore[arg-type]
    if cfg.mask_kind == "additive":
        tensors["bias"] = b.tensor(i["attn_mask"], "attn_mask")       # type: ignore[arg-type]
    if cfg.ragged_offsets:
        attrs["use_padding_mask"] = True   # the lengths come from the offsets (_ragged_offsets)
    elif cfg.padded:
        if i.get("seq_len_q") is None or i.get("seq_len_kv") is None:
            raise UnsupportedError(f"{node.op} {node.name!r}: cuDNN's padding mask needs both seq_len_q and "
                                   "seq_len_kv")
        attrs["use_padding_mask"] = True
        tensors["seq_len_q"] = _int32(b, node, "seq_len_q", [cfg.sequences, 1, 1, 1])
        tensors["seq_len_kv"] = _int32(b, node, "seq_len_kv", [cfg.sequences, 1, 1, 1])
    if cfg.right_bound is not None or cfg.left_bound is not None:
        align = "BOTTOM_RIGHT" if cfg.bottom_right else "TOP_LEFT"
        attrs["diagonal_alignment"] = EnumValue("diagonal_alignment", align)
        if cfg.right_bound is not None:
            attrs["diagonal_band_right_bound"] = int(cfg.right_bound)
        if cfg.left_bound is not None:
            attrs["diagonal_band_left_bound"] = int(cfg.left_bound)
    if cfg.sink:
        # cuDNN reads the sink as float (frontend docs: [1, H, 1, 1] float); a bf16 sink declared as
        # BFLOAT16 was accepted at build and then read as float: cudaErrorMisalignedAddress on an H200
        tensors["sink_token"] = b.reshaped(i["sink_token"], [1, cfg.heads_q, 1, 1], "sink_token",   # type: ignore[arg-type]
                                           cast="float")
    return tensors, attrs


def _stats(b: _Builder, uid: int, cfg: attention.AttentionConfig, *, output: bool) -> str:
    """Stats as cuDNN's [B, H, Sq, 1]: hipDNN graphs also write [B, H, Sq] (sample_sdpa_backward.json),
    which lifting to rank 4 would turn into [1, B, H, Sq] (seen on an H100: every dq wrong)."""
    t = b.graph.by_uid[uid]
    want = (cfg.batch, cfg.heads_q, cfg.seq_q, 1)
    if len(t.dims) == 4 and tuple(t.dims) == want:
        return b.output(uid) if output else b.tensor(uid, "stats")   # type: ignore[return-value]
    return b.reshaped(uid, list(want), "stats", output=output)


def float_intermediates(b: _Builder) -> None:
    """SDPA's internal tensors (scores, mask, probabilities) in float, whatever the graph's
    intermediate type says.

    hipDNN's intermediate_data_type describes virtual tensors between nodes; inside one SDPA
    node its reference computes in float. cuDNN applies the graph-level type to the fused
    SDPA's internals: seen on an H100 (cuDNN 9.19, frontend 1.32), hipDNN's own graphs with
    intermediate half/bfloat16 and an additive bias, a sliding window, or causal + padding
    gave wrong outputs for nearly every element, and the same graphs with float intermediates
    validate (docs/benchmarks.md, attention)."""
    if b.plan.intermediate != "FLOAT":
        b.plan.notes.append(f"attention: intermediate type {b.plan.intermediate} replaced by FLOAT (SDPA "
                            "internals are float in hipDNN's reference)")
        b.plan.intermediate = "FLOAT"


def _token_major(t: Tensor) -> bool:
    """[B, H, S, D] dims stored [B, S, H, D] and packed: cuDNN's ragged layout (one token = H * D)."""
    b_, h, s_, d = t.dims
    return tuple(t.strides) == (s_ * h * d, d, h * d, 1)


def _ragged_rows(b: _Builder, node: Node, cfg: attention.AttentionConfig) -> None:
    """Packed q/o rows as cuDNN's ragged tensors: q and o declared [sequences, H, Sq_each, D] in
    [B, S, H, D] strides, each with an int32 [sequences + 1, 1, 1, 1] offset tensor the session
    computes from seq_len_q at bind time (docs/hipdnn-format.md 3.10, ragged attention)."""
    what = f"{node.op} {node.name!r}"
    if cfg.backward or any(node.outputs.get(p) is not None for p in ("stats", "max", "sum_exp")):
        raise UnsupportedError(f"{what}: packed (ragged) rows are mapped for the forward's O only")
    for port in ("q", "o"):
        t = b.graph.by_uid[node.inputs[port] if port == "q" else node.outputs[port]]   # type: ignore[index]
        if not _token_major(t):
            raise UnsupportedError(f"{what}: packed rows need {port} stored token-major ([B, S, H, D], "
                                   f"packed) for cuDNN's ragged offsets; strides are {list(t.strides)}")
        h, d = t.dims[1], t.dims[3]
        dims = (cfg.sequences, h, cfg.seq_q_each, d)
        b.geometry[t.uid] = (dims, (cfg.seq_q_each * h * d, d, h * d, 1))
        key = f"r{t.uid}"
        b.plan.inputs.append(TensorDecl(key, b.uid(), f"ragged_offset_{port}", (cfg.sequences + 1, 1, 1, 1),
                                        (1, 1, 1, 1), "INT32", hipdnn_uid=node.inputs["seq_len_q"],
                                        offsets_of=(cfg.per_row, cfg.seq_q, h * d)))
        b.ragged[t.uid] = key


def _offset_decl(b: _Builder, t: Tensor, port: str) -> str:
    """The cuDNN offset tensor of ragged tensor ``t``: one per (hipDNN offset tensor, multiplier), since
    cuDNN reads element offsets and the multiplier changes them."""
    uid, mult = t.ragged_offset_tensor_uid, t.ragged_offset_multiplier
    assert uid is not None
    key = f"ro{uid}x{mult}"
    if not any(d.key == key for d in b.plan.inputs):
        b.plan.inputs.append(TensorDecl(key, b.uid(), f"ragged_offset_{port}", (t.dims[0] + 1, 1, 1, 1),
                                        (1, 1, 1, 1), "INT32", hipdnn_uid=uid,
                                        ragged_elements=(mult, ragged.token_stride(t), t.dims[2])))
    return key


def _lengths_decl(b: _Builder, t: Tensor, name: str) -> str:
    """seq_len_q / seq_len_kv for cuDNN's padding mask, derived at bind from ``t``'s offsets
    (cudnn-frontend Attention.md: ragged tensors go with use_padding_mask and both lengths)."""
    key = f"len_{name}"
    b.plan.inputs.append(TensorDecl(key, b.uid(), name, (t.dims[0], 1, 1, 1), (1, 1, 1, 1), "INT32",
                                    hipdnn_uid=t.ragged_offset_tensor_uid,
                                    lengths_of=(t.ragged_offset_multiplier, ragged.token_stride(t), t.dims[2])))
    return key


def _ragged_offsets(b: _Builder, node: Node, cfg: attention.AttentionConfig) -> dict[str, str]:
    """RFC 0014 ragged tensors (docs/hipdnn-format.md 3.10): each one's offset tensor bound with
    ``set_ragged_offset`` (declared before the tensors so ``b.tensor`` / ``b.output`` attach it), and
    the lengths cuDNN's padding mask needs, from the offsets (paged K/V: seq_len_kv, or max_seq_len_kv
    for every sequence). Returns the lengths' tensor kwargs."""
    for port in cfg.ragged_offsets:
        t = port_tensor(node, b.graph, port)
        assert t is not None
        b.ragged[t.uid] = _offset_decl(b, t, port)
    q = port_tensor(node, b.graph, "q")
    assert q is not None
    out = {"seq_len_q": _lengths_decl(b, q, "seq_len_q")}
    k = port_tensor(node, b.graph, "k")
    if k is not None and k.ragged_offset_tensor_uid is not None:
        out["seq_len_kv"] = _lengths_decl(b, k, "seq_len_kv")
    elif node.inputs.get("seq_len_kv") is not None:
        out["seq_len_kv"] = _int32(b, node, "seq_len_kv", [cfg.batch, 1, 1, 1])
    else:
        key = "len_seq_len_kv"
        b.plan.inputs.append(TensorDecl(key, b.uid(), "seq_len_kv", (cfg.batch, 1, 1, 1), (1, 1, 1, 1), "INT32",
                                        fill=float(cfg.seq_kv)))
        out["seq_len_kv"] = key
    return out


def sdpa(b: _Builder, node: Node) -> None:
    cfg = attention.config(node, b.graph)
    _refuse(cfg, node)
    float_intermediates(b)
    if cfg.ragged_batch:
        _ragged_rows(b, node, cfg)
    lengths = _ragged_offsets(b, node, cfg) if cfg.ragged_offsets else {}
    tensors, attrs = _common(b, node, cfg)
    tensors.update(lengths)
    o = node.outputs
    if cfg.paged:
        pages = [cfg.sequences, 1, cfg.pages_per_seq, 1]
        tensors["paged_attention_k_table"] = _int32(b, node, "page_table_k", pages)
        tensors["paged_attention_v_table"] = _int32(b, node, "page_table_v", pages)
        attrs["paged_attention_max_seq_len_kv"] = int(cfg.seq_kv)
    stats_uid = o.get("stats")
    attrs["generate_stats"] = stats_uid is not None
    out_kwargs = {kw: b.output(o[port]) for port, kw in (("max", "score_max"), ("sum_exp", "score_sum_exp"))
                  if o.get(port) is not None}
    outs = [b.output(o["o"]), _stats(b, stats_uid, cfg, output=True) if stats_uid is not None else None]
    b.call(node, "sdpa", tensors, outs, attrs, output_kwargs=out_kwargs)


def sdpa_backward(b: _Builder, node: Node) -> None:
    cfg = attention.config(node, b.graph)
    _refuse(cfg, node)
    float_intermediates(b)
    lengths = _ragged_offsets(b, node, cfg) if cfg.ragged_offsets else {}
    tensors, attrs = _common(b, node, cfg)
    tensors.update(lengths)
    i, o = node.inputs, node.outputs
    tensors.update({"o": b.tensor(i["o"], "o"), "dO": b.tensor(i["do"], "do"),       # type: ignore[arg-type]
                    "stats": _stats(b, i["stats"], cfg, output=False)})             # type: ignore[arg-type]
    out_kwargs = {}
    if o.get("dbias") is not None:
        out_kwargs["dBias"] = b.output(o["dbias"])
    if o.get("dsink_token") is not None:
        out_kwargs["dSink_token"] = b.reshaped(o["dsink_token"], [1, cfg.heads_q, 1, 1], "dsink_token",  # type: ignore[arg-type]
                                               output=True)
    outs = [b.output(o["dq"]), b.output(o["dk"]), b.output(o["dv"])]
    b.call(node, "sdpa_backward", tensors, outs, attrs, output_kwargs=out_kwargs)


OPS: dict[str, PlanFn] = {attention.SDPA: sdpa, attention.SDPA_BACKWARD: sdpa_backward}

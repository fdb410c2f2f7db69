"""Builder methods for attention nodes, in the exact layout hipDNN's graphs carry.

Every port and option key is written, null when unset, in the order of hipDNN's own
sample graphs (``sample_sdpa.json``, ``sample_sdpa_backward.json``): forward options
under ``attributes``, backward options under ``parameters``. Mixed into
:class:`hipdnn_trace.graph.build.GraphBuilder`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hipdnn_trace.graph import attention

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Tensor

_FWD_INPUTS = ("q", "k", "v", *attention.FWD_OPTIONAL_INPUTS)
_FWD_OUTPUTS = ("o", *attention.FWD_OPTIONAL_OUTPUTS)
_BWD_INPUTS = ("q", "k", "v", "o", "do", "stats", "scale", "attn_mask", "seq_len_q", "seq_len_kv", "seed",
               "offset", "dropout_mask", "dropout_scale", "dropout_scale_inv")
_BWD_OUTPUTS = ("dq", "dk", "dv", "dbias")


@dataclass(frozen=True)
class SdpaOutputs:
    o: Tensor
    stats: Tensor | None


@dataclass(frozen=True)
class SdpaBackwardOutputs:
    dq: Tensor
    dk: Tensor
    dv: Tensor
    dbias: Tensor | None


def _masking(causal: bool, alignment: str, left_bound: int | None, right_bound: int | None) -> dict[str, Any]:
    if alignment not in attention.DIAGONAL_ALIGNMENTS:
        raise ValueError(f"diagonal alignment must be one of {attention.DIAGONAL_ALIGNMENTS}, not {alignment!r}")
    return {"causal_mask": causal, "causal_mask_bottom_right": False, "left_bound": left_bound,
            "right_bound": right_bound, "diagonal_alignment": alignment}


class AttentionBuilder:
    """``sdpa`` and ``sdpa_backward`` for GraphBuilder (which supplies _output/_node/_name)."""

    def _like(self, name: str, dims: list[int], like: Tensor, dtype: str | None) -> Tensor:
        from hipdnn_trace.graph.layout import packed_strides, stride_order

        strides = packed_strides(dims, stride_order(like.strides))
        return self._add(name, dims, strides, dtype or self.io, False)   # type: ignore[attr-defined]

    def sdpa(self, q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, alignment: str = "TOP_LEFT",
             left_bound: int | None = None, right_bound: int | None = None, scale: float | None = None,
             attn_mask: Tensor | None = None, seq_len_q: Tensor | None = None,
             seq_len_kv: Tensor | None = None, page_table_k: Tensor | None = None,
             page_table_v: Tensor | None = None, max_seq_len_kv: int | None = None,
             sink: Tensor | None = None, stats: bool = False, name: str | None = None,
             out: str = "output", dtype: str | None = None, compute: str | None = "float") -> SdpaOutputs:
        """Attention forward. q/k/v in BHSD dims (any strides); the output takes q's
        stride order with v's head dim; ``stats`` adds the float [B, H, Sq, 1] log-sum-exp."""
        node = self._name("sdpa", name)   # type: ignore[attr-defined]
        b, h, sq, _ = q.dims
        o = self._like(out, [b, h, sq, v.dims[3]], q, dtype)
        st = self._add(f"{out}_stats", [b, h, sq, 1], [h * sq, sq, 1, 1], "float", False) if stats else None  # type: ignore[attr-defined]
        given = {"q": q, "k": k, "v": v, "attn_mask": attn_mask, "seq_len_q": seq_len_q,
                 "seq_len_kv": seq_len_kv, "page_table_k": page_table_k, "page_table_v": page_table_v,
                 "sink_token": sink}
        inputs = {p: given.get(p) for p in _FWD_INPUTS}
        outputs = {p: {"o": o, "stats": st}.get(p) for p in _FWD_OUTPUTS}
        params = {"generate_stats": True if stats else None, "alibi_mask": False,
                  "padding_mask": seq_len_q is not None or seq_len_kv is not None,
                  **_masking(causal, alignment, left_bound, right_bound), "dropout_probability": None,
                  "attn_scale_value": scale, "max_seq_len_kv": max_seq_len_kv,
                  "mma_core_mode": "UNSET", "implementation": "AUTO"}
        order = ("generate_stats", "alibi_mask", "padding_mask", "causal_mask", "causal_mask_bottom_right",
                 "dropout_probability", "attn_scale_value", "left_bound", "right_bound", "max_seq_len_kv",
                 "diagonal_alignment", "mma_core_mode", "implementation")
        self._node(attention.SDPA, node, inputs, outputs, {k_: params[k_] for k_ in order}, compute)  # type: ignore[attr-defined]
        return SdpaOutputs(o, st)

    def sdpa_backward(self, q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor, stats: Tensor, *,
                      causal: bool = False, alignment: str = "TOP_LEFT", left_bound: int | None = None,
                      right_bound: int | None = None, scale: float | None = None,
                      attn_mask: Tensor | None = None, seq_len_q: Tensor | None = None,
                      seq_len_kv: Tensor | None = None, dbias: bool = False, name: str | None = None,
                      dtype: str | None = None, compute: str | None = "float") -> SdpaBackwardOutputs:
        """Attention backward: dq, dk, dv shaped like q, k, v (and dbias like attn_mask)."""
        node = self._name("sdpa_backward", name)   # type: ignore[attr-defined]
        dq = self._like("grad_query", list(q.dims), q, dtype)
        dk = self._like("grad_key", list(k.dims), k, dtype)
        dv = self._like("grad_value", list(v.dims), v, dtype)
        db = None
        if dbias:
            if attn_mask is None:
                raise ValueError("dbias needs an additive attn_mask")
            db = self._like("grad_bias", list(attn_mask.dims), attn_mask, attn_mask.data_type)
        given = {"q": q, "k": k, "v": v, "o": o, "do": do, "stats": stats, "attn_mask": attn_mask,
                 "seq_len_q": seq_len_q, "seq_len_kv": seq_len_kv}
        inputs = {p: given.get(p) for p in _BWD_INPUTS}
        outputs = {"dq": dq, "dk": dk, "dv": dv, "dbias": db}
        params = {"alibi_mask": False, "padding_mask": seq_len_q is not None or seq_len_kv is not None,
                  "causal_mask": causal, "causal_mask_bottom_right": False, "dropout_probability": None,
                  "attn_scale_value": scale, "left_bound": left_bound, "right_bound": right_bound,
                  "diagonal_alignment": alignment}
        self._node(attention.SDPA_BACKWARD, node, inputs, outputs, params, compute)   # type: ignore[attr-defined]
        return SdpaBackwardOutputs(dq, dk, dv, db)

"""Builder methods for MoE grouped matmul nodes. Mixed into GraphBuilder.

Layout as hipDNN's writer (flatbuffers_sdk ``json/MoeGroupedMatmulAttributes.hpp``): ports under
``inputs``/``outputs``, unset optional ports omitted, ``mode`` (lower case) and ``top_k`` on the
node itself (docs/hipdnn-format.md 2.11).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hipdnn_trace.graph import moe

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Tensor


class MoeBuilder:
    """``moe_grouped_matmul`` and ``moe_grouped_matmul_backward`` for GraphBuilder."""

    def moe_grouped_matmul(self, token: Tensor, weight: Tensor, first_token_offset: Tensor, *,
                           mode: str = "NONE", top_k: int = 0, token_index: Tensor | None = None,
                           token_ks: Tensor | None = None, name: str | None = None, out: str = "output",
                           dtype: str | None = None, compute: str | None = None) -> Tensor:
        """token [1, T, K] x weight [E, K, N] per expert group -> output [1, rows, N] (rows: T, or the
        token_index length under GATHER)."""
        if mode not in moe.MODES:
            raise ValueError(f"MoE mode must be one of {moe.MODES}, not {mode!r}")
        node = self._name("moe_grouped_matmul", name)   # type: ignore[attr-defined]
        rows = token_index.dims[1] if mode == "GATHER" and token_index is not None else token.dims[1]
        y = self._output(out, [1, rows, weight.dims[2]], None, dtype=dtype, virtual=False,   # type: ignore[attr-defined]
                         layout=None)
        inputs = {"token": token, "weight": weight, "first_token_offset": first_token_offset,
                  "token_index": token_index, "token_ks": token_ks}
        self._node(moe.MOE, node, {p: t for p, t in inputs.items() if t is not None},   # type: ignore[attr-defined]
                   {"output": y}, {"mode": mode.lower(), "top_k": top_k}, compute)
        return y

    def moe_grouped_matmul_backward(self, doutput: Tensor, token: Tensor, first_token_offset: Tensor, *,
                                    experts: int, name: str | None = None, out: str = "dweight",
                                    dtype: str | None = None, strides: list[int] | None = None,
                                    compute: str | None = None) -> Tensor:
        """dweight [E, K, N] (column-major per expert by default, as hipDNN infers it)."""
        node = self._name("moe_grouped_matmul_backward", name)   # type: ignore[attr-defined]
        k, n = token.dims[2], doutput.dims[2]
        dweight = self._add(out, [experts, k, n], strides or [k * n, 1, k], dtype or self.io,   # type: ignore[attr-defined]
                            False)
        self._node(moe.MOE_BACKWARD, node,   # type: ignore[attr-defined]
                   {"doutput": doutput, "token": token, "first_token_offset": first_token_offset},
                   {"dweight": dweight}, {}, compute)
        return dweight

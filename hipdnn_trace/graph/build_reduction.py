"""Builder method for reduction nodes. Mixed into GraphBuilder.

Keys flat on the node, as hipDNN writes them (docs/hipdnn-format.md 2.8)."""

from __future__ import annotations

from collections.abc import Sequence

from hipdnn_trace.graph.build_base import BuilderBase
from hipdnn_trace.graph.model import Tensor


class ReductionBuilder(BuilderBase):
    """``reduction`` for GraphBuilder."""

    def reduction(self, mode: str, x: Tensor, out_dims: Sequence[int], *, deterministic: bool = False,
                  name: str | None = None, out: str | None = None, virtual: bool = False,
                  dtype: str | None = None, layout: str | None = None,
                  compute: str | None = None) -> Tensor:
        """Reduce x to ``out_dims`` (each dim kept or 1). ``mode`` as hipDNN spells it
        (``add``, ``max``, ``avg``, ``norm2``...)."""
        node = self._name("reduction", name)
        y = self._output(out or f"{node}_out", out_dims, x, dtype=dtype, virtual=virtual, layout=layout)
        self._node("ReductionAttributes", node, {"in": x}, {"out": y},
                   {"mode": mode, "is_deterministic": deterministic}, compute)
        return y

"""Builder method for matmul nodes. Mixed into GraphBuilder."""

from __future__ import annotations

from hipdnn_trace.graph import matmul as matmul_spec
from hipdnn_trace.graph.build_base import BuilderBase
from hipdnn_trace.graph.model import Tensor


class MatmulBuilder(BuilderBase):
    """``matmul`` for GraphBuilder."""

    def matmul(self, a: Tensor, b: Tensor, *, name: str | None = None, out: str | None = None,
               virtual: bool = False, dtype: str | None = None, layout: str | None = None,
               compute: str | None = None) -> Tensor:
        """c = a @ b over the last two dims; batch dims follow hipDNN's broadcast rule.
        Transposes are strides on ``a`` / ``b`` (``b.tensor(..., strides=...)``)."""
        self._own(a, "matmul a")
        self._own(b, "matmul b")
        if len(a.dims) != len(b.dims) or len(a.dims) < 2:
            raise ValueError(f"matmul needs a and b of one rank >= 2, got {list(a.dims)}, {list(b.dims)}")
        batch = matmul_spec.matmul_batch_dims(a.dims[:-2], b.dims[:-2])
        if batch is None:
            raise ValueError(f"matmul batch dims {list(a.dims[:-2])} and {list(b.dims[:-2])} do not broadcast")
        node = self._name("matmul", name)
        c = self._output(out or f"{node}_c", (*batch, a.dims[-2], b.dims[-1]), None,
                         dtype=dtype, virtual=virtual, layout=layout)
        self._node("MatmulAttributes", node, {"a": a, "b": b}, {"c": c}, {}, compute)
        return c

"""Builder methods for block-scale quantize / dequantize nodes. Mixed into GraphBuilder.

Layout as hipDNN's JSON utilities write them (docs/hipdnn-format.md 2.1, 2.11): ports under
``inputs``/``outputs``, options on the node itself; quantize's ``axis`` only when given.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import ceil
from typing import TYPE_CHECKING, Any

from hipdnn_trace.graph import blockscale

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Tensor


class BlockScaleBuilder:
    """``block_quantize`` and ``block_dequantize`` for GraphBuilder."""

    def block_quantize(self, x: Tensor, block_size: int, *, y_dtype: str, scale_dtype: str, axis: int | None = None,
                       transpose: bool = False, name: str | None = None) -> tuple[Tensor, Tensor]:
        """x -> (y in ``y_dtype``, one ``scale_dtype`` scale per block of ``axis``)."""
        node = self._name("block_quantize", name)   # type: ignore[attr-defined]
        a = len(x.dims) - 1 if axis is None else axis % len(x.dims)
        y = self._output("y", x.dims, x, dtype=y_dtype, virtual=False, layout=None)   # type: ignore[attr-defined]
        scale_dims = [ceil(d / block_size) if i == a else d for i, d in enumerate(x.dims)]
        scale = self._output("scale", scale_dims, x, dtype=scale_dtype, virtual=False,   # type: ignore[attr-defined]
                             layout=None)
        params: dict[str, Any] = {"block_size": block_size}
        if axis is not None:
            params["axis"] = axis
        params["transpose"] = transpose
        self._node(blockscale.QUANTIZE, node, {"x": x}, {"y": y, "scale": scale}, params, None)   # type: ignore[attr-defined]
        return y, scale

    def block_dequantize(self, x: Tensor, scale: Tensor, block_size: Sequence[int], *, negative: bool = False,
                         name: str | None = None, out: str = "y", virtual: bool = False,
                         dtype: str | None = None) -> Tensor:
        """y = x * scale per block; ``block_size`` lists the block of each trailing dim of x."""
        node = self._name("block_dequantize", name)   # type: ignore[attr-defined]
        y = self._output(out, x.dims, x, dtype=dtype, virtual=virtual, layout=None)   # type: ignore[attr-defined]
        self._node(blockscale.DEQUANTIZE, node, {"x": x, "scale": scale}, {"y": y},   # type: ignore[attr-defined]
                   {"block_size": list(block_size), "is_negative_scale": negative}, None)
        return y

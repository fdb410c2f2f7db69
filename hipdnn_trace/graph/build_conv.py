"""Builder methods for convolution nodes (forward, dgrad, wgrad). Mixed into GraphBuilder.

Options under ``parameters`` as hipDNN writes them (docs/hipdnn-format.md 2.1, 2.3).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hipdnn_trace.graph import conv as conv_spec
from hipdnn_trace.graph.build_base import BuilderBase
from hipdnn_trace.graph.model import Tensor


def _spatial(value: int | Sequence[int], count: int, what: str) -> list[int]:
    """An int (same for every spatial dim) or one int per spatial dim."""
    if isinstance(value, int):
        return [value] * count
    values = [int(v) for v in value]
    if len(values) != count:
        raise ValueError(f"{what} needs {count} values (one per spatial dim), got {values}")
    return values


class ConvBuilder(BuilderBase):
    """``conv_fwd``, ``conv_dgrad`` and ``conv_wgrad`` for GraphBuilder."""

    def _conv_params(self, nsp: int, pad: int | Sequence[int], post_pad: int | Sequence[int] | None,
                     stride: int | Sequence[int], dilation: int | Sequence[int], mode: str) -> dict[str, Any]:
        pre = _spatial(pad, nsp, "pad")
        return {
            "pre_padding": pre,
            "post_padding": pre if post_pad is None else _spatial(post_pad, nsp, "post_pad"),
            "stride": _spatial(stride, nsp, "stride"),
            "dilation": _spatial(dilation, nsp, "dilation"),
            "conv_mode": mode,
        }

    def conv_fwd(self, x: Tensor, w: Tensor, *, pad: int | Sequence[int] = 0,
                 post_pad: int | Sequence[int] | None = None, stride: int | Sequence[int] = 1,
                 dilation: int | Sequence[int] = 1, mode: str = "CROSS_CORRELATION",
                 name: str | None = None, out: str | None = None, virtual: bool = False,
                 dtype: str | None = None, layout: str | None = None,
                 compute: str | None = None) -> Tensor:
        """y = conv(x, w). Groups follow from x's channels / w's dim 1, as in hipDNN."""
        self._own(x, "conv_fwd x")
        self._own(w, "conv_fwd w")
        nsp = len(x.dims) - 2
        if nsp < 1 or len(w.dims) != len(x.dims):
            raise ValueError(f"conv_fwd needs x and w of one rank >= 3, got {list(x.dims)}, {list(w.dims)}")
        p = self._conv_params(nsp, pad, post_pad, stride, dilation, mode)
        spatial = conv_spec.conv_output_dims(x.dims[2:], w.dims[2:], p["pre_padding"], p["post_padding"],
                                       p["stride"], p["dilation"])
        node = self._name("conv_fwd", name)
        y = self._output(out or f"{node}_y", (x.dims[0], w.dims[0], *spatial), x,
                         dtype=dtype, virtual=virtual, layout=layout)
        self._node("ConvolutionFwdAttributes", node, {"x": x, "w": w}, {"y": y}, p, compute)
        return y

    def conv_dgrad(self, dy: Tensor, w: Tensor, *, x_dims: Sequence[int], pad: int | Sequence[int] = 0,
                   post_pad: int | Sequence[int] | None = None, stride: int | Sequence[int] = 1,
                   dilation: int | Sequence[int] = 1, mode: str = "CROSS_CORRELATION",
                   name: str | None = None, out: str | None = None, virtual: bool = False,
                   dtype: str | None = None, layout: str | None = None,
                   compute: str | None = None) -> Tensor:
        """dx of a convolution whose forward input had ``x_dims`` (stride makes it ambiguous)."""
        self._own(dy, "conv_dgrad dy")
        self._own(w, "conv_dgrad w")
        p = self._conv_params(len(x_dims) - 2, pad, post_pad, stride, dilation, mode)
        node = self._name("conv_dgrad", name)
        dx = self._output(out or f"{node}_dx", x_dims, dy, dtype=dtype, virtual=virtual, layout=layout)
        self._node("ConvolutionBwdAttributes", node, {"dy": dy, "w": w}, {"dx": dx}, p, compute)
        return dx

    def conv_wgrad(self, x: Tensor, dy: Tensor, *, w_dims: Sequence[int], pad: int | Sequence[int] = 0,
                   post_pad: int | Sequence[int] | None = None, stride: int | Sequence[int] = 1,
                   dilation: int | Sequence[int] = 1, mode: str = "CROSS_CORRELATION",
                   name: str | None = None, out: str | None = None, virtual: bool = False,
                   dtype: str | None = None, layout: str | None = None,
                   compute: str | None = None) -> Tensor:
        """dw of a convolution with weight dims ``w_dims`` (groups = C / w_dims[1])."""
        self._own(x, "conv_wgrad x")
        self._own(dy, "conv_wgrad dy")
        p = self._conv_params(len(x.dims) - 2, pad, post_pad, stride, dilation, mode)
        node = self._name("conv_wgrad", name)
        dw = self._output(out or f"{node}_dw", w_dims, x, dtype=dtype, virtual=virtual, layout=layout)
        self._node("ConvolutionWrwAttributes", node, {"x": x, "dy": dy}, {"dw": dw}, p, compute)
        return dw

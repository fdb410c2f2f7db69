"""Builder methods for pooling (resample) nodes. Mixed into GraphBuilder.

Layout as hipDNN's sample ``sample_resample_fwd.json`` (@ 6c40e006): ports under
``inputs``/``outputs``, options under ``attributes`` with upper-case enum names; the index
port and ``generate_index`` only when an index is asked for (the C++ writer omits them too).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hipdnn_trace.graph import resample

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Tensor


def _per_axis(value: int | Sequence[int], nsp: int, what: str) -> list[int]:
    values = [value] * nsp if isinstance(value, int) else list(value)
    if len(values) != nsp:
        raise ValueError(f"{what} needs {nsp} values, got {values}")
    return values


class ResampleBuilder:
    """``pool`` and ``pool_backward`` for GraphBuilder."""

    def _pool_params(self, nsp: int, mode: str, window: Any, stride: Any, pad: Any, post_pad: Any,
                     padding_mode: str) -> dict[str, Any]:
        if mode not in resample.MODES or padding_mode not in resample.PADDING_MODES:
            raise ValueError(f"mode must be one of {resample.MODES}, padding_mode one of {resample.PADDING_MODES}")
        return {"pre_padding": _per_axis(pad, nsp, "pad"),
                "post_padding": _per_axis(pad if post_pad is None else post_pad, nsp, "post_pad"),
                "stride": _per_axis(stride, nsp, "stride"), "window": _per_axis(window, nsp, "window"),
                "resample_mode": mode, "padding_mode": padding_mode}

    def pool(self, x: Tensor, mode: str, window: int | Sequence[int], *, stride: int | Sequence[int] = 1,
             pad: int | Sequence[int] = 0, post_pad: int | Sequence[int] | None = None,
             padding_mode: str = "ZERO_PAD", index_dtype: str | None = None, name: str | None = None,
             out: str = "y") -> tuple[Tensor, Tensor | None]:
        """Pool x [N, C, spatial...]; with ``index_dtype`` (MAXPOOL) also the argmax index."""
        nsp = len(x.dims) - 2
        params = self._pool_params(nsp, mode, window, stride, pad, post_pad, padding_mode)
        p = resample.Pooling(mode, padding_mode, *(tuple(params[k]) for k in ("window", "stride", "pre_padding",
                                                                             "post_padding")))
        dims = [*x.dims[:2], *resample.output_dims(tuple(x.dims[2:]), p)]
        node = self._name("resample", name)   # type: ignore[attr-defined]
        y = self._output(out, dims, x, dtype=None, virtual=False, layout=None)   # type: ignore[attr-defined]
        outputs: dict[str, Any] = {"y": y}
        if index_dtype is not None:
            outputs["index"] = self._output("index", dims, x, dtype=index_dtype, virtual=False,   # type: ignore[attr-defined]
                                            layout=None)
            params["generate_index"] = True
        self._node(resample.RESAMPLE_FWD, node, {"x": x}, outputs, params, None)   # type: ignore[attr-defined]
        return y, outputs.get("index")

    def pool_backward(self, dy: Tensor, x_dims: Sequence[int], mode: str, window: int | Sequence[int], *,
                      stride: int | Sequence[int] = 1, pad: int | Sequence[int] = 0,
                      post_pad: int | Sequence[int] | None = None, padding_mode: str = "ZERO_PAD",
                      index: Tensor | None = None, name: str | None = None, out: str = "dx") -> Tensor:
        """dx of a pooling whose input had ``x_dims`` (MAXPOOL needs the forward's ``index``)."""
        params = self._pool_params(len(x_dims) - 2, mode, window, stride, pad, post_pad, padding_mode)
        node = self._name("resample_backward", name)   # type: ignore[attr-defined]
        dx = self._output(out, list(x_dims), dy, dtype=None, virtual=False, layout=None)   # type: ignore[attr-defined]
        inputs: dict[str, Any] = {"dy": dy}
        if index is not None:
            inputs["index"] = index
        self._node(resample.RESAMPLE_BWD, node, inputs, {"dx": dx}, params, None)   # type: ignore[attr-defined]
        return dx

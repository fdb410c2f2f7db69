"""Builder method for pointwise nodes. Mixed into GraphBuilder."""

from __future__ import annotations

from hipdnn_trace.graph import pointwise as pointwise_spec
from hipdnn_trace.graph.build_base import BuilderBase
from hipdnn_trace.graph.model import Tensor


class PointwiseBuilder(BuilderBase):
    """``pointwise`` for GraphBuilder."""

    def pointwise(self, mode: str, a: Tensor, b: Tensor | None = None, c: Tensor | None = None, *,
                  relu_lower_clip: float | None = None, relu_upper_clip: float | None = None,
                  relu_lower_clip_slope: float | None = None, axis: int | None = None,
                  swish_beta: float | None = None, elu_alpha: float | None = None,
                  softplus_beta: float | None = None, name: str | None = None,
                  out: str | None = None, virtual: bool = False, dtype: str | None = None,
                  layout: str | None = None, compute: str | None = None) -> Tensor:
        """out = mode(a[, b[, c]]), inputs broadcast to the output (numpy rule).

        Every pointwise key is written, null when unset: hipDNN's reader requires them all.
        """
        operands = [t for t in (a, b, c) if t is not None]
        for t in operands:
            self._own(t, f"pointwise {mode} input")
        if c is not None and b is None:
            raise ValueError("pointwise: in_2 given without in_1")
        shape = pointwise_spec.broadcast_shape([t.dims for t in operands])
        if shape is None:
            raise ValueError(f"pointwise {mode}: dims {[list(t.dims) for t in operands]} do not broadcast")
        like = next((t for t in operands if tuple(t.dims) == shape), a)
        node = self._name(mode, name)
        y = self._output(out or f"{node}_out", shape, like, dtype=dtype, virtual=virtual, layout=layout)
        params = {"operation": mode, "relu_lower_clip": relu_lower_clip, "relu_upper_clip": relu_upper_clip,
                  "relu_lower_clip_slope": relu_lower_clip_slope, "axis_tensor_uid": axis,
                  "swish_beta": swish_beta, "elu_alpha": elu_alpha, "softplus_beta": softplus_beta}
        assert set(params) == set(pointwise_spec.POINTWISE_OPTIONS)
        self._node("PointwiseAttributes", node, {"in_0": a, "in_1": b, "in_2": c},
                   {"out_0": y}, params, compute)
        return y

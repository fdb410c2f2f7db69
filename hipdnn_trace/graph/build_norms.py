"""Builder methods for the normalization family (batchnorm, layernorm, RMSNorm). Mixed into GraphBuilder.

Statistics ports as hipDNN writes them: batchnorm per channel, layernorm/RMSNorm per normalized row;
unset RMSNorm ports omitted (docs/hipdnn-format.md 2.5-2.7)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hipdnn_trace.graph.build_base import BuilderBase
from hipdnn_trace.graph.model import Tensor


@dataclass(frozen=True)
class BatchnormOutputs:
    y: Tensor
    mean: Tensor | None
    inv_variance: Tensor | None
    next_running_mean: Tensor | None
    next_running_variance: Tensor | None


@dataclass(frozen=True)
class BatchnormBackwardOutputs:
    dx: Tensor
    dscale: Tensor
    dbias: Tensor


@dataclass(frozen=True)
class LayernormOutputs:
    y: Tensor
    mean: Tensor | None
    inv_variance: Tensor | None


@dataclass(frozen=True)
class RMSNormOutputs:
    y: Tensor
    inv_rms: Tensor | None


class NormBuilder(BuilderBase):
    """Batchnorm, layernorm and RMSNorm (forward and backward) for GraphBuilder."""

    def _per_channel(self, x: Tensor, name: str, dtype: str | None, virtual: bool = False) -> Tensor:
        dims = (1, x.dims[1], *([1] * (len(x.dims) - 2)))
        return self._output(name, dims, None, dtype=dtype or x.data_type, virtual=virtual, layout=None)

    def _epsilon(self, value: float | Tensor, node: str) -> Tensor:
        if isinstance(value, Tensor):
            self._own(value, f"{node} epsilon")
            return value
        return self.scalar(f"{node}_epsilon", float(value))

    def batchnorm_inference(self, x: Tensor, mean: Tensor, inv_variance: Tensor, scale: Tensor,
                            bias: Tensor, *, name: str | None = None, out: str | None = None,
                            virtual: bool = False, dtype: str | None = None, layout: str | None = None,
                            compute: str | None = None) -> Tensor:
        """y = scale * (x - mean) * inv_variance + bias, per channel (dim 1); no epsilon."""
        node = self._name("batchnorm_inference", name)
        y = self._output(out or f"{node}_y", x.dims, x, dtype=dtype, virtual=virtual, layout=layout)
        self._node("BatchnormInferenceAttributes", node,
                   {"x": x, "mean": mean, "inv_variance": inv_variance, "scale": scale, "bias": bias},
                   {"y": y}, {}, compute)
        return y

    def batchnorm_inference_variance(self, x: Tensor, mean: Tensor, variance: Tensor, scale: Tensor, bias: Tensor,
                                     *, epsilon: float | Tensor = 1e-5, name: str | None = None,
                                     out: str | None = None, compute: str | None = None) -> Tensor:
        """y = scale * (x - mean) / sqrt(variance + epsilon) + bias (hipDNN's VarianceExt form)."""
        node = self._name("batchnorm_inference", name)
        y = self._output(out or f"{node}_y", x.dims, x, dtype=None, virtual=False, layout=None)
        self._node("BatchnormInferenceAttributesVarianceExt", node,
                   {"x": x, "mean": mean, "variance": variance, "scale": scale, "bias": bias,
                    "epsilon": self._epsilon(epsilon, node)}, {"y": y}, {}, compute)
        return y

    def batchnorm(self, x: Tensor, scale: Tensor, bias: Tensor, *, epsilon: float | Tensor = 1e-5,
                  momentum: float | Tensor | None = None, prev_running_mean: Tensor | None = None,
                  prev_running_variance: Tensor | None = None, saved_stats: bool = True,
                  stats_dtype: str | None = None, name: str | None = None, out: str | None = None,
                  virtual: bool = False, dtype: str | None = None, layout: str | None = None,
                  compute: str | None = None) -> BatchnormOutputs:
        """Training batchnorm. Epsilon and momentum are by-value scalars (floats are wrapped);
        running stats are produced when both previous ones are given (momentum then
        defaults to 0.1). Statistics tensors take ``stats_dtype`` (default: scale's type)."""
        node = self._name("batchnorm", name)
        eps = self._epsilon(epsilon, node)
        running = prev_running_mean is not None or prev_running_variance is not None
        if running and (prev_running_mean is None or prev_running_variance is None):
            raise ValueError("batchnorm: give both prev_running_mean and prev_running_variance")
        mom: Tensor | None
        if isinstance(momentum, Tensor):
            self._own(momentum, f"{node} momentum")
            mom = momentum
        elif momentum is not None or running:
            mom = self.scalar(f"{node}_momentum", 0.1 if momentum is None else float(momentum))
        else:
            mom = None
        sdt = stats_dtype or scale.data_type
        y = self._output(out or f"{node}_y", x.dims, x, dtype=dtype, virtual=virtual, layout=layout)
        mean = self._per_channel(x, f"{node}_mean", sdt) if saved_stats else None
        inv_var = self._per_channel(x, f"{node}_inv_variance", sdt) if saved_stats else None
        next_mean = self._per_channel(x, f"{node}_next_running_mean", sdt) if running else None
        next_var = self._per_channel(x, f"{node}_next_running_variance", sdt) if running else None
        self._node("BatchnormAttributes", node,
                   {"x": x, "scale": scale, "bias": bias, "epsilon": eps,
                    "prev_running_mean": prev_running_mean,
                    "prev_running_variance": prev_running_variance, "momentum": mom,
                    "peer_stats": ()},
                   {"y": y, "mean": mean, "inv_variance": inv_var,
                    "next_running_mean": next_mean, "next_running_variance": next_var}, {}, compute)
        return BatchnormOutputs(y, mean, inv_var, next_mean, next_var)

    def batchnorm_backward(self, dy: Tensor, x: Tensor, scale: Tensor, *, mean: Tensor | None = None,
                           inv_variance: Tensor | None = None, stats_dtype: str | None = None,
                           name: str | None = None, virtual: bool = False, dtype: str | None = None,
                           layout: str | None = None, compute: str | None = None) -> BatchnormBackwardOutputs:
        """dx, dscale, dbias of training batchnorm from the saved mean / inv_variance."""
        node = self._name("batchnorm_backward", name)
        dx = self._output(f"{node}_dx", x.dims, x, dtype=dtype, virtual=virtual, layout=layout)
        sdt = stats_dtype or scale.data_type
        dscale = self._per_channel(x, f"{node}_dscale", sdt)
        dbias = self._per_channel(x, f"{node}_dbias", sdt)
        self._node("BatchnormBackwardAttributes", node,
                   {"dy": dy, "x": x, "scale": scale, "mean": mean, "inv_variance": inv_variance,
                    "peer_stats": ()},
                   {"dx": dx, "dscale": dscale, "dbias": dbias}, {}, compute)
        return BatchnormBackwardOutputs(dx, dscale, dbias)

    def _stats(self, x: Tensor, start: int, name: str, dtype: str) -> Tensor:
        dims = (*x.dims[:start], *([1] * (len(x.dims) - start)))
        return self._output(name, dims, None, dtype=dtype, virtual=False, layout=None)

    def layernorm(self, x: Tensor, scale: Tensor, bias: Tensor | None = None, *,
                  epsilon: float | Tensor = 1e-5, normalized_dim_count: int = 1,
                  phase: str = "TRAINING", stats_dtype: str | None = None, name: str | None = None,
                  out: str | None = None, virtual: bool = False, dtype: str | None = None,
                  layout: str | None = None, compute: str | None = None) -> LayernormOutputs:
        """Layernorm over the last ``normalized_dim_count`` dims; saved mean / inv_variance
        ([..., 1, 1] per batch position) in TRAINING only."""
        if phase not in ("TRAINING", "INFERENCE"):
            raise ValueError(f"layernorm phase must be TRAINING or INFERENCE, not {phase!r}")
        node = self._name("layernorm", name)
        eps = self._epsilon(epsilon, node)
        y = self._output(out or f"{node}_y", x.dims, x, dtype=dtype, virtual=virtual, layout=layout)
        start = len(x.dims) - normalized_dim_count
        sdt = stats_dtype or self.intermediate
        mean = self._stats(x, start, f"{node}_mean", sdt) if phase == "TRAINING" else None
        inv_var = self._stats(x, start, f"{node}_inv_variance", sdt) if phase == "TRAINING" else None
        self._node("LayernormAttributes", node,
                   {"x": x, "scale": scale, "bias": bias, "epsilon": eps},
                   {"y": y, "mean": mean, "inv_variance": inv_var},
                   {"normalized_dim_count": normalized_dim_count, "forward_phase": phase}, compute)
        return LayernormOutputs(y, mean, inv_var)

    def rmsnorm(self, x: Tensor, scale: Tensor, bias: Tensor | None = None, *,
                epsilon: float | Tensor = 1e-5, phase: str = "TRAINING", stats_dtype: str | None = None,
                name: str | None = None, out: str | None = None, virtual: bool = False,
                dtype: str | None = None, layout: str | None = None,
                compute: str | None = None) -> RMSNormOutputs:
        """RMSNorm; the normalized dims are the trailing dims where ``scale`` (same rank as
        x, 1s in batch positions) matches x, as in hipDNN's CPU reference. inv_rms in TRAINING."""
        if phase not in ("TRAINING", "INFERENCE"):
            raise ValueError(f"rmsnorm phase must be TRAINING or INFERENCE, not {phase!r}")
        if len(scale.dims) != len(x.dims):
            raise ValueError(f"rmsnorm scale {list(scale.dims)} needs x's rank {len(x.dims)}")
        start = len(x.dims)
        while start > 0 and scale.dims[start - 1] == x.dims[start - 1]:
            start -= 1
        start = max(start, 1)
        node = self._name("rmsnorm", name)
        eps = self._epsilon(epsilon, node)
        y = self._output(out or f"{node}_y", x.dims, x, dtype=dtype, virtual=virtual, layout=layout)
        inv_rms = (self._stats(x, start, f"{node}_inv_rms", stats_dtype or self.intermediate)
                   if phase == "TRAINING" else None)
        inputs: dict[str, Any] = {"x": x, "scale": scale, "epsilon": eps}
        if bias is not None:               # hipDNN omits unset RMSNorm ports (not null)
            inputs["bias"] = bias
        outputs: dict[str, Any] = {"y": y}
        if inv_rms is not None:
            outputs["inv_rms"] = inv_rms
        self._node("RMSNormAttributes", node, inputs, outputs, {"forward_phase": phase}, compute)
        return RMSNormOutputs(y, inv_rms)

    def layernorm_backward(self, dy: Tensor, x: Tensor, scale: Tensor, mean: Tensor, inv_variance: Tensor, *,
                           normalized_dim_count: int = 1, name: str | None = None,
                           compute: str | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Layernorm backward with saved statistics: (dx, dscale, dbias), hipDNN's sample layout."""
        node = self._name("layernorm_backward", name)
        dx = self._output("dx", x.dims, x, dtype=None, virtual=False, layout=None)
        dscale = self._output("dscale", scale.dims, scale, dtype=scale.data_type, virtual=False, layout=None)
        dbias = self._output("dbias", scale.dims, scale, dtype=scale.data_type, virtual=False, layout=None)
        self._node("LayernormBackwardAttributes", node,
                   {"dy": dy, "x": x, "scale": scale, "mean": mean, "inv_variance": inv_variance},
                   {"dx": dx, "dscale": dscale, "dbias": dbias},
                   {"normalized_dim_count": normalized_dim_count}, compute)
        return dx, dscale, dbias

    def rmsnorm_backward(self, dy: Tensor, x: Tensor, scale: Tensor, inv_rms: Tensor, *, name: str | None = None,
                         compute: str | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """RMSNorm backward with the saved inv_rms: (dx, dscale, dbias); no options (hipDNN's layout)."""
        node = self._name("rmsnorm_backward", name)
        dx = self._output("dx", x.dims, x, dtype=None, virtual=False, layout=None)
        dscale = self._output("dscale", scale.dims, scale, dtype=scale.data_type, virtual=False, layout=None)
        dbias = self._output("dbias", scale.dims, scale, dtype=scale.data_type, virtual=False, layout=None)
        self._node("RMSNormBackwardAttributes", node, {"dy": dy, "x": x, "scale": scale, "inv_rms": inv_rms},
                   {"dx": dx, "dscale": dscale, "dbias": dbias}, {}, compute)
        return dx, dscale, dbias

"""Normalization nodes (batchnorm, layernorm, RMSNorm, forward and backward) -> ``ops/batchnorm.py``,
``ops/layernorm.py`` and ``ops/rmsnorm.py``; the axis rules come from ``graph/norms.py``."""

from __future__ import annotations

from hipdnn_trace.backends.reference import xp as shim
from hipdnn_trace.backends.reference.nodes._common import Handler, Inputs, Outputs, scalar
from hipdnn_trace.backends.reference.ops._arrays import f64
from hipdnn_trace.backends.reference.ops.batchnorm import batchnorm_backward, batchnorm_inference, batchnorm_train
from hipdnn_trace.backends.reference.ops.layernorm import layernorm, layernorm_backward
from hipdnn_trace.backends.reference.ops.rmsnorm import rmsnorm, rmsnorm_backward
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.model import Graph, Node
from hipdnn_trace.graph.norms import norm_backward_start, norm_forward_phase, rmsnorm_count, rmsnorm_refusal


def _bn_inference(node: Node, graph: Graph, x: Inputs) -> Outputs:
    return {"y": batchnorm_inference(x["x"], x["mean"], x["inv_variance"], x["scale"], x["bias"])}


def _bn_inference_variance(node: Node, graph: Graph, x: Inputs) -> Outputs:
    eps = scalar(x["epsilon"], "batchnorm epsilon")
    variance = f64(x["variance"])
    inv_var = 1.0 / shim.namespace(variance).sqrt(variance + eps)
    return {"y": batchnorm_inference(x["x"], x["mean"], inv_var, x["scale"], x["bias"])}


def _bn_train(node: Node, graph: Graph, x: Inputs) -> Outputs:
    if node.inputs.get("peer_stats"):
        raise UnsupportedError("batchnorm with peer stats (multi-GPU) is not supported by the reference")
    momentum = scalar(x.get("momentum"), "batchnorm momentum")
    out = batchnorm_train(
        x["x"], x["scale"], x["bias"], epsilon=scalar(x["epsilon"], "batchnorm epsilon"),
        momentum=0.1 if momentum is None else momentum,
        prev_running_mean=x.get("prev_running_mean"), prev_running_var=x.get("prev_running_variance"),
    )
    return {"y": out["y"], "mean": out["mean"], "inv_variance": out["inv_variance"],
            "next_running_mean": out["next_running_mean"],
            "next_running_variance": out["next_running_var"]}


def _bn_backward(node: Node, graph: Graph, x: Inputs) -> Outputs:
    if node.inputs.get("peer_stats"):
        raise UnsupportedError("batchnorm backward with peer stats is not supported by the reference")
    # without saved statistics hipDNN's reference recomputes them with its default epsilon
    return batchnorm_backward(x["dy"], x["x"], x["scale"], mean=x.get("mean"),
                              inv_variance=x.get("inv_variance"), epsilon=1e-5)


def _layernorm(node: Node, graph: Graph, x: Inputs) -> Outputs:
    count = node.params.get("normalized_dim_count")
    if not isinstance(count, int) or isinstance(count, bool):
        raise UnsupportedError(f"layernorm node {node.name!r} needs an integer normalized_dim_count")
    out = layernorm(x["x"], x.get("scale"), x.get("bias"),
                    epsilon=scalar(x["epsilon"], "layernorm epsilon"), normalized_dim_count=count)
    if norm_forward_phase(node) == "INFERENCE":
        out = {"y": out["y"]}
    return out


def _rmsnorm(node: Node, graph: Graph, x: Inputs) -> Outputs:
    return rmsnorm(x["x"], x["scale"], x.get("bias"),
                   epsilon=scalar(x["epsilon"], "rmsnorm epsilon"),
                   normalized_dim_count=rmsnorm_count(node, graph))


def _backward_start(node: Node, graph: Graph) -> int:
    start = norm_backward_start(node, graph)
    if start is None:   # the loader's check refuses such graphs; kept for built-in-memory graphs
        raise UnsupportedError(f"{node.op} node {node.name!r}: normalized dims cannot be told")
    return start


def _layernorm_backward(node: Node, graph: Graph, x: Inputs) -> Outputs:
    start = _backward_start(node, graph)
    eps = scalar(x.get("epsilon"), "layernorm epsilon")
    return dict(layernorm_backward(x["dy"], x["x"], x["scale"], normalized_dim_count=x["x"].ndim - start,  # type: ignore[union-attr]
                                   mean=x.get("mean"), inv_variance=x.get("inv_variance"), epsilon=eps))


def _rmsnorm_backward(node: Node, graph: Graph, x: Inputs) -> Outputs:
    return dict(rmsnorm_backward(x["dy"], x["x"], x["scale"], x["inv_rms"],
                                 start=_backward_start(node, graph)))


def check(node: Node, graph: Graph) -> str | None:
    """RMSNorm whose normalized dims the reference cannot tell (graph/norms.py's shared rule)."""
    return rmsnorm_refusal(node, graph) if node.type == "RMSNormAttributes" else None


HANDLERS: dict[str, Handler] = {
    "BatchnormInferenceAttributes": _bn_inference,
    "BatchnormInferenceAttributesVarianceExt": _bn_inference_variance,
    "BatchnormAttributes": _bn_train,
    "BatchnormBackwardAttributes": _bn_backward,
    "LayernormAttributes": _layernorm,
    "RMSNormAttributes": _rmsnorm,
    "LayernormBackwardAttributes": _layernorm_backward,
    "RMSNormBackwardAttributes": _rmsnorm_backward,
}

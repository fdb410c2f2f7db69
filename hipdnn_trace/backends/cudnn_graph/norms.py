"""Batchnorm, layernorm and RMSNorm -> cuDNN's norm calls (or pointwise lowering)."""

from __future__ import annotations

from collections.abc import Sequence

from hipdnn_trace.backends.cudnn_graph.builder import PlanFn, _Builder
from hipdnn_trace.backends.cudnn_graph.geometry import lift
from hipdnn_trace.backends.cudnn_graph.plan_types import EnumValue, OutputDecl
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.model import Node
from hipdnn_trace.graph.norms import norm_forward_phase


def _single(b: _Builder, node: Node, what: str) -> None:
    if node.inputs.get("peer_stats"):
        raise UnsupportedError(f"{node.op} {node.name!r}: peer stats (multi-GPU batchnorm) are not supported")


def batchnorm(b: _Builder, node: Node) -> None:
    """Training batchnorm. The frontend's Python binding (``pygraph.batchnorm``, python/pygraph/norm.cpp)
    takes ``in_running_mean``, ``in_running_var`` and ``momentum`` as required arguments, so a node
    without running statistics gets scratch ones (mean 0, variance 1, its momentum or 0.1) whose
    updated values nobody fetches, as dscale/dbias are made for a backward that does not ask."""
    _single(b, node, "batchnorm")
    i, o = node.inputs, node.outputs
    x = b.tensor(i["x"], "x")
    running = i.get("prev_running_mean") is not None and i.get("prev_running_variance") is not None
    scale = b.tensor(i["scale"], "scale")
    tensors = {"input": x, "scale": scale, "bias": b.tensor(i["bias"], "bias"),
               "epsilon": b.scalar(i["epsilon"], None, "epsilon")}
    if running:
        tensors["in_running_mean"] = b.tensor(i["prev_running_mean"], "prev_running_mean")
        tensors["in_running_var"] = b.tensor(i["prev_running_variance"], "prev_running_variance")
    elif o.get("next_running_mean") is not None or o.get("next_running_variance") is not None:
        raise UnsupportedError(f"batchnorm {node.name!r}: next running stats need prev running stats")
    else:
        tensors["in_running_mean"] = b.constant_like(scale, 0.0, f"{node.name}_scratch_running_mean")
        tensors["in_running_var"] = b.constant_like(scale, 1.0, f"{node.name}_scratch_running_var")
    tensors["momentum"] = b.scalar(i.get("momentum"), 0.1, "momentum")
    y = b.output(o["y"])
    mean = b.output(o.get("mean"), scale, name=f"{node.name}_saved_mean")
    inv = b.output(o.get("inv_variance"), scale, name=f"{node.name}_saved_inv_variance")
    outs: list[str | None] = [y, mean, inv,
                              b.output(o.get("next_running_mean"), scale, name=f"{node.name}_next_running_mean"),
                              b.output(o.get("next_running_variance"), scale, name=f"{node.name}_next_running_var")]
    b.call(node, "batchnorm", tensors, outs)


def batchnorm_inference(b: _Builder, node: Node) -> None:
    i = node.inputs
    if b._composed_bn(node):
        _bn_pointwise(b, node, inv_std=b.tensor(i["inv_variance"], "inv_variance"))
        b.plan.notes.append(f"{node.name}: batchnorm inference on a non-NHWC layout as four fused pointwise ops")
        return
    tensors = {"input": b.tensor(i["x"], "x"), "mean": b.tensor(i["mean"], "mean"),
               "inv_variance": b.tensor(i["inv_variance"], "inv_variance"),
               "scale": b.tensor(i["scale"], "scale"), "bias": b.tensor(i["bias"], "bias")}
    b.call(node, "batchnorm_inference", tensors, [b.output(node.outputs["y"])])


def _bn_pointwise(b: _Builder, node: Node, inv_std: str) -> None:
    """y = (x - mean) * inv_std * scale + bias as fused pointwise ops."""
    i = node.inputs
    x, mean = b.tensor(i["x"], "x"), b.tensor(i["mean"], "mean")
    scale, bias = b.tensor(i["scale"], "scale"), b.tensor(i["bias"], "bias")
    centered = b.virtual(i["x"], f"{node.name}_centered")
    normed = b.virtual(i["x"], f"{node.name}_normed")
    scaled = b.virtual(i["x"], f"{node.name}_scaled")
    b.call(node, "sub", {"a": x, "b": mean}, [centered], suffix="_sub")
    b.call(node, "mul", {"a": centered, "b": inv_std}, [normed], suffix="_mul")
    b.call(node, "mul", {"a": normed, "b": scale}, [scaled], suffix="_scale")
    b.call(node, "add", {"a": scaled, "b": bias}, [b.output(node.outputs["y"])], suffix="_bias")


def batchnorm_inference_variance(b: _Builder, node: Node) -> None:
    """inv_std = rsqrt(variance + eps), then the pointwise batchnorm above."""
    i = node.inputs
    var = b.tensor(i["variance"], "variance")
    eps = b.scalar(i["epsilon"], None, "epsilon")
    var_eps = b.virtual(i["variance"], f"{node.name}_var_eps")
    inv = b.virtual(i["variance"], f"{node.name}_inv_std")
    b.call(node, "add", {"a": var, "b": eps}, [var_eps], suffix="_add_eps")
    b.call(node, "rsqrt", {"input": var_eps}, [inv], suffix="_rsqrt")
    _bn_pointwise(b, node, inv)
    b.plan.notes.append(f"{node.name}: variance-form batchnorm inference as six fused pointwise ops")


def batchnorm_backward(b: _Builder, node: Node) -> None:
    _single(b, node, "batchnorm backward")
    i, o = node.inputs, node.outputs
    if i.get("mean") is None or i.get("inv_variance") is None:
        raise UnsupportedError(f"batchnorm backward {node.name!r}: cuDNN needs the saved mean and inv_variance")
    scale = b.tensor(i["scale"], "scale")
    tensors = {"grad": b.tensor(i["dy"], "dy"), "input": b.tensor(i["x"], "x"), "scale": scale,
               "mean": b.tensor(i["mean"], "mean"), "inv_variance": b.tensor(i["inv_variance"], "inv_variance")}
    outs = [b.output(o["dx"]), b.output(o.get("dscale"), scale, name=f"{node.name}_dscale"),
            b.output(o.get("dbias"), scale, name=f"{node.name}_dbias")]
    b.call(node, "batchnorm_backward", tensors, outs)


def _phase(node: Node, has_stats: bool) -> str:
    """cuDNN needs a definite phase: NOT_SET becomes TRAINING when the node writes statistics."""
    phase = norm_forward_phase(node)
    if phase not in ("INFERENCE", "TRAINING"):
        phase = "TRAINING" if has_stats else "INFERENCE"
    return phase


def _norm_axes_check(b: _Builder, node: Node, x_uid: int, start: int, what: str,
                     scale_uid: int | None, stats: Sequence[int | None]) -> None:
    """cuDNN reads the normalized axes off scale's shape and the stats' shapes."""
    x = b.graph.by_uid[x_uid]
    rank = len(x.dims)
    want_scale = tuple(d if a >= start else 1 for a, d in enumerate(x.dims))
    want_stats = tuple(d if a < start else 1 for a, d in enumerate(x.dims))
    if scale_uid is not None:
        s = b.graph.by_uid[scale_uid].dims
        s_full = (1,) * (rank - len(s)) + tuple(s)
        if s_full != want_scale:
            raise UnsupportedError(f"{what} {node.name!r}: scale {list(s)} must span exactly the normalized "
                                   f"dims {list(x.dims[start:])} for cuDNN")
    for uid in stats:
        if uid is None:
            continue
        st = b.graph.by_uid[uid].dims
        if tuple((1,) * (rank - len(st)) + tuple(st)) != want_stats:
            raise UnsupportedError(f"{what} {node.name!r}: statistics {list(st)} do not match the "
                                   f"per-row shape {list(want_stats)}")


def layernorm(b: _Builder, node: Node) -> None:
    i, o = node.inputs, node.outputs
    count = node.params.get("normalized_dim_count")
    x_t = b.graph.by_uid[i["x"]]
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= len(x_t.dims):
        raise UnsupportedError(f"layernorm {node.name!r}: normalized_dim_count {count!r} is not usable")
    start = len(x_t.dims) - count
    _norm_axes_check(b, node, i["x"], start, "layernorm", i.get("scale"), (o.get("mean"), o.get("inv_variance")))
    phase = _phase(node, o.get("mean") is not None or o.get("inv_variance") is not None)
    if i.get("scale") is None:
        raise UnsupportedError(f"layernorm {node.name!r}: cuDNN needs a scale tensor")
    scale = b.tensor(i["scale"], "scale")
    bias = (b.tensor(i["bias"], "bias") if i.get("bias") is not None
            else b.constant_like(scale, 0.0, f"{node.name}_zero_bias"))
    tensors = {"input": b.tensor(i["x"], "x"), "scale": scale, "bias": bias,
               "epsilon": b.scalar(i["epsilon"], None, "epsilon")}
    y = b.output(o["y"])
    outs: list[str | None] = [y, None, None]
    if phase == "TRAINING":
        outs = [y, _stat_output(b, o.get("mean"), i["x"], start, f"{node.name}_mean"),
                _stat_output(b, o.get("inv_variance"), i["x"], start, f"{node.name}_inv_variance")]
    b.call(node, "layernorm", tensors, outs, {"norm_forward_phase": EnumValue("norm_forward_phase", phase)})


def _stat_output(b: _Builder, uid: int | None, x_uid: int, start: int, name: str) -> str:
    if uid is not None:
        return b.output(uid)
    x = b.graph.by_uid[x_uid]
    dims = tuple(d if a < start else 1 for a, d in enumerate(x.dims))
    from hipdnn_trace.graph.layout import packed_strides

    dims_l, strides_l = lift(dims, packed_strides(dims), b.rank)
    b._synthetic += 1
    decl = OutputDecl(f"s{b._synthetic}", b.uid(), name, dims_l, strides_l, "FLOAT", virtual=False)
    b.plan.outputs.append(decl)
    return decl.key


def rmsnorm(b: _Builder, node: Node) -> None:
    from hipdnn_trace.graph.norms import rmsnorm_refusal, rmsnorm_start

    reason = rmsnorm_refusal(node, b.graph)
    if reason:
        raise UnsupportedError(reason)
    i, o = node.inputs, node.outputs
    inv_uid = o.get("inv_rms")
    start = rmsnorm_start(node, b.graph)
    _norm_axes_check(b, node, i["x"], start, "rmsnorm", i["scale"], (inv_uid,))
    phase = _phase(node, inv_uid is not None)
    tensors = {"input": b.tensor(i["x"], "x"), "scale": b.tensor(i["scale"], "scale"),
               "bias": b.tensor(i.get("bias"), "bias"), "epsilon": b.scalar(i["epsilon"], None, "epsilon")}
    y = b.output(o["y"])
    outs: list[str | None] = [y, None]
    if phase == "TRAINING":
        outs = [y, _stat_output(b, inv_uid, i["x"], start, f"{node.name}_inv_rms")]
    b.call(node, "rmsnorm", tensors, outs, {"norm_forward_phase": EnumValue("norm_forward_phase", phase)})


def norm_backward(b: _Builder, node: Node) -> None:
    """LayernormBackward / RMSNormBackward -> cuDNN's layernorm_backward / rmsnorm_backward.

    cuDNN reads the normalized axes off scale's shape and the statistics' shapes, as for the
    forward; it takes no epsilon (the saved statistics already hold it). dscale and dbias
    the graph does not ask for get scratch buffers (layernorm) or are switched off (RMSNorm's
    ``has_dbias``); RMSNorm's dscale is always produced.
    """
    from hipdnn_trace.graph.norms import norm_backward_start

    i, o = node.inputs, node.outputs
    layer = node.type.startswith("Layernorm")
    what = "layernorm backward" if layer else "rmsnorm backward"
    start = norm_backward_start(node, b.graph)
    if start is None:   # pragma: no cover - the loader refuses such graphs
        raise UnsupportedError(f"{what} {node.name!r}: cannot tell the normalized dims")
    stats = ("mean", "inv_variance") if layer else ("inv_rms",)
    missing = [s for s in stats if i.get(s) is None]
    if missing:
        raise UnsupportedError(f"{what} {node.name!r}: cuDNN needs the saved {' and '.join(missing)}")
    _norm_axes_check(b, node, i["x"], start, what, i["scale"], [i[s] for s in stats])
    scale = b.tensor(i["scale"], "scale")
    tensors = {"grad": b.tensor(i["dy"], "dy"), "input": b.tensor(i["x"], "x"), "scale": scale}
    dx = b.output(o["dx"])
    dscale = b.output(o.get("dscale"), scale, name=f"{node.name}_dscale")
    if layer:
        tensors |= {"mean": b.tensor(i["mean"], "mean"), "inv_variance": b.tensor(i["inv_variance"], "inv_variance")}
        dbias: str | None = b.output(o.get("dbias"), scale, name=f"{node.name}_dbias")
        b.call(node, "layernorm_backward", tensors, [dx, dscale, dbias])
        return
    tensors["inv_variance"] = b.tensor(i["inv_rms"], "inv_rms")
    has_dbias = o.get("dbias") is not None
    dbias = b.output(o["dbias"]) if has_dbias else None
    b.call(node, "rmsnorm_backward", tensors, [dx, dscale, dbias], {"has_dbias": has_dbias})


OPS: dict[str, PlanFn] = {
    "BatchnormAttributes": batchnorm,
    "BatchnormInferenceAttributes": batchnorm_inference,
    "BatchnormInferenceAttributesVarianceExt": batchnorm_inference_variance,
    "BatchnormBackwardAttributes": batchnorm_backward,
    "LayernormAttributes": layernorm,
    "RMSNormAttributes": rmsnorm,
    "LayernormBackwardAttributes": norm_backward,
    "RMSNormBackwardAttributes": norm_backward,
}

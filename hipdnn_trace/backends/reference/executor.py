"""Walk a graph node by node with the float64 reference ops.

Each node reads its inputs as stored (rounded to their tensor types, as a real
implementation would see them), computes in float64, and its outputs are rounded
to their tensors' types before the next node reads them. The unrounded float64
results are kept too: they are the oracle that validation compares against.

``device="cuda"`` runs the same op code on torch float64 tensors on the GPU for every node (the
ops are written against the Array API; ``xp.py`` holds what the standard lacks). Inputs move to
the device once; by default each result comes back to the host as float64 (the exact oracle) and
is rounded there to its tensor's type with the same numpy code as on the CPU. With
``keep_on_device`` results stay on the device, rounded there with the same bits
(``rounding.round_in``), and only the graph's outputs are returned, as device tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hipdnn_trace.backends.reference import ops as ref, xp as shim
from hipdnn_trace.backends.reference.ops._arrays import f64, size
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph import attention, blockscale, custom, dtypes, moe, ops, resample
from hipdnn_trace.graph.dtypes import scalar_value
from hipdnn_trace.graph.load import execution_order
from hipdnn_trace.graph.model import Graph, Node
from hipdnn_trace.graph.norms import norm_backward_start, norm_forward_phase, rmsnorm_count, rmsnorm_refusal

Inputs = Mapping[str, np.ndarray | None]
Handler = Callable[[Node, Graph, Inputs], dict[str, np.ndarray | None]]


@dataclass
class Evaluation:
    """Every produced tensor: ``exact`` in float64, ``stored`` in its own dtype (numpy arrays); with
    ``keep_on_device``, the graph's outputs only, as device tensors (stored in
    ``xp.torch_storage_dtype``), so a validator on the device needs no host copy."""

    exact: dict[int, Any]
    stored: dict[int, Any]
    #: where each node ran, by node name: "cpu" or the device (e.g. "cuda:0")
    placement: dict[str, str] = field(default_factory=dict)


def _scalar(arr: np.ndarray | None, what: str) -> float | None:
    if arr is None:
        return None
    flat = np.asarray(shim.to_numpy(arr), dtype=np.float64).reshape(-1)
    if flat.size != 1:
        raise UnsupportedError(f"{what} must be a single value, got {flat.size} elements")
    return float(flat[0])


def _conv_options(node: Node) -> dict[str, Any]:
    mode = str(node.params.get("conv_mode", "CROSS_CORRELATION")).upper()
    if mode == "UNSET":   # hipDNN's default mode is cross-correlation, like cuDNN's
        mode = "CROSS_CORRELATION"
    return {
        "pre_padding": node.params["pre_padding"],
        "post_padding": node.params["post_padding"],
        "stride": node.params["stride"],
        "dilation": node.params["dilation"],
        "mode": mode,
    }


def _dims(graph: Graph, node: Node, port: str) -> tuple[int, ...]:
    uid = node.outputs.get(port, node.inputs.get(port))
    return tuple(graph.by_uid[uid].dims)   # type: ignore[index]


def _conv_fwd(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    return {"y": ref.conv_fwd(x["x"], x["w"], **_conv_options(node))}


def _conv_dgrad(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    return {"dx": ref.conv_dgrad(x["dy"], x["w"], x_shape=_dims(graph, node, "dx"), **_conv_options(node))}


def _conv_wgrad(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    return {"dw": ref.conv_wgrad(x["x"], x["dy"], w_shape=_dims(graph, node, "dw"), **_conv_options(node))}


def _matmul(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    return {"c": ref.matmul(x["a"], x["b"])}


def _pointwise(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    mode = node.params.get("operation")
    if not isinstance(mode, str):
        raise UnsupportedError(f"pointwise node {node.name!r} has no operation")
    operands = [x[p] for p in ("in_0", "in_1", "in_2") if x.get(p) is not None]
    p = node.params
    out = ref.pointwise(
        mode, operands,
        relu_lower_clip=p.get("relu_lower_clip"), relu_upper_clip=p.get("relu_upper_clip"),
        relu_lower_clip_slope=p.get("relu_lower_clip_slope"), swish_beta=p.get("swish_beta"),
        elu_alpha=p.get("elu_alpha"), softplus_beta=p.get("softplus_beta"),
        axis=p.get("axis_tensor_uid"), out_shape=_dims(graph, node, "out_0"),
    )
    return {"out_0": out}


def _bn_inference(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    return {"y": ref.batchnorm_inference(x["x"], x["mean"], x["inv_variance"], x["scale"], x["bias"])}


def _bn_inference_variance(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    eps = _scalar(x["epsilon"], "batchnorm epsilon")
    variance = f64(x["variance"])
    inv_var = 1.0 / shim.namespace(variance).sqrt(variance + eps)
    return {"y": ref.batchnorm_inference(x["x"], x["mean"], inv_var, x["scale"], x["bias"])}


def _bn_train(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    if node.inputs.get("peer_stats"):
        raise UnsupportedError("batchnorm with peer stats (multi-GPU) is not supported by the reference")
    momentum = _scalar(x.get("momentum"), "batchnorm momentum")
    out = ref.batchnorm_train(
        x["x"], x["scale"], x["bias"], epsilon=_scalar(x["epsilon"], "batchnorm epsilon"),
        momentum=0.1 if momentum is None else momentum,
        prev_running_mean=x.get("prev_running_mean"), prev_running_var=x.get("prev_running_variance"),
    )
    return {"y": out["y"], "mean": out["mean"], "inv_variance": out["inv_variance"],
            "next_running_mean": out["next_running_mean"],
            "next_running_variance": out["next_running_var"]}


def _bn_backward(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    if node.inputs.get("peer_stats"):
        raise UnsupportedError("batchnorm backward with peer stats is not supported by the reference")
    # without saved statistics hipDNN's reference recomputes them with its default epsilon
    return ref.batchnorm_backward(x["dy"], x["x"], x["scale"], mean=x.get("mean"),
                                  inv_variance=x.get("inv_variance"), epsilon=1e-5)


def _layernorm(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    count = node.params.get("normalized_dim_count")
    if not isinstance(count, int) or isinstance(count, bool):
        raise UnsupportedError(f"layernorm node {node.name!r} needs an integer normalized_dim_count")
    out = ref.layernorm(x["x"], x.get("scale"), x.get("bias"),
                        epsilon=_scalar(x["epsilon"], "layernorm epsilon"), normalized_dim_count=count)
    if norm_forward_phase(node) == "INFERENCE":
        out = {"y": out["y"]}
    return out


def _rmsnorm(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    return ref.rmsnorm(x["x"], x["scale"], x.get("bias"),
                       epsilon=_scalar(x["epsilon"], "rmsnorm epsilon"),
                       normalized_dim_count=rmsnorm_count(node, graph))


def _attention_inputs(node: Node, graph: Graph, x: Inputs) -> tuple[attention.AttentionConfig, dict[str, Any]]:
    """The config and the keyword arguments both attention directions share."""
    cfg = attention.config(node, graph)
    reason = attention_refusal(cfg, node)
    if reason:
        raise UnsupportedError(reason)
    lq, lkv = attention.seq_lengths(node, graph, {u: shim.to_numpy(x[p]) for p, u in node.inputs.items()
                                                  if isinstance(u, int) and x.get(p) is not None
                                                  and p in ("seq_len_q", "seq_len_kv")})
    scale = cfg.scale if cfg.scale is not None else _scalar(x["scale"], "attention scale")
    mask = x.get("attn_mask")
    kwargs: dict[str, Any] = {
        "scale": scale,
        "masking": attention_masking(cfg, lq, lkv),
        "bias": mask if cfg.mask_kind == "additive" else None,
        "allow": mask if cfg.mask_kind == "boolean" else None,
        "sink": x.get("sink_token"),
    }
    return cfg, kwargs


def attention_masking(cfg: attention.AttentionConfig, lq: list[int], lkv: list[int]) -> ref.Masking:
    """The reference's masking rule for a node's config and per-sequence lengths."""
    return ref.Masking(causal=cfg.causal, bottom_right=cfg.bottom_right, left_bound=cfg.left_bound,
                       right_bound=cfg.right_bound, seq_len_q=tuple(lq) if cfg.padded else None,
                       seq_len_kv=tuple(lkv) if cfg.padded else None)


def _keys_values(cfg: attention.AttentionConfig, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
    if not cfg.paged:
        return x["k"], x["v"]   # type: ignore[return-value]
    return (ref.gather_pages(x["k"], x["page_table_k"], cfg.seq_kv),   # type: ignore[arg-type]
            ref.gather_pages(x["v"], x["page_table_v"], cfg.seq_kv))   # type: ignore[arg-type]


def _sdpa(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    cfg, kwargs = _attention_inputs(node, graph, x)
    k, v = _keys_values(cfg, x)
    return dict(ref.sdpa_forward(x["q"], k, v, **kwargs))


def _sdpa_backward(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    cfg, kwargs = _attention_inputs(node, graph, x)
    dbias_uid = node.outputs.get("dbias")
    shape = tuple(graph.by_uid[dbias_uid].dims) if isinstance(dbias_uid, int) else None
    out = ref.sdpa_backward(x["q"], x["k"], x["v"], x["do"], bias_shape=shape, o=x.get("o"), **kwargs)
    result: dict[str, np.ndarray | None] = {"dq": out["dq"], "dk": out["dk"], "dv": out["dv"]}
    if "dbias" in out:
        result["dbias"] = out["dbias"]
    if node.outputs.get("dsink_token") is not None:
        result["dsink_token"] = out["dsink"]
    return result


def attention_refusal(cfg: attention.AttentionConfig, node: Node) -> str | None:
    """Why the float64 reference does not compute this attention node, or None."""
    return attention.unmodelled(cfg, node)


def _norm_backward_start(node: Node, graph: Graph) -> int:
    start = norm_backward_start(node, graph)
    if start is None:   # the loader's check refuses such graphs; kept for built-in-memory graphs
        raise UnsupportedError(f"{node.op} node {node.name!r}: normalized dims cannot be told")
    return start


def _layernorm_backward(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    start = _norm_backward_start(node, graph)
    eps = _scalar(x.get("epsilon"), "layernorm epsilon")
    return dict(ref.layernorm_backward(x["dy"], x["x"], x["scale"], normalized_dim_count=x["x"].ndim - start,  # type: ignore[union-attr]
                                       mean=x.get("mean"), inv_variance=x.get("inv_variance"), epsilon=eps))


def _rmsnorm_backward(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    return dict(ref.rmsnorm_backward(x["dy"], x["x"], x["scale"], x["inv_rms"],
                                     start=_norm_backward_start(node, graph)))


def _reduction(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    return {"out": ref.reduce(str(node.params.get("mode", "")), x["in"], out_shape=_dims(graph, node, "out"))}


def _moe(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    return {"output": ref.moe_grouped_matmul(
        x["token"], x["weight"], x["first_token_offset"], mode=moe.mode(node), top_k=int(moe.top_k(node)),
        token_index=x.get("token_index"), token_ks=x.get("token_ks"), output_rows=_dims(graph, node, "output")[1])}


def _moe_backward(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    return {"dweight": ref.moe_grouped_matmul_backward(x["doutput"], x["token"], x["first_token_offset"])}


def _resample_fwd(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    y, index = ref.pool_forward(x["x"], resample.pooling(node), with_index=node.outputs.get("index") is not None)
    return {"y": y, "index": index}


def _resample_bwd(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    return {"dx": ref.pool_backward(x["dy"], resample.pooling(node), _dims(graph, node, "dx"), x.get("index"))}


def _compute_type(node: Node, graph: Graph) -> str:
    compute = node.compute_data_type
    return graph.compute_data_type if compute in ("unset", "", None) else compute


def _block_quantize(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    y_type, scale_type = (graph.by_uid[node.outputs[p]].data_type for p in ("y", "scale"))
    y, scale = ref.block_quantize(x["x"], int(node.params["block_size"]), blockscale.quantize_axis(node, graph),
                                  y_type, scale_type, _compute_type(node, graph))
    # the stored codes are the result: a device is compared with the values hipDNN stores, not with
    # x / scale before rounding (which no format can hold)
    return {"y": ref.stored_values(y, y_type), "scale": scale}


def _block_dequantize(node: Node, graph: Graph, x: Inputs) -> dict[str, np.ndarray | None]:
    return {"y": ref.block_dequantize(x["x"], x["scale"], blockscale.dequantize_blocks(node, graph),
                                      negative=bool(node.params.get("is_negative_scale")),
                                      compute=_compute_type(node, graph))}


HANDLERS: dict[str, Handler] = {
    "ConvolutionFwdAttributes": _conv_fwd,
    "ConvolutionBwdAttributes": _conv_dgrad,
    "ConvolutionWrwAttributes": _conv_wgrad,
    "MatmulAttributes": _matmul,
    "PointwiseAttributes": _pointwise,
    "BatchnormInferenceAttributes": _bn_inference,
    "BatchnormInferenceAttributesVarianceExt": _bn_inference_variance,
    "BatchnormAttributes": _bn_train,
    "BatchnormBackwardAttributes": _bn_backward,
    "LayernormAttributes": _layernorm,
    "RMSNormAttributes": _rmsnorm,
    "LayernormBackwardAttributes": _layernorm_backward,
    "RMSNormBackwardAttributes": _rmsnorm_backward,
    "ReductionAttributes": _reduction,
    attention.SDPA: _sdpa,
    attention.SDPA_BACKWARD: _sdpa_backward,
    moe.MOE: _moe,
    moe.MOE_BACKWARD: _moe_backward,
    resample.RESAMPLE_FWD: _resample_fwd,
    resample.RESAMPLE_BWD: _resample_bwd,
    blockscale.QUANTIZE: _block_quantize,
    blockscale.DEQUANTIZE: _block_dequantize,
}


def check(graph: Graph) -> str | None:
    """Why the reference cannot run ``graph`` (one line), or None if it can."""
    for tensor in graph.tensors:
        if dtypes.lookup(tensor.data_type).numpy is None:
            return f"tensor {tensor.name!r}: data type {tensor.data_type} has no host form"
    for node in graph.nodes:
        if node.type == custom.CUSTOM_OP:
            return custom.refusal(node, "the float64 reference")
        if node.type not in HANDLERS:
            return f"unsupported op {node.op}"
        spec = ops.spec(node.type)
        known = set(spec.all_inputs) | set(spec.all_outputs) if spec else set()
        extra = [p for p, u in {**node.inputs, **node.outputs}.items()
                 if p not in known and u not in (None, ())]
        if extra:
            return f"{node.op} node {node.name!r}: port(s) {', '.join(extra)} not modelled"
        if node.type == "PointwiseAttributes":
            try:
                ref.pointwise_arity(str(node.params.get("operation", "")))
            except UnsupportedError as exc:
                return str(exc)
        if node.type == "RMSNormAttributes":
            reason = rmsnorm_refusal(node, graph)
            if reason:
                return reason
        if node.type in (attention.SDPA, attention.SDPA_BACKWARD):
            reason = attention_refusal(attention.config(node, graph), node)
            if reason:
                return reason
        if node.type == "ReductionAttributes":
            mode = str(node.params.get("mode", "")).upper()
            if mode.removesuffix("_OP") not in ref.REDUCTION_MODES:
                return f"unsupported reduction mode {mode}"
    return None


#: ops whose float64 math runs in the device namespace: every family (each op module is
#: namespace-generic), so a graph never falls back to the host when a device is there
DEVICE_OPS: frozenset[str] = frozenset(HANDLERS)


def evaluate(graph: Graph, inputs: Mapping[int, Any], *, device: str = "cpu", xp: Any = None,
             keep_on_device: bool = False) -> Evaluation:
    """Run every node; inputs are logical arrays keyed by uid, in their tensors' dtypes.

    ``device``: "cpu" (numpy) or "cuda" (torch float64 on the GPU); ``xp``, an Array API
    namespace to run the ops in instead (the tests pass array-api-strict, or torch for its CPU).
    Results are numpy arrays of every produced tensor, unless ``keep_on_device`` (a torch target):
    then inputs may be torch tensors on the device in their storage dtypes (numpy ones are uploaded
    once), stored values are rounded there, and ``exact`` (float64) and ``stored`` (the storage dtype,
    ``xp.torch_storage_dtype``) hold device tensors of the graph's outputs only. On the CPU
    (numpy), ``keep_on_device`` changes nothing: the host is where the arrays are.
    """
    if xp is None and device == "cpu":
        return _evaluate_host(graph, _on_host(graph, inputs))
    target = shim.Target.of(device) if xp is None else shim.Target(xp, None, getattr(xp, "__name__", "xp"))
    if keep_on_device:
        if not shim.is_torch(target.xp):
            raise ValueError(f"keep_on_device needs a torch device, not {target.label}")
        return _evaluate_resident(graph, inputs, target)
    return _evaluate_on(graph, _on_host(graph, inputs), target)


def _on_host(graph: Graph, inputs: Mapping[int, Any]) -> dict[int, np.ndarray]:
    """Inputs as host arrays: torch tensors come back in their tensors' numpy dtypes, bit for bit."""
    return {u: a if isinstance(a, np.ndarray) or not shim.is_torch(shim.namespace(a))
            else shim.storage_to_numpy(a, graph.by_uid[u].data_type) for u, a in inputs.items()}


def _handler(node: Node) -> Handler:
    handler = HANDLERS.get(node.type)
    if handler is None:
        raise UnsupportedError(f"unsupported op {node.op}")
    return handler


def _result(node: Node, graph: Graph, results: Mapping[str, Any], port: str, uid: int) -> Any:
    """Output ``port``'s value, shaped like its tensor (any namespace)."""
    value = results.get(port)
    if value is None:
        raise UnsupportedError(f"{node.op} node {node.name!r} cannot produce output {port}")
    tensor = graph.by_uid[uid]
    if tuple(value.shape) != tuple(tensor.dims):
        if size(value) != tensor.numel:
            raise UnsupportedError(f"{node.op} computed shape {tuple(value.shape)} for {tensor.name!r} "
                                   f"of dims {list(tensor.dims)}")
        value = shim.namespace(value).reshape(value, tuple(tensor.dims))
    return value


def _values(graph: Graph) -> dict[int, np.ndarray]:
    """The pass-by-value scalars (epsilon, momentum...) as float64 host arrays."""
    return {t.uid: np.full(t.dims, scalar_value(t), dtype=np.float64) for t in graph.value_tensors}


def _last_reads(graph: Graph, order: list[int]) -> dict[int, int]:
    """The step of each tensor's last reader (tensors nobody reads are absent)."""
    return {uid: step for step, index in enumerate(order)
            for uid in graph.nodes[index].inputs.values() if isinstance(uid, int)}


def _drop_read(held: dict[int, Any], last_read: Mapping[int, int], step: int) -> None:
    """Forget the device copies no node after ``step`` reads."""
    for uid in [u for u in held if last_read.get(u, -1) <= step]:
        del held[uid]


def _evaluate_host(graph: Graph, inputs: Mapping[int, np.ndarray]) -> Evaluation:
    stored: dict[int, np.ndarray] = {**inputs, **_values(graph)}
    exact: dict[int, np.ndarray] = {}
    placement: dict[str, str] = {}
    for index in execution_order(graph):
        node = graph.nodes[index]
        handler = _handler(node)
        args: dict[str, np.ndarray | None] = {}
        for port, uid in node.inputs.items():
            if isinstance(uid, int):
                if uid not in stored:
                    raise UnsupportedError(f"input {port} (uid {uid}) of {node.name!r} was not bound")
                args[port] = stored[uid]
        results = handler(node, graph, args)
        for port, uid in node.outputs.items():
            if uid is None:
                continue
            value = results.get(port)
            if value is not None:
                value = np.asarray(value, dtype=np.float64)
            value = _result(node, graph, {port: value}, port, uid)
            exact[uid] = value
            stored[uid] = ref.round_to(value, graph.by_uid[uid].data_type)
        placement[node.name] = "cpu"
    return Evaluation(exact, {u: a for u, a in stored.items() if u in exact}, placement)


def _evaluate_on(graph: Graph, inputs: Mapping[int, np.ndarray], target: shim.Target) -> Evaluation:
    """Every node in ``target``'s namespace; every result comes back to the host (exact float64), is
    rounded there, and goes to the device again (as float64) only when a later node reads it. A
    device copy is dropped after its last reader."""
    order = execution_order(graph)
    host: dict[int, np.ndarray] = {**inputs, **_values(graph)}
    last_read = _last_reads(graph, order)
    on_device: dict[int, Any] = {}
    exact: dict[int, np.ndarray] = {}
    placement: dict[str, str] = {}
    for step, index in enumerate(order):
        node = graph.nodes[index]
        for uid in _bound(node, host):
            if uid not in on_device:
                on_device[uid] = shim.from_numpy(target.xp, host[uid], target.device)
        _bring_back(graph, _run(node, graph, on_device), exact, host, on_device)
        placement[node.name] = target.label
        _drop_read(on_device, last_read, step)
    return Evaluation(exact, {u: a for u, a in host.items() if u in exact}, placement)


def _bring_back(graph: Graph, results: Mapping[int, Any], exact: dict[int, np.ndarray],
                host: dict[int, np.ndarray], on_device: dict[int, Any]) -> None:
    """Device results to the host (exact), rounded there; float64 ones also stay on the device
    (stored == exact: no upload needed). Nothing else of them outlives this call."""
    for uid, value in results.items():
        tensor = graph.by_uid[uid]
        exact[uid] = np.asarray(shim.to_numpy(value), dtype=np.float64)
        host[uid] = ref.round_to(exact[uid], tensor.data_type)
        if tensor.data_type == "double":
            on_device[uid] = value


def _bound(node: Node, have: Mapping[int, Any]) -> list[int]:
    """The uids ``node`` reads, each checked to be bound."""
    uids = []
    for port, uid in node.inputs.items():
        if isinstance(uid, int):
            if uid not in have:
                raise UnsupportedError(f"input {port} (uid {uid}) of {node.name!r} was not bound")
            uids.append(uid)
    return uids


def _run(node: Node, graph: Graph, values: Mapping[int, Any]) -> dict[int, Any]:
    """``node``'s outputs by uid, shaped like their tensors, from float64 ``values`` by uid (in a
    function of its own, so its arguments and temporaries are freed when it returns)."""
    args = {port: values[uid] for port, uid in node.inputs.items() if isinstance(uid, int)}
    results = _handler(node)(node, graph, args)
    return {uid: _result(node, graph, results, port, uid) for port, uid in node.outputs.items() if uid is not None}


def _evaluate_resident(graph: Graph, inputs: Mapping[int, Any], target: shim.Target) -> Evaluation:
    """Every node on a torch device, every result stays there: each is rounded to its type on the
    device (``rounding.round_in``), kept in its storage dtype while a later node reads it (read as
    float64 by each reader) and, for the graph's outputs only, returned as exact and stored tensors."""
    order = execution_order(graph)
    state = _Resident(graph, target, _last_reads(graph, order), {**inputs, **_values(graph)})
    placement: dict[str, str] = {}
    for step, index in enumerate(order):
        node = graph.nodes[index]
        state.keep(step, _run(node, graph, state.read(node)))
        placement[node.name] = target.label
        _drop_read(state.live, state.last_read, step)
    return Evaluation(state.exact, state.stored, placement)


@dataclass
class _Resident:
    """What a device-resident evaluation holds: inputs not uploaded yet, stored values later nodes
    read, and the graph outputs' exact and stored tensors. Nothing else outlives its node."""

    graph: Graph
    target: shim.Target
    last_read: dict[int, int]
    waiting: dict[int, Any]
    live: dict[int, Any] = field(default_factory=dict)
    exact: dict[int, Any] = field(default_factory=dict)
    stored: dict[int, Any] = field(default_factory=dict)

    def read(self, node: Node) -> dict[int, Any]:
        """The float64 values ``node`` reads (one conversion per tensor, freed after the node);
        an input is uploaded at its first reader."""
        for uid in _bound(node, {**self.waiting, **self.live}):
            if uid not in self.live:
                self.live[uid] = _upload(self.graph, uid, self.waiting.pop(uid), self.target)
        return {uid: f64(self.live[uid]) for uid in set(node.inputs.values()) if isinstance(uid, int)}

    def keep(self, step: int, results: Mapping[int, Any]) -> None:
        """Round each result on the device; keep it where an output or a later reader needs it."""
        outputs = {t.uid for t in self.graph.output_tensors}
        for uid, value in results.items():
            exact = f64(value)
            stored = ref.round_in(exact, self.graph.by_uid[uid].data_type)
            if uid in outputs:
                self.exact[uid], self.stored[uid] = exact, stored
            if self.last_read.get(uid, -1) > step:
                self.live[uid] = stored


def _upload(graph: Graph, uid: int, value: Any, target: shim.Target) -> Any:
    """An input on the device: a torch tensor as it is (moved if elsewhere), a host array in its
    tensor's storage dtype when it has that dtype, else as its float64 values."""
    if not isinstance(value, np.ndarray):
        return value.to(target.device if target.device is not None else "cpu")
    name = graph.by_uid[uid].data_type
    if dtypes.lookup(name).numpy == value.dtype:
        return shim.to_storage(value, name, target.device)
    return shim.from_numpy(target.xp, value, target.device)

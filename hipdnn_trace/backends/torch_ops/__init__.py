"""hipDNN node semantics in eager PyTorch (CUDA, ROCm and CPU builds alike).

One module per op family (as ``backends/reference/ops`` is); this module maps node
types to them and says what torch cannot run.

Each function takes a node's input tensors (torch, logical dims) and returns its
outputs by port name. Semantics follow docs/hipdnn-format.md and the float64
reference (``backends/reference``): asymmetric convolution padding through
``F.pad``, dgrad/wgrad through ``torch.nn.grad``, batchnorm with inv_variance
(1/sqrt(var + eps)) as its saved statistic, hipDNN's grouped matmul batches,
relu with clips and slope, and backward activations reading (in_0, in_1) = (dy, x).

Precision: convolutions and matmuls run in their operands' type (tensor cores on a
GPU, fp32 accumulation); everything else computes in float32 and is rounded once to
the output tensor's type. On the CPU, half and bfloat16 operands are widened to
float32 first (CPU kernels for them are slow or missing).
"""

from __future__ import annotations

import torch

from hipdnn_trace.backends.torch_ops._common import TORCH_DTYPES, Ctx, OpFn, Values, f32
from hipdnn_trace.backends.torch_ops.attention import (
    attention_refusal,
    sdpa,
    sdpa_backward,
)
from hipdnn_trace.backends.torch_ops.blockscale import block_dequantize, block_quantize
from hipdnn_trace.backends.torch_ops.conv import conv_dgrad, conv_fwd, conv_wgrad
from hipdnn_trace.backends.torch_ops.matmul import matmul
from hipdnn_trace.backends.torch_ops.moe import moe_grouped_matmul, moe_grouped_matmul_backward
from hipdnn_trace.backends.torch_ops.norms import (
    batchnorm_backward,
    batchnorm_inference,
    batchnorm_inference_variance,
    batchnorm_train,
    layernorm,
    layernorm_backward,
    rmsnorm,
    rmsnorm_backward,
)
from hipdnn_trace.backends.torch_ops.pointwise import POINTWISE, pointwise
from hipdnn_trace.backends.torch_ops.pooling import resample_bwd, resample_fwd
from hipdnn_trace.backends.torch_ops.reduction import REDUCTION_MODES, reduction
from hipdnn_trace.graph import attention as attention_spec, blockscale, custom, moe, resample
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.graph.norms import rmsnorm_refusal
from hipdnn_trace.graph.pointwise import pointwise_mode

__all__ = ["OPS", "POINTWISE", "REDUCTION_MODES", "TORCH_DTYPES", "Ctx", "OpFn", "Values", "check", "f32", "torch"]

OPS: dict[str, OpFn] = {
    "ConvolutionFwdAttributes": conv_fwd,
    "ConvolutionBwdAttributes": conv_dgrad,
    "ConvolutionWrwAttributes": conv_wgrad,
    "MatmulAttributes": matmul,
    "PointwiseAttributes": pointwise,
    "BatchnormInferenceAttributes": batchnorm_inference,
    "BatchnormInferenceAttributesVarianceExt": batchnorm_inference_variance,
    "BatchnormAttributes": batchnorm_train,
    "BatchnormBackwardAttributes": batchnorm_backward,
    "LayernormAttributes": layernorm,
    "RMSNormAttributes": rmsnorm,
    "ReductionAttributes": reduction,
    "LayernormBackwardAttributes": layernorm_backward,
    "RMSNormBackwardAttributes": rmsnorm_backward,
    attention_spec.SDPA: sdpa,
    attention_spec.SDPA_BACKWARD: sdpa_backward,
    moe.MOE: moe_grouped_matmul,
    moe.MOE_BACKWARD: moe_grouped_matmul_backward,
    resample.RESAMPLE_FWD: resample_fwd,
    resample.RESAMPLE_BWD: resample_bwd,
    blockscale.QUANTIZE: block_quantize,
    blockscale.DEQUANTIZE: block_dequantize,
}


def check(graph: Graph) -> str | None:
    """Why eager torch cannot run ``graph`` (one line), or None."""
    for t in graph.tensors:
        if not t.is_value and t.data_type not in TORCH_DTYPES:
            return f"tensor {t.name!r}: data type {t.data_type} has no torch equivalent"
        if t.data_type == "fp4_e2m1":   # e2m1 codes, one per byte: only block scaling reads and writes them
            users = {n.type for n in graph.nodes if t.uid in (*n.input_uids(), *n.output_uids())}
            if users - {blockscale.QUANTIZE, blockscale.DEQUANTIZE}:
                return (f"tensor {t.name!r}: fp4_e2m1 has no torch arithmetic type; torch keeps it as e2m1 codes "
                        "that only block-scale quantize/dequantize read and write")
    for node in graph.nodes:
        if node.type == custom.CUSTOM_OP:
            return custom.refusal(node, "torch")
        if node.type not in OPS:
            return f"op {node.op} is not mapped to torch"
        if node.type == "PointwiseAttributes":
            mode = pointwise_mode(node)
            if mode not in POINTWISE and mode != "gen_index":
                return f"pointwise mode {mode} is not mapped to torch"
        if node.type == "ReductionAttributes":
            mode = str(node.params.get("mode", "")).strip().upper()
            if mode not in REDUCTION_MODES:
                return f"reduction mode {mode} is not mapped to torch"
        if node.type in ("BatchnormAttributes", "BatchnormBackwardAttributes") and node.inputs.get("peer_stats"):
            return f"{node.op} {node.name!r}: peer stats are not supported"
        if node.type == "RMSNormAttributes" and (reason := rmsnorm_refusal(node, graph)):
            return reason
        if node.type in (attention_spec.SDPA, attention_spec.SDPA_BACKWARD):
            reason = attention_refusal(node, graph)
            if reason:
                return reason
        if node.type.startswith("Convolution"):
            rank = len(graph.by_uid[node.input_uids()[0]].dims)
            if rank not in (3, 4, 5):
                return f"{node.op} {node.name!r}: rank {rank} convolution"
    return None

"""Float64 numerics of the reference backend: pure functions on logical arrays.

Arrays are numpy's or any Array API namespace's (torch float64 on a GPU for
``--reference-device cuda``); an op computes in its inputs' namespace and returns arrays of it.
Every family is namespace-generic (the executor runs each node on the device when there is one).

Each op takes arrays in hipDNN's logical dim order (N, C, spatial... for conv and
norm tensors; strides and memory layout are the caller's business), computes in
float64 and returns float64 arrays of the output's logical shape. Anything an op
cannot compute exactly raises :class:`hipdnn_trace.errors.UnsupportedError` with a
one-line reason. :func:`round_to` then stores a result in its tensor's data type.
"""

from hipdnn_trace.backends.reference.ops.batchnorm import (
    batchnorm_backward,
    batchnorm_inference,
    batchnorm_train,
)
from hipdnn_trace.backends.reference.ops.blockscale import block_dequantize, block_quantize
from hipdnn_trace.backends.reference.ops.conv import (
    conv_dgrad,
    conv_fwd,
    conv_output_shape,
    conv_wgrad,
)
from hipdnn_trace.backends.reference.ops.layernorm import layernorm, layernorm_backward
from hipdnn_trace.backends.reference.ops.matmul import matmul, matmul_output_shape
from hipdnn_trace.backends.reference.ops.moe import moe_grouped_matmul, moe_grouped_matmul_backward
from hipdnn_trace.backends.reference.ops.pointwise import (
    POINTWISE_MODES,
    pointwise,
    pointwise_arity,
)
from hipdnn_trace.backends.reference.ops.pooling import pool_backward, pool_forward
from hipdnn_trace.backends.reference.ops.reduction import REDUCTION_MODES, reduce
from hipdnn_trace.backends.reference.ops.rmsnorm import rmsnorm, rmsnorm_backward
from hipdnn_trace.backends.reference.ops.rounding import round_in, round_to, stored_values
from hipdnn_trace.backends.reference.ops.sdpa import Masking, gather_pages, sdpa_backward, sdpa_forward

__all__ = [
    "Masking",
    "POINTWISE_MODES",
    "REDUCTION_MODES",
    "batchnorm_backward",
    "block_dequantize",
    "block_quantize",
    "batchnorm_inference",
    "batchnorm_train",
    "conv_dgrad",
    "conv_fwd",
    "conv_output_shape",
    "conv_wgrad",
    "gather_pages",
    "layernorm",
    "layernorm_backward",
    "matmul",
    "matmul_output_shape",
    "moe_grouped_matmul",
    "moe_grouped_matmul_backward",
    "pointwise",
    "pointwise_arity",
    "pool_backward",
    "pool_forward",
    "reduce",
    "rmsnorm",
    "rmsnorm_backward",
    "round_in",
    "round_to",
    "sdpa_backward",
    "sdpa_forward",
    "stored_values",
]

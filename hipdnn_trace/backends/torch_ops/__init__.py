"""hipDNN node semantics in eager PyTorch (CUDA, ROCm and CPU builds alike).

One module per op family (named by its ``torch`` entry in ``graph/families.py``, each with
``OPS`` and an optional ``check``); this module collects them and says what torch cannot run.

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

from collections.abc import Callable

import torch

from hipdnn_trace.backends.family_tables import layer_tables
from hipdnn_trace.backends.torch_ops._common import TORCH_DTYPES, Ctx, OpFn, Values, f32
from hipdnn_trace.backends.torch_ops.pointwise import POINTWISE
from hipdnn_trace.backends.torch_ops.reduction import REDUCTION_MODES
from hipdnn_trace.graph.blockscale import DEQUANTIZE, QUANTIZE
from hipdnn_trace.graph.model import Graph, Node
from hipdnn_trace.graph.ops import absent_refusal

__all__ = ["OPS", "POINTWISE", "REDUCTION_MODES", "TORCH_DTYPES", "Ctx", "OpFn", "Values", "check", "f32", "torch"]

Check = Callable[[Node, Graph], "str | None"]


_TABLES = layer_tables("torch", "OPS")   # graph/families.py's torch entries
OPS: dict[str, OpFn] = _TABLES.ops
_CHECKS, _ABSENT = _TABLES.checks, _TABLES.absent


def check(graph: Graph) -> str | None:
    """Why eager torch cannot run ``graph`` (one line), or None."""
    for t in graph.tensors:
        if not t.is_value and t.data_type not in TORCH_DTYPES:
            return f"tensor {t.name!r}: data type {t.data_type} has no torch equivalent"
        if t.data_type == "fp4_e2m1":   # e2m1 codes, one per byte: only block scaling reads and writes them
            users = {n.type for n in graph.nodes if t.uid in (*n.input_uids(), *n.output_uids())}
            if users - {QUANTIZE, DEQUANTIZE}:
                return (f"tensor {t.name!r}: fp4_e2m1 has no torch arithmetic type; torch keeps it as e2m1 codes "
                        "that only block-scale quantize/dequantize read and write")
    for node in graph.nodes:
        if node.type in _ABSENT:
            return absent_refusal(node, _ABSENT[node.type], "torch")
        if node.type not in OPS:
            return f"op {node.op} is not mapped to torch"
        family_check = _CHECKS.get(node.type)
        reason = family_check(node, graph) if family_check is not None else None
        if reason:
            return reason
    return None

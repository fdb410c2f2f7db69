"""hipDNN graph -> a plan of cuDNN frontend calls, as plain data.

The plan names every tensor, every ``cudnn.pygraph`` method call with its keyword
arguments, and every output's dims/strides/type, without importing cuDNN: whether
a graph is expressible is decided here (and tested on any machine), and
``backends.cudnn`` only replays the plan against the real library.

Translation rules (docs/nvidia.md has the table):

* Tensors keep hipDNN's dims, strides and types. cuDNN wants equal ranks across a
  graph (and rank >= 3 for matmul, >= 4 for norms and pointwise), so lower-rank
  tensors get leading size-1 dims; that changes no broadcasting and no matmul batch.
  A single 4-d+ matmul whose batch dims are contiguous in every operand is
  collapsed to one batch dim instead.
* Scalars (epsilon, momentum) become pass-by-value host tensors.
* Op outputs take the dims/strides/type of their hipDNN tensor; non-virtual ones
  are graph outputs, virtual ones stay fused. Outputs cuDNN always produces but the
  graph does not ask for (batchnorm's saved stats) get scratch buffers.
* Pointwise ``*_bwd`` modes take (in_0, in_1) = (dy, x), the order hipDNN's float64
  reference uses; ``loss`` = dy, ``input`` = x for cuDNN.
* fp32 convolutions and matmuls must not use TF32 (it fails hipDNN's fp32
  tolerances): the plan says so (``fp32_math``) and the session deselects engines
  carrying the tensor-core / down-convert numerical notes.
"""

from __future__ import annotations

from hipdnn_trace.backends.cudnn_graph.builder import PlanFn, _Builder
from hipdnn_trace.backends.cudnn_graph.geometry import (
    channels_last_permutation,
    coalesce,
    collapse_batch,
    lift,
    unit_strides_packed,
)
from hipdnn_trace.backends.cudnn_graph.plan_types import (
    CONV_TYPES,
    DTYPES,
    EnumValue,
    OpCall,
    OutputDecl,
    Plan,
    TensorDecl,
    _dtype,
)
from hipdnn_trace.backends.family_tables import layer_tables
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.load import execution_order
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.graph.ops import absent_refusal

__all__ = ["CONV_TYPES", "DTYPES", "EnumValue", "OpCall", "OPS", "OutputDecl", "Plan", "TensorDecl",
           "channels_last_permutation", "coalesce", "collapse_batch", "lift", "plan", "unit_strides_packed"]


_TABLES = layer_tables("cudnn", "OPS")   # graph/families.py's cudnn entries
OPS: dict[str, PlanFn] = _TABLES.ops
_ABSENT = _TABLES.absent


def plan(graph: Graph) -> Plan:
    """The cuDNN frontend calls that build ``graph``; UnsupportedError says why not."""
    for t in graph.tensors:
        if not t.is_value:
            _dtype(t.data_type, f"tensor {t.name!r}")
    b = _Builder(graph)
    for index in execution_order(graph):
        node = graph.nodes[index]
        if node.type in _ABSENT:
            raise UnsupportedError(absent_refusal(node, _ABSENT[node.type], "cuDNN"))
        handler = OPS.get(node.type)
        if handler is None:
            raise UnsupportedError(f"op {node.op} has no cuDNN frontend equivalent")
        handler(b, node)
    produced = {o.hipdnn_uid for o in b.plan.outputs}
    missing = [t.name for t in graph.output_tensors if t.uid not in produced]
    if missing:   # pragma: no cover - every handler maps its outputs
        raise UnsupportedError(f"outputs {', '.join(missing)} are not produced by the translation")
    return b.plan

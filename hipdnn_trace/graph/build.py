"""Build hipDNN graphs in Python, the way hipDNN's frontend would describe them.

The sample graphs in ``graphs/`` and many tests are written with this builder, so
one call per op stays short::

    b = GraphBuilder("conv_relu", io="half", compute="float", intermediate="float")
    x = b.tensor("x", [2, 16, 8, 8], layout="NHWC")
    w = b.tensor("w", [32, 16, 3, 3], layout="NHWC")
    y = b.conv_fwd(x, w, pad=1, virtual=True)
    z = b.pointwise("relu_fwd", y, out="z")
    graph = b.build()

Output dims come from the same shape rules the loader checks (``graph.ops``), uids
are assigned in creation order, and :meth:`GraphBuilder.build` turns the result into
hipDNN JSON and loads it back with :func:`~hipdnn_trace.graph.load.parse_graph`:
a built graph is exactly what reading its file would give, checks included.
Builder misuse (a tensor from another builder, a bad layout name) raises
ValueError at the call; graph-level problems raise GraphError at ``build``.
"""

from __future__ import annotations

from hipdnn_trace.graph.build_attention import AttentionBuilder
from hipdnn_trace.graph.build_blockscale import BlockScaleBuilder
from hipdnn_trace.graph.build_conv import ConvBuilder
from hipdnn_trace.graph.build_matmul import MatmulBuilder
from hipdnn_trace.graph.build_moe import MoeBuilder
from hipdnn_trace.graph.build_norms import (
    BatchnormBackwardOutputs,
    BatchnormOutputs,
    LayernormOutputs,
    NormBuilder,
    RMSNormOutputs,
)
from hipdnn_trace.graph.build_pointwise import PointwiseBuilder
from hipdnn_trace.graph.build_reduction import ReductionBuilder
from hipdnn_trace.graph.build_resample import ResampleBuilder

__all__ = [
    "BatchnormBackwardOutputs",
    "BatchnormOutputs",
    "GraphBuilder",
    "LayernormOutputs",
    "RMSNormOutputs",
]


class GraphBuilder(ConvBuilder, MatmulBuilder, PointwiseBuilder, NormBuilder, ReductionBuilder, AttentionBuilder,
                   BlockScaleBuilder, MoeBuilder, ResampleBuilder):
    """Accumulates tensors and nodes; :meth:`build` checks and returns the Graph.

    One mixin per op family (the ``builder`` of each entry in ``graph/families.py``; listed here
    rather than derived so type checkers see every method, and tests/graph/test_family_registry.py
    checks the two agree), all on :class:`~hipdnn_trace.graph.build_base.BuilderBase`.
    """

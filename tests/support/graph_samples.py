"""Small base graphs for the graph tests, and where the graphs they read live (bundled and upstream)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repo_paths import GRAPHS, SHARED_FIXTURES

from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.graph.write import graph_to_json

FIXTURE_GRAPHS = SHARED_FIXTURES / "graphs"
__all__ = ["GRAPHS", "FIXTURE_GRAPHS", "as_json", "batchnorm_graph", "conv_bias_relu", "fixture_graph_files",
           "matmul_graph", "reduction_graph"]


def fixture_graph_files() -> list[Path]:
    return sorted(FIXTURE_GRAPHS.glob("*.json")) if FIXTURE_GRAPHS.is_dir() else []


def conv_bias_relu(io: str = "float") -> Graph:
    """conv (virtual y) -> add bias (virtual) -> relu: three nodes, every port kind."""
    b = GraphBuilder("conv_bias_relu", io=io)
    x = b.tensor("x", [2, 4, 6, 6])
    w = b.tensor("w", [8, 4, 3, 3])
    bias = b.tensor("bias", [1, 8, 1, 1])
    y = b.conv_fwd(x, w, pad=1, name="conv", out="conv_y", virtual=True)
    z = b.pointwise("add", y, bias, name="bias_add", out="biased", virtual=True)
    b.pointwise("relu_fwd", z, name="relu", out="out")
    return b.build()


def matmul_graph() -> Graph:
    b = GraphBuilder("matmul")
    b.matmul(b.tensor("a", [2, 8, 16]), b.tensor("b", [2, 16, 4]), name="mm", out="c")
    return b.build()


def batchnorm_graph() -> Graph:
    b = GraphBuilder("bn")
    x = b.tensor("x", [2, 4, 3, 3])
    b.batchnorm(x, b.tensor("scale", [1, 4, 1, 1]), b.tensor("bias", [1, 4, 1, 1]), name="bn", out="y")
    return b.build()


def reduction_graph() -> Graph:
    b = GraphBuilder("reduce")
    b.reduction("add", b.tensor("x", [4, 6]), [4, 1], name="sum", out="y")
    return b.build()


def as_json(graph: Graph) -> dict[str, Any]:
    return json.loads(json.dumps(graph_to_json(graph)))

"""Small hipDNN graphs and paths shared by the AMD-path tests (the common builders live in
graph_dicts.py beside this file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from graph_dicts import matmul, tensor, write as write_graphs

from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.model import Graph

HERE = Path(__file__).resolve().parent
STAND_INS = HERE / "stand_ins"
REPO = HERE.parents[1]
__all__ = ["REPO", "STAND_INS", "conv_nhwc", "load_graph", "matmul", "write_graphs"]


def conv_nhwc(name: str = "conv_nhwc", node_compute: str = "float") -> dict[str, Any]:
    """A small conv whose tensors are channels-last: bind/fetch must honour the strides."""
    return {
        "name": name, "compute_data_type": "float", "io_data_type": "float", "intermediate_data_type": "float",
        "tensors": [tensor(1, "x", [2, 3, 5, 5], nhwc=True), tensor(2, "w", [4, 3, 3, 3], nhwc=True),
                    tensor(3, "y", [2, 4, 5, 5], nhwc=True)],
        "nodes": [{"name": "conv", "type": "ConvolutionFwdAttributes", "compute_data_type": node_compute,
                   "inputs": {"x_tensor_uid": 1, "w_tensor_uid": 2}, "outputs": {"y_tensor_uid": 3},
                   "parameters": {"pre_padding": [1, 1], "post_padding": [1, 1], "stride": [1, 1],
                                  "dilation": [1, 1], "conv_mode": "CROSS_CORRELATION"}}],
    }


def load_graph(data: dict[str, Any]) -> Graph:
    return load_bytes(json.dumps(data).encode(), f"{data['name']}.json")

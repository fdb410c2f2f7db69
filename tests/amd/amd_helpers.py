"""Small hipDNN graphs and paths shared by the AMD-path tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.model import Graph

HERE = Path(__file__).resolve().parent
STAND_INS = HERE / "stand_ins"
REPO = HERE.parents[1]


def _packed(dims: list[int], order: list[int] | None = None) -> list[int]:
    order = order or list(range(len(dims)))
    strides, step = [0] * len(dims), 1
    for axis in reversed(order):
        strides[axis] = step
        step *= dims[axis]
    return strides


def tensor(uid: int, name: str, dims: list[int], *, nhwc: bool = False, virtual: bool = False,
           dtype: str = "float") -> dict[str, Any]:
    order = [0, *range(2, len(dims)), 1] if nhwc else None
    return {"uid": uid, "name": name, "dims": dims, "strides": _packed(dims, order), "data_type": dtype,
            "virtual": virtual}


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


def matmul(name: str = "mm_small") -> dict[str, Any]:
    return {
        "name": name, "compute_data_type": "float", "io_data_type": "float", "intermediate_data_type": "float",
        "tensors": [tensor(1, "a", [1, 8, 16]), tensor(2, "b", [1, 16, 4]), tensor(3, "c", [1, 8, 4])],
        "nodes": [{"name": "mm", "type": "MatmulAttributes", "compute_data_type": "float",
                   "inputs": {"a_tensor_uid": 1, "b_tensor_uid": 2}, "outputs": {"c_tensor_uid": 3}}],
    }


def write_graphs(folder: Path, graphs: list[dict[str, Any]]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for g in graphs:
        path = folder / f"{g['name']}.json"
        path.write_text(json.dumps(g, indent=2))
        paths.append(path)
    return paths


def load_graph(data: dict[str, Any]) -> Graph:
    return load_bytes(json.dumps(data).encode(), f"{data['name']}.json")

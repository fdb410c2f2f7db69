"""CustomOp: loads with its uid lists as ports, inspect names its id, every backend but hipdnn refuses it."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from hipdnn_trace.backends import cudnn_graph
from hipdnn_trace.backends.hipdnn import HipdnnBackend, hipdnn_json
from hipdnn_trace.backends.reference import executor
from hipdnn_trace.errors import GraphError, UnsupportedError
from hipdnn_trace.graph import ops
from hipdnn_trace.graph.load import execution_order, parse_graph
from hipdnn_trace.graph.write import graph_to_json


def _tensor(uid: int, name: str, dims: list[int], dtype: str = "half") -> dict[str, Any]:
    strides = [1] * len(dims)
    for i in range(len(dims) - 2, -1, -1):
        strides[i] = strides[i + 1] * dims[i + 1]
    return {"uid": uid, "name": name, "dims": dims, "strides": strides, "data_type": dtype, "virtual": False}


def custom_graph() -> dict[str, Any]:
    """A relu feeding a plugin's rope (the layout of flatbuffers_sdk json/CustomOpAttributes.hpp)."""
    return {
        "name": "relu_then_rope", "compute_data_type": "float", "io_data_type": "half",
        "intermediate_data_type": "float",
        "tensors": [_tensor(1, "x", [2, 8, 64]), _tensor(2, "freqs", [8, 32], "float"),
                    {**_tensor(3, "r", [2, 8, 64]), "virtual": True}, _tensor(4, "y", [2, 8, 64])],
        "nodes": [
            {"name": "relu", "type": "PointwiseAttributes", "compute_data_type": "float",
             "inputs": {"in_0_tensor_uid": 1, "in_1_tensor_uid": None, "in_2_tensor_uid": None,
                        "operation": "relu_fwd", "relu_lower_clip": None, "relu_upper_clip": None,
                        "relu_lower_clip_slope": None, "axis_tensor_uid": None, "swish_beta": None,
                        "elu_alpha": None, "softplus_beta": None},
             "outputs": {"out_0_tensor_uid": 3}},
            {"name": "rope", "type": "CustomOpAttributes", "compute_data_type": "float",
             "custom_op_id": "example.rope", "input_tensor_uids": [3, 2], "output_tensor_uids": [4],
             "data": [1, 0, 0, 0]},
        ],
    }


def test_uid_lists_become_ports_wired_like_any_other_node() -> None:
    graph = parse_graph(custom_graph(), "custom.json")
    rope = graph.nodes[1]
    assert dict(rope.inputs) == {"input_0": 3, "input_1": 2} and dict(rope.outputs) == {"output_0": 4}
    assert execution_order(graph) == [0, 1]
    assert [t.name for t in graph.output_tensors] == ["y"]
    assert ops.node_notes(rope, graph)[0].startswith("custom_op_id 'example.rope'")


def test_the_file_is_written_back_as_read() -> None:
    raw = custom_graph()
    assert graph_to_json(parse_graph(copy.deepcopy(raw), "custom.json"))["nodes"][1] == raw["nodes"][1]


@pytest.mark.parametrize(("mutate", "path"), [
    (lambda n: n.pop("data"), "$.nodes[1].data: missing required field"),
    (lambda n: n.update(custom_op_id=""), "$.nodes[1].custom_op_id: must be a non-empty string"),
    (lambda n: n.update(data=[1, 300]), "$.nodes[1].data: must be a list of byte values"),
    (lambda n: n.update(input_tensor_uids=[3, 99]), "$.nodes[1].input_tensor_uids[1]: uid 99 is not a tensor"),
    (lambda n: n.update(output_tensor_uids=7), "$.nodes[1].output_tensor_uids: expected a list of tensor uids"),
])
def test_broken_custom_ops_are_one_line_errors_naming_the_key(mutate, path: str) -> None:
    raw = custom_graph()
    mutate(raw["nodes"][1])
    with pytest.raises(GraphError) as err:
        parse_graph(raw, "custom.json")
    assert f"custom.json: {path}" in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_reference_and_cudnn_refuse_naming_the_custom_op_id() -> None:
    graph = parse_graph(custom_graph(), "custom.json")
    assert "'example.rope'" in executor.check(graph) and "float64 reference" in executor.check(graph)
    with pytest.raises(UnsupportedError, match=r"'example\.rope'.*not cuDNN"):
        cudnn_graph.plan(graph)


def test_torch_refuses_naming_the_custom_op_id() -> None:
    torch_ops = pytest.importorskip("hipdnn_trace.backends.torch_ops", exc_type=ImportError)
    assert "'example.rope'" in torch_ops.check(parse_graph(custom_graph(), "custom.json"))


def test_hipdnn_backend_accepts_it_and_hands_hipdnn_the_original_json() -> None:
    """No AMD GPU here: only the hand-over (check + the JSON given to Graph.from_json) is tested."""
    graph = parse_graph(custom_graph(), "custom.json")
    assert HipdnnBackend().check(graph)
    text, _ = hipdnn_json(graph)
    assert json.loads(text)["nodes"][1] == custom_graph()["nodes"][1]

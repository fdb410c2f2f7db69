"""make_inputs on the host: each tensor is its own counter stream, ports keep their domains,
and the metadata readers (FLOP counts) work on inputs that cannot become numpy arrays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hipdnn_trace.bench import counter_rng
from hipdnn_trace.bench.inputs import CONSTANT_PORTS, drawn, host_array, make_input, make_inputs
from hipdnn_trace.graph import ops
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.dtypes import numpy_dtype
from hipdnn_trace.graph.load import load_file

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"


def _domains_graph(io: str = "float"):
    b = GraphBuilder(f"domains_{io}", io=io, compute="float")
    x, y = b.tensor("x", [64, 128]), b.tensor("y", [64, 128])
    logged = b.pointwise("log", x, virtual=True)
    b.pointwise("div", logged, y, out="out")
    return b.build()


def test_each_tensor_is_its_own_counter_stream() -> None:
    """A tensor's values come from (seed, graph_id, uid) alone: the order tensors are made in, and
    the other tensors, change nothing."""
    graph = _domains_graph()
    inputs = make_inputs(graph, 5)
    for t in reversed(graph.input_tensors):
        alone = make_input(graph, t, 5)
        assert alone.tobytes() == inputs[t.uid].tobytes()
        domain = "positive" if t.name == "x" else "nonzero"
        stream = counter_rng.Stream.of(5, graph.graph_id, t.uid)
        assert alone.tobytes() == drawn(t.dims, t.data_type, domain, stream).tobytes()
    x, y = (inputs[t.uid] for t in graph.input_tensors)
    assert abs(np.corrcoef(np.abs(x).ravel(), np.abs(y).ravel())[0, 1]) < 0.1
    other = make_inputs(graph, 6)
    assert all(np.mean(other[u] == inputs[u]) < 0.01 for u in inputs)


@pytest.mark.parametrize("io", ["float", "half", "bfloat16", "double"])
def test_ports_keep_their_domains(io: str) -> None:
    graph = _domains_graph(io)
    inputs = make_inputs(graph, 0)
    x, y = (inputs[t.uid].astype(np.float64) for t in graph.input_tensors)
    assert all(inputs[t.uid].dtype == numpy_dtype(io) for t in graph.input_tensors)
    assert x.min() >= 0.5                                   # log's argument: positive
    assert np.abs(y).min() >= 0.25 and (y < 0).any()        # divisor: nonzero, both signs
    assert x.shape == y.shape == (64, 128)


def test_epsilon_and_momentum_tensors_are_their_constants() -> None:
    b = GraphBuilder("bn_constants", io="float", compute="float")
    x = b.tensor("x", [2, 4, 3, 3])
    c = [b.tensor(n, [1, 4, 1, 1]) for n in ("scale", "bias", "mean", "var")]
    b.batchnorm(x, c[0], c[1], epsilon=b.tensor("epsilon", [1]), momentum=b.tensor("momentum", [1]),
                prev_running_mean=c[2], prev_running_variance=c[3])
    graph = b.build()
    inputs = make_inputs(graph, 0)
    by_name = {t.name: inputs[t.uid] for t in graph.input_tensors}
    assert by_name["epsilon"].tolist() == [np.float32(CONSTANT_PORTS["epsilon"])]
    assert by_name["momentum"].tolist() == [np.float32(CONSTANT_PORTS["momentum"])]
    assert by_name["var"].min() >= 0.5                      # prev_running_variance: positive


def test_integer_and_boolean_inputs_stay_in_their_ranges() -> None:
    b = GraphBuilder("ints", io="float", compute="float")
    t = {d: b.tensor(d, [40, 50], dtype=d) for d in ("int8", "uint8", "int32", "boolean")}
    b.pointwise("add", t["int8"], t["uint8"], out="s0", dtype="float")
    b.pointwise("add", t["int32"], t["boolean"], out="s1", dtype="float")
    graph = b.build()
    inputs = make_inputs(graph, 0)
    ranges = {"int8": (-8, 8), "uint8": (0, 15), "int32": (-8, 8), "boolean": (0, 1)}
    for tensor in graph.input_tensors:
        v = inputs[tensor.uid]
        assert v.dtype == np.dtype(tensor.data_type if tensor.data_type != "boolean" else np.bool_)
        lo, hi = ranges[tensor.data_type]
        assert v.astype(int).min() == lo and v.astype(int).max() == hi


def test_host_array_of_a_host_array_is_itself() -> None:
    graph = _domains_graph()
    inputs = make_inputs(graph, 0)
    t = graph.input_tensors[0]
    assert host_array(inputs[t.uid], t) is inputs[t.uid]


class DeviceOnly:
    """Stands for a GPU tensor: reshape, indexing and int() work; np.asarray refuses, as torch
    does for a CUDA tensor."""

    def __init__(self, a: Any) -> None:
        self.a = np.asarray(a)

    def reshape(self, *shape: Any) -> DeviceOnly:
        return DeviceOnly(self.a.reshape(*shape))

    def __getitem__(self, i: Any) -> DeviceOnly:
        return DeviceOnly(self.a[i])

    def __int__(self) -> int:
        return int(self.a)

    def __len__(self) -> int:
        return len(self.a)

    def __iter__(self):
        return (DeviceOnly(v) for v in self.a)

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError("can't convert cuda:0 device type tensor to numpy")


@pytest.mark.parametrize("name", ["moe/moe_grouped_matmul_none_fp16.json",
                                  "moe/moe_grouped_matmul_scatter_top2_bf16.json",
                                  "attention/sdpa_varlen_causal_bf16.json"])
def test_flops_read_metadata_from_device_tensors(name: str) -> None:
    graph = load_file(GRAPHS / name)
    host = make_inputs(graph, 0)
    if "moe" in name:   # a first offset past 0, so the count depends on the bound value
        node = graph.nodes[0]
        uid = node.inputs["first_token_offset"]
        host[uid] = np.full_like(host[uid], 100)
    on_device = {u: DeviceOnly(v) for u, v in host.items()}
    with pytest.raises(TypeError):
        np.asarray(on_device[graph.input_tensors[0].uid])
    assert ops.graph_flops(graph, on_device) == ops.graph_flops(graph, host) < ops.graph_flops(graph)

"""A corpus of malformed graphs, each a mutation of a valid one: every case must give
exit code 1 and exactly one line on stderr naming the file, the JSON path and the
problem (no traceback), and no two cases may share a message."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from graph_samples import as_json, batchnorm_graph, conv_bias_relu, matmul_graph, reduction_graph

from hipdnn_trace.cli import main

BASES = {
    "conv": lambda: as_json(conv_bias_relu()),
    "matmul": lambda: as_json(matmul_graph()),
    "bn": lambda: as_json(batchnorm_graph()),
    "reduce": lambda: as_json(reduction_graph()),
}
Mutation = Callable[[dict[str, Any]], "dict[str, Any] | bytes"]


def text(g: dict[str, Any]) -> str:
    return json.dumps(g, indent=1)


def setting(path: str, value: Any) -> Mutation:
    """Set g[path] (dotted, list indices as numbers) to value."""
    def mutate(g: dict[str, Any]) -> dict[str, Any]:
        *parents, last = path.split(".")
        obj: Any = g
        for p in parents:
            obj = obj[int(p)] if p.isdigit() else obj[p]
        obj[int(last) if last.isdigit() else last] = value
        return g
    return mutate


def deleting(path: str) -> Mutation:
    def mutate(g: dict[str, Any]) -> dict[str, Any]:
        *parents, last = path.split(".")
        obj: Any = g
        for p in parents:
            obj = obj[int(p)] if p.isdigit() else obj[p]
        del obj[int(last) if last.isdigit() else last]
        return g
    return mutate


def raw(transform: Callable[[str], str | bytes]) -> Mutation:
    def mutate(g: dict[str, Any]) -> bytes:
        out = transform(text(g))
        return out if isinstance(out, bytes) else out.encode()
    return mutate


def cycle(g: dict[str, Any]) -> dict[str, Any]:
    # conv reads the relu's output, relu (through bias_add) reads the conv's
    g["nodes"][0]["inputs"]["x_tensor_uid"] = 6
    g["tensors"][5]["dims"] = [2, 4, 6, 6]
    g["tensors"][5]["strides"] = [144, 36, 6, 1]
    return g


def self_loop(g: dict[str, Any]) -> dict[str, Any]:
    g["nodes"][2]["inputs"]["in_0_tensor_uid"] = 6
    return g


def deep(g: dict[str, Any]) -> dict[str, Any]:
    nested: Any = 1
    for _ in range(40):
        nested = [nested]
    g["_comment"] = nested
    return g


def duplicate_key(s: str) -> str:
    return s.replace('"uid": 1,', '"uid": 1, "uid": 1,', 1)


def non_utf8(s: str) -> bytes:
    return s.replace('"x"', '"x\udcff"').encode("utf-8", "surrogateescape")


CASES: list[tuple[str, str, Mutation, str]] = [
    # (id, base, mutation, fragment every message must contain)
    ("truncated", "conv", raw(lambda s: s[: len(s) // 2]), "invalid JSON"),
    ("empty", "conv", raw(lambda s: "  \n"), "file is empty"),
    ("not_utf8", "conv", raw(non_utf8), "not UTF-8"),
    ("nan_literal", "bn", raw(lambda s: s.replace("1e-05", "NaN")), "NaN is not valid JSON"),
    ("infinity_literal", "bn", raw(lambda s: s.replace("1e-05", "-Infinity")), "-Infinity is not valid JSON"),
    ("overflowing_number", "bn", raw(lambda s: s.replace("1e-05", "1e999")), "$.tensors[3].value"),
    ("duplicate_key", "conv", raw(duplicate_key), "duplicate key 'uid'"),
    ("deep_nesting", "conv", deep, "nested deeper"),
    ("extra_data", "conv", raw(lambda s: s + "{}"), "Extra data"),
    ("top_level_list", "conv", lambda g: [g], "$: expected an object"),  # type: ignore[list-item, return-value]
    ("missing_name", "conv", deleting("name"), "$: missing required field 'name'"),
    ("name_wrong_type", "conv", setting("name", 7), "$.name: expected a string"),
    ("unknown_io_type", "conv", setting("io_data_type", "float33"), "$.io_data_type: unknown data type"),
    ("tensors_not_list", "conv", setting("tensors", {}), "$.tensors: expected a list"),
    ("no_nodes", "conv", setting("nodes", []), "$.nodes: a graph needs at least one node"),
    ("missing_uid", "conv", deleting("tensors.0.uid"), "$.tensors[0]: missing required field 'uid'"),
    ("uid_string", "conv", setting("tensors.0.uid", "1"), "$.tensors[0].uid: expected an integer"),
    ("uid_bool", "conv", setting("tensors.1.uid", True), "$.tensors[1].uid: expected an integer, got a boolean"),
    ("uid_beyond_int64", "conv", setting("tensors.2.uid", 2**64), "$.tensors[2].uid"),
    ("duplicate_uid", "conv", setting("tensors.1.uid", 1), "$.tensors[1].uid: uid 1 is also used"),
    ("unknown_dtype", "conv", setting("tensors.0.data_type", "float8"), "$.tensors[0].data_type: unknown data type"),
    ("dims_not_list", "conv", setting("tensors.0.dims", 4), "$.tensors[0].dims: expected a list"),
    ("dim_float", "conv", setting("tensors.0.dims.1", 4.5), "$.tensors[0].dims[1]: expected an integer"),
    ("no_dims", "conv", setting("tensors.2.dims", []), "$.tensors[2].dims: a tensor needs at least one dim"),
    ("rank_mismatch", "conv", setting("tensors.0.strides", [144, 36, 1]), "$.tensors[0].strides: rank 3 differs"),
    ("zero_dim", "conv", setting("tensors.0.dims.2", 0), "$.tensors[0].dims[2]: dim 0 must be >= 1"),
    ("negative_stride", "conv", setting("tensors.0.strides.1", -36), "$.tensors[0].strides[1]"),
    ("overlapping_strides", "conv", setting("tensors.0.strides", [144, 1, 6, 1]), "overlap"),
    ("absurd_dims", "conv", setting("tensors.0.dims", [2**20, 2**20, 6, 6]), "larger than any device"),
    ("absurd_strides", "conv", setting("tensors.0.strides", [2**50, 36, 6, 1]), "$.tensors[0].strides"),
    ("virtual_not_bool", "conv", setting("tensors.0.virtual", "no"), "$.tensors[0].virtual: expected true"),
    ("unknown_value_type", "bn", setting("tensors.3.value_type", "Float128Value"), "$.tensors[3].value_type"),
    ("value_not_number", "bn", setting("tensors.3.value", "tiny"), "$.tensors[3].value: expected a number"),
    ("value_without_type", "bn", deleting("tensors.3.value_type"), "$.tensors[3].value: a value needs"),
    ("unknown_op", "conv", setting("nodes.0.type", "ConvolutionFwdAttributez"), "$.nodes[0].type: unknown op"),
    ("node_without_type", "conv", deleting("nodes.1.type"), "$.nodes[1]: missing required field 'type'"),
    ("node_compute_type", "conv", setting("nodes.2.compute_data_type", "quad"), "$.nodes[2].compute_data_type"),
    ("inputs_not_object", "conv", setting("nodes.0.inputs", [1, 2]), "$.nodes[0].inputs: expected an object"),
    ("dangling_reference", "conv", setting("nodes.0.inputs.w_tensor_uid", 99),
     "$.nodes[0].inputs.w_tensor_uid: uid 99 is not a tensor"),
    ("port_float", "conv", setting("nodes.0.inputs.x_tensor_uid", 1.0),
     "$.nodes[0].inputs.x_tensor_uid: expected an integer"),
    ("missing_input_port", "conv", deleting("nodes.0.inputs.w_tensor_uid"), "ConvolutionFwd needs input w_tensor_uid"),
    ("null_required_port", "conv", setting("nodes.1.inputs.in_0_tensor_uid", None), "Pointwise needs input in_0"),
    ("missing_output_port", "conv", deleting("nodes.2.outputs.out_0_tensor_uid"), "Pointwise needs output out_0"),
    ("input_listed_as_output", "conv", setting("nodes.0.outputs.x_tensor_uid", 1), "is an input port of"),
    ("two_writers", "conv", setting("nodes.2.outputs.out_0_tensor_uid", 5), "already written by nodes[1]"),
    ("cycle", "conv", cycle, "cycle through nodes"),
    ("self_loop", "conv", self_loop, "reads a tensor it writes itself"),
    ("virtual_never_written", "conv", setting("tensors.0.virtual", True), "reads virtual tensor 1"),
    ("value_as_output", "bn", setting("nodes.0.outputs.y_tensor_uid", 4), "by-value scalar and cannot be an output"),
    ("conv_output_dims", "conv", setting("tensors.3.dims", [2, 8, 5, 5]), "do not match the convolution's output"),
    ("conv_missing_stride", "conv", deleting("nodes.0.parameters.stride"),
     "$.nodes[0].parameters.stride: must be a list"),
    ("conv_zero_stride", "conv", setting("nodes.0.parameters.stride", [0, 1]), "stride and dilation must be >= 1"),
    ("conv_negative_pad", "conv", setting("nodes.0.parameters.pre_padding", [-1, 1]), "padding must be >= 0"),
    ("conv_groups", "conv", setting("tensors.1.dims", [8, 3, 3, 3]), "not a multiple of w's 3 channels"),
    ("conv_rank", "conv", lambda g: setting("tensors.1.strides", [36, 9, 1])(setting("tensors.1.dims", [8, 4, 9])(g)),
     "convolution tensors need equal rank"),
    ("conv_mode", "conv", setting("nodes.0.parameters.conv_mode", "SIDEWAYS"), "$.nodes[0].parameters.conv_mode"),
    ("matmul_inner_dims", "matmul",
     lambda g: setting("tensors.1.strides", [60, 4, 1])(setting("tensors.1.dims", [2, 15, 4])(g)),
     "inner dims differ"),
    ("matmul_batch", "matmul",
     lambda g: setting("tensors.1.strides", [64, 4, 1])(setting("tensors.1.dims", [3, 16, 4])(g)),
     "do not broadcast"),
    ("matmul_output_dims", "matmul",
     lambda g: setting("tensors.2.strides", [40, 5, 1])(setting("tensors.2.dims", [2, 8, 5])(g)),
     "do not match a @ b"),
    ("pointwise_broadcast", "conv", setting("tensors.2.dims", [1, 3, 1, 1]), "do not broadcast to the output"),
    ("pointwise_unknown_mode", "conv", setting("nodes.2.inputs.operation", "relu"), "$.nodes[2].inputs.operation"),
    ("pointwise_missing_mode", "conv", deleting("nodes.1.inputs.operation"),
     "$.nodes[1].inputs: missing required field 'operation'"),
    ("pointwise_arity", "conv", setting("nodes.1.inputs.in_1_tensor_uid", None), "add takes 2 input(s)"),
    ("reduction_missing_mode", "reduce", deleting("nodes.0.mode"), "$.nodes[0]: missing required field 'mode'"),
    ("batchnorm_per_channel", "bn",
     lambda g: setting("tensors.1.strides", [5, 1, 1, 1])(setting("tensors.1.dims", [1, 5, 1, 1])(g)),
     "expected one per channel (4)"),
    ("reduction_dims", "reduce", setting("tensors.1.dims", [2, 1]), "are not a reduction of"),
    ("reduction_mode", "reduce", setting("nodes.0.mode", "median"), "$.nodes[0].mode"),
]


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 30
    assert len({c[0] for c in CASES}) == len(CASES)


def _run(case: tuple[str, str, Mutation, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    name, base, mutate, fragment = case
    value = mutate(copy.deepcopy(BASES[base]()))
    path = tmp_path / f"{name}.json"
    path.write_bytes(value if isinstance(value, bytes) else text(value).encode())
    rc = main(["inspect", str(path)])
    out, err = capsys.readouterr()
    assert rc == 1, f"{name}: exit {rc}, stdout {out[:200]!r}"
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, f"{name}: expected one line, got {err!r}"
    assert str(path) in lines[0], lines[0]
    assert fragment in lines[0], f"{name}: {fragment!r} not in {lines[0]!r}"
    return lines[0].replace(str(path), "<file>")


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_malformed_graph_gives_one_line_and_exit_1(case, tmp_path, capsys) -> None:
    _run(case, tmp_path, capsys)


def test_every_malformed_graph_has_its_own_message(tmp_path, capsys) -> None:
    messages = [_run(case, tmp_path, capsys) for case in CASES]
    seen: dict[str, str] = {}
    for case, message in zip(CASES, messages):
        assert message not in seen, f"{case[0]} and {seen[message]} share {message!r}"
        seen[message] = case[0]


@pytest.mark.parametrize("base", sorted(BASES))
def test_unmutated_bases_load(base, tmp_path, capsys) -> None:
    path = tmp_path / f"{base}.json"
    path.write_text(text(BASES[base]()))
    assert main(["inspect", "--quiet", str(path)]) == 0
    assert capsys.readouterr().err == ""

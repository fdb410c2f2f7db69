"""hipDNN's own FLOP and byte models (``umd_flops`` / ``umd_bytes``, hipDNN RFC 0019 §14.6): the graph
loads, keeps and writes them, they evaluate over the node's bindings, and ``inspect`` and the summary show
them beside ours, flagging a difference over 1%.

The expression under test is RFC 0019's own SDPA example (ROCm/rocm-libraries
``projects/hipdnn/docs/rfcs/0019_UniversalHeuristicDescriptor.md`` §14.6, the ``sdpa_attributes.fbs``
block): ``{"*": [4, "$q.batch", "$q.num_heads", "$q.seqlen_q", "$k.seqlen_k", "$q.head_size"]}``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import graph_dicts
import pytest

from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.records import ConfigRun, GraphRun
from hipdnn_trace.cli import main
from hipdnn_trace.errors import GraphError
from hipdnn_trace.graph import ops, umd
from hipdnn_trace.graph.load import load_file, parse_graph
from hipdnn_trace.graph.write import dumps
from hipdnn_trace.results.rows import summary_rows

#: RFC 0019 §14.6's SDPA umd_flops, as the .fbs attribute holds it (JSON text)
RFC_SDPA_FLOPS = '{"*":[4,"$q.batch","$q.num_heads","$q.seqlen_q","$k.seqlen_k","$q.head_size"]}'
#: RFC 0019 §14.6's umd_bytes, written out: "sum of per-tensor (element_count * dtype_bytes) for Q, K, V, O"
RFC_SDPA_BYTES = {"+": [{"*": [f"${p}.element_count", f"${p}.dtype_bytes"]} for p in ("q", "k", "v", "o")]}

# JsonLogic's published test cases: the if / missing / merge cases of jwadhams/json-logic-js tests/tests.json
# @ 043dd54b, and the arithmetic, comparison and var cases of the jsonlogic.com suite (tests.json; not
# reachable from here, transcribed from its operations page examples).
PUBLISHED = [
    ({"if": []}, None, None), ({"if": [True]}, None, True), ({"if": [False]}, None, False),
    ({"if": ["apple"]}, None, "apple"), ({"if": [True, "apple"]}, None, "apple"),
    ({"if": [False, "apple"]}, None, None), ({"if": [False, "apple", "banana"]}, None, "banana"),
    ({"if": [[], "apple", "banana"]}, None, "banana"), ({"if": [[1], "apple", "banana"]}, None, "apple"),
    ({"if": ["", "apple", "banana"]}, None, "banana"), ({"if": ["0", "apple", "banana"]}, None, "apple"),
    ({"===": [0, "0"]}, None, False), ({"===": [0, {"+": "0"}]}, None, True),
    ({"if": [{"+": "0"}, "apple", "banana"]}, None, "banana"), ({"if": [0, "apple", "banana"]}, None, "banana"),
    ({"if": [3.1416, "apple", "banana"]}, None, "apple"), ({"if": [-1, "apple", "banana"]}, None, "apple"),
    ({"if": [{">": [2, 1]}, "apple", "banana"]}, None, "apple"),
    ({"if": [True, {"cat": ["ap", "ple"]}, {"cat": ["ba", "na", "na"]}]}, None, "apple"),
    ({"if": [False, "apple", False, "banana", "carrot"]}, None, "carrot"),
    ({"if": [False, "apple", False, "banana", False, "carrot", "date"]}, None, "date"),
    ({"if": [False, "apple", True, "banana", True, "carrot", "date"]}, None, "banana"),
    ({"missing": []}, None, []), ({"missing": ["a"]}, None, ["a"]), ({"missing": "a"}, {"a": "apple"}, []),
    ({"missing": ["a", "b"]}, {"a": "apple"}, ["b"]), ({"missing": ["a.b"]}, {"a": {"c": "apple cake"}}, ["a.b"]),
    ({"missing": ["a.b", "a.c"]}, {"a": {"b": "apple brownie"}}, ["a.c"]),
    ({"merge": []}, None, []), ({"merge": [[1], [2, 3]]}, None, [1, 2, 3]), ({"merge": 1}, None, [1]),
    ({"missing": {"merge": ["vin", {"if": [{"var": "financing"}, ["apr"], []]}]}}, {"financing": True},
     ["vin", "apr"]),
    ({"+": [4, 2]}, None, 6), ({"+": [2, 2, 2, 2, 2]}, None, 10), ({"+": "3.14"}, None, 3.14),
    ({"-": [4, 2]}, None, 2), ({"-": 2}, None, -2), ({"*": [4, 2]}, None, 8), ({"*": [2, 2, 2, 2, 2]}, None, 32),
    ({"/": [4, 2]}, None, 2), ({"%": [101, 2]}, None, 1), ({"min": [1, 2, 3]}, None, 1),
    ({"max": [1, 2, 3]}, None, 3), ({"<": [1, 2, 3]}, None, True), ({"<": [1, 1, 3]}, None, False),
    ({"<=": [1, 1, 3]}, None, True), ({"==": [1, 1]}, None, True), ({"==": [1, "1"]}, None, True),
    ({"!=": [1, 2]}, None, True), ({"!": [True]}, None, False), ({"!!": [["0"]]}, None, True),
    ({"and": [True, False]}, None, False), ({"or": [False, "a"]}, None, "a"),
    ({"var": ["a"]}, {"a": 1}, 1), ({"var": ["b"]}, {"a": 1}, None), ({"var": ["a"]}, None, None),
    ({"var": "a"}, {"a": 1}, 1), ({"var": ["z", 26]}, {"a": 1}, 26), ({"var": "a.b"}, {"a": {"b": "c"}}, "c"),
    ({"var": 1}, ["apple", "banana"], "banana"), ({"var": "1"}, ["apple", "banana"], "banana"),
    ({"in": ["Spring", "Springfield"]}, None, True), ({"in": ["b", ["a", "b"]]}, None, True),
    ({"cat": ["I love", " pie"]}, None, "I love pie"), ({"substr": ["jsonlogic", 4]}, None, "logic"),
]


@pytest.mark.parametrize("rule,data,expected", PUBLISHED)
def test_library_passes_jsonlogic_published_cases(rule, data, expected) -> None:
    from json_logic import jsonLogic

    assert jsonLogic(copy.deepcopy(rule), data, umd.OPERATIONS) == expected


def _sdpa_graph(causal: bool = False, **attrs) -> dict:
    """An SDPA graph (B 2, Hq 4, Hkv 2, Sq 24, Skv 40, d 32, fp16) carrying ``attrs`` in its attributes."""
    return graph_dicts.sdpa([2, 4, 24, 32], [2, 2, 40, 32], causal=causal, name="umd", **attrs)


def test_rfc_example_evaluates_to_our_flops_and_bytes() -> None:
    graph = parse_graph(_sdpa_graph(umd_flops=RFC_SDPA_FLOPS, umd_bytes=RFC_SDPA_BYTES), "umd")
    model = umd.graph_model(graph)
    assert model is not None and model.notes == ()
    assert model.flops == 4 * 2 * 4 * 24 * 40 * 32 == ops.graph_flops(graph)
    assert model.bytes == 2 * (2 * 4 * 24 * 32 * 2 + 2 * 2 * 40 * 32 * 2) == ops.graph_bytes(graph)
    assert model.flags(ops.graph_flops(graph), ops.graph_bytes(graph)) == []


def test_expressions_are_kept_and_written_back(tmp_path: Path) -> None:
    graph = parse_graph(_sdpa_graph(umd_flops=RFC_SDPA_FLOPS, umd_bytes=RFC_SDPA_BYTES), "umd")
    written = json.loads(dumps(graph))["nodes"][0]["attributes"]
    assert written["umd_flops"] == RFC_SDPA_FLOPS and written["umd_bytes"] == RFC_SDPA_BYTES
    path = tmp_path / "again.json"
    path.write_text(dumps(graph))
    assert umd.graph_model(load_file(path)) == umd.graph_model(graph)


def test_inspect_shows_both_numbers(tmp_path: Path, capsys) -> None:
    path = tmp_path / "g.json"
    path.write_text(json.dumps(_sdpa_graph(umd_flops=RFC_SDPA_FLOPS, umd_bytes=RFC_SDPA_BYTES)))
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "  cost       983 kFLOP, 45.1 kB" in out
    assert "  hipDNN     983 kFLOP, 45.1 kB (its umd_flops / umd_bytes)" in out
    assert "DIFFERS" not in out
    assert main(["inspect", "--json", str(path)]) == 0
    [info] = json.loads(capsys.readouterr().out)
    assert info["umd"] == {"flops": info["flops"], "bytes": info["bytes"], "flags": [], "notes": []}


def test_wrong_expression_is_flagged_with_both_numbers(tmp_path: Path, capsys) -> None:
    """The RFC's 4·B·H·Sq·Sk·D counts every (query, key) pair; with a causal mask ours counts the kept
    ones only, so the two differ by more than 1% and both numbers are shown."""
    raw = _sdpa_graph(causal=True, umd_flops=RFC_SDPA_FLOPS)
    path = tmp_path / "g.json"
    path.write_text(json.dumps(raw))
    graph = load_file(path)
    ours, theirs = ops.graph_flops(graph), 4.0 * 2 * 4 * 24 * 40 * 32
    assert ours < 0.99 * theirs
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    [line] = [x for x in out.splitlines() if "DIFFERS" in x]
    assert f"{theirs:.6g}" in line and f"{ours:.6g}" in line
    assert main(["inspect", "-q", str(path)]) == 0
    assert "DIFFERS" in capsys.readouterr().out
    run = GraphRun(source=str(path), name="g", graph=graph, graph_id=graph.graph_id)
    run.configs.append(ConfigRun(config=Config("torch", "torch")))
    [row] = summary_rows("r", run)
    assert row["umd_flops"] == theirs and row["umd_bytes"] is None
    assert f"{theirs:.6g}" in row["umd_flag"] and f"{ours:.6g}" in row["umd_flag"]


def test_within_one_percent_is_not_flagged() -> None:
    assert not umd.differs(100.5, 100.0) and umd.differs(101.5, 100.0) and umd.differs(1.0, 0.0)
    assert not umd.differs(None, 100.0)


@pytest.mark.parametrize("value,words", [
    ('{"*": [4, "$q.batch"', "not JSON text"),
    ({"*": [4, "$q.batch"], "+": [1]}, "one key"),
    ({"frobnicate": [1]}, "unknown operator 'frobnicate'"),
    ({"*": [{"var": "q.batch"}, 2]}, "'var' is not hipDNN's"),
    ({"+": ["$", 1]}, "bare '$'"),
])
def test_malformed_expression_is_a_one_line_error_naming_the_field(tmp_path: Path, capsys, value, words) -> None:
    with pytest.raises(GraphError, match="umd_flops") as err:
        parse_graph(_sdpa_graph(umd_flops=value), "f.json")
    assert words in str(err.value) and "\n" not in str(err.value)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_sdpa_graph(umd_flops=value)))
    assert main(["inspect", str(path)]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "$.nodes[0].attributes.umd_flops" in line and words in line


def test_unbound_variable_gives_no_number_and_a_note() -> None:
    graph = parse_graph(_sdpa_graph(umd_flops={"*": [2, "$q.batch", "$kernel.tile_m0"]}), "umd")
    model = umd.graph_model(graph)
    assert model is not None and model.flops is None
    assert any("$kernel.tile_m0" in n for n in model.notes)
    with_default = parse_graph(_sdpa_graph(umd_flops={"*": [2, "$q.batch", {"value_or_default": [
        "$kernel.tile_m0", 3]}]}), "umd")
    assert umd.graph_model(with_default).flops == 12


def test_hipdnn_sigils_and_operators() -> None:
    env = {"a": {"dims": [6, 7]}, "x": 10}
    assert umd.evaluate({"ceil_div": ["$x", 4]}, env) == 3
    assert umd.evaluate({"*": ["$a.dims[1]", "$a.dims.0"]}, env) == 42
    assert umd.evaluate({"log2": [{"pow": [2, 5]}]}, env) == 5
    assert umd.to_jsonlogic("$$text") == "$text"
    assert umd.evaluate({"/": [1, 0]}, env) is None   # not a finite number: no value, not a crash


def test_graph_without_the_fields_shows_nothing(capsys) -> None:
    graph = parse_graph(_sdpa_graph(), "umd")
    assert umd.graph_model(graph) is None


def test_cost_expressions_leave_the_graph_id_alone() -> None:
    """They describe the op's cost, not what it computes: the same graph with or without them is one graph_id,
    while a change to what it computes (the mask) is another."""
    plain = parse_graph(_sdpa_graph(), "plain")
    carrying = parse_graph(_sdpa_graph(umd_flops=RFC_SDPA_FLOPS, umd_bytes=RFC_SDPA_BYTES), "umd")
    assert carrying.graph_id == plain.graph_id
    assert parse_graph(_sdpa_graph(causal=True, umd_flops=RFC_SDPA_FLOPS), "c").graph_id != plain.graph_id

"""Upstream fixtures load; load -> write -> load is the identity; graph_id ignores key
order and whitespace but not content."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import pytest
from graph_samples import GRAPHS, as_json, batchnorm_graph, conv_bias_relu, fixture_graph_files, matmul_graph
from hypothesis import HealthCheck, given, settings, strategies as st

from hipdnn_trace.graph.load import load_bytes, load_file, parse_graph
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.graph.write import canonical, dumps, graph_to_json, write_file

FIXTURES = fixture_graph_files()
SAMPLES = sorted(GRAPHS.rglob("*.json"))


def same_graph(a: Graph, b: Graph) -> bool:
    return dataclasses.replace(a, source="") == dataclasses.replace(b, source="")


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_upstream_fixture_loads_and_round_trips_exactly(path: Path, tmp_path: Path) -> None:
    graph = load_file(path)
    assert graph.nodes and graph.tensors
    assert graph_to_json(graph) == json.loads(path.read_text())   # same JSON value hipDNN wrote
    out = tmp_path / path.name
    write_file(graph, out)
    again = load_file(out)
    assert same_graph(graph, again)
    assert again.graph_id == graph.graph_id


def test_upstream_fixtures_present_or_skip() -> None:
    if not FIXTURES:
        pytest.skip("shared/fixtures/graphs is not beside this checkout")
    names = {p.name for p in FIXTURES}
    assert "sample_conv_fwd.json" in names


def test_fixture_layouts_are_kept() -> None:
    """The nodes keep the sections the file used (parameters vs attributes)."""
    by_name = {p.name: p for p in FIXTURES}
    if "sample_layernorm.json" not in by_name or "sample_conv_fwd.json" not in by_name:
        pytest.skip("fixtures not present")
    ln = load_file(by_name["sample_layernorm.json"])
    assert ln.nodes[0].param_sections["normalized_dim_count"] == "attributes"
    assert ln.value_tensors[0].value == pytest.approx(1e-5)
    conv = load_file(by_name["sample_conv_fwd.json"])
    assert conv.nodes[0].param_sections["stride"] == "parameters"
    assert conv.nodes[0].compute_data_type == "unset"


@pytest.mark.parametrize("path", SAMPLES, ids=[str(p.relative_to(GRAPHS)) for p in SAMPLES])
def test_sample_graph_round_trips(path: Path) -> None:
    graph = load_file(path)
    again = load_bytes(dumps(graph).encode(), "again")
    assert same_graph(graph, again)
    assert graph_to_json(again) == json.loads(path.read_text())


# ------------------------------------------------------------- graph_id

def shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's keys in a random order."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: shuffled(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


BASES = [as_json(conv_bias_relu()), as_json(matmul_graph()), as_json(batchnorm_graph())]
BASES += [json.loads(p.read_text()) for p in FIXTURES]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(range(len(BASES))), seed=st.integers(0, 2**32 - 1),
       indent=st.one_of(st.none(), st.integers(0, 8)), compact=st.booleans())
def test_graph_id_ignores_key_order_and_whitespace(base: int, seed: int, indent: int | None, compact: bool) -> None:
    raw = BASES[base]
    reference = parse_graph(raw, "reference")
    reordered = shuffled(raw, random.Random(seed))
    separators = (",", ":") if compact else (", ", ": ")
    text = json.dumps(reordered, indent=indent, separators=separators)
    graph = load_bytes(("\n\t " + text + " \n").encode(), "shuffled")
    assert graph.graph_id == reference.graph_id
    assert canonical(graph) == canonical(reference)
    assert same_graph(graph, reference)


@pytest.mark.parametrize("change", ["dim", "dtype", "name", "stride_order", "option"])
def test_graph_id_changes_with_content(change: str) -> None:
    raw = as_json(conv_bias_relu())
    edited = json.loads(json.dumps(raw))
    if change == "dim":
        edited["tensors"][0]["dims"][0] = 3
        edited["tensors"][0]["strides"] = [144, 36, 6, 1]
        for t in edited["tensors"][3:]:
            t["dims"][0] = 3
    elif change == "dtype":
        edited["tensors"][0]["data_type"] = "half"
    elif change == "name":
        edited["name"] = "other"
    elif change == "stride_order":
        edited["tensors"][1]["strides"] = [36, 1, 12, 4]
    else:
        edited["nodes"][2]["inputs"]["relu_upper_clip"] = 6.0
    assert parse_graph(edited, "e").graph_id != parse_graph(raw, "r").graph_id


def test_graph_id_is_16_hex_digits_and_source_free() -> None:
    raw = as_json(conv_bias_relu())
    a, b = parse_graph(raw, "a.json"), parse_graph(raw, "elsewhere/b.json")
    assert a.graph_id == b.graph_id
    assert len(a.graph_id) == 16 and int(a.graph_id, 16) >= 0

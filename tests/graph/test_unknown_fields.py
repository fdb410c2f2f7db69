"""Unknown node fields: an error naming the JSON path and the closest known key (hipDNN's own reader
would miss the real key and throw), or with --allow-unknown-fields a warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hipdnn_trace.cli import main
from hipdnn_trace.errors import GraphError
from hipdnn_trace.graph.load import parse_graph

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"


def _raw(rel: str) -> dict:
    return json.loads((GRAPHS / rel).read_text())


def test_a_misspelled_pointwise_option_is_an_error_with_a_suggestion() -> None:
    raw = _raw("pointwise/relu_clip_fp32.json")
    inputs = raw["nodes"][0]["inputs"]
    inputs["relu_lower_clip_slop"] = inputs.pop("relu_lower_clip_slope")
    with pytest.raises(GraphError) as err:
        parse_graph(raw, "relu.json")
    text = str(err.value)
    assert text.startswith("relu.json: $.nodes[0].inputs.relu_lower_clip_slop: unknown field")
    assert "did you mean 'relu_lower_clip_slope'?" in text and "--allow-unknown-fields" in text


@pytest.mark.parametrize(("rel", "edit", "where"), [
    ("matmul/matmul_2d_fp32.json", lambda n: n["inputs"].update(bias_tensor_uid=1), "inputs.bias_tensor_uid"),
    ("norm/layernorm_fp32.json", lambda n: n["attributes"].update(normalised_dim_count=1),
     "attributes.normalised_dim_count"),
    ("moe/moe_grouped_matmul_none_fp32.json", lambda n: n.update(topk=2), "nodes[0].topk"),
])
def test_unknown_ports_and_options_of_any_family_are_caught(rel: str, edit, where: str) -> None:
    raw = _raw(rel)
    edit(raw["nodes"][0])
    with pytest.raises(GraphError, match=r"unknown field"):
        parse_graph(raw, "g.json")
    graph = parse_graph(raw, "g.json", allow_unknown=True)
    assert len(graph.warnings) == 1 and where in graph.warnings[0]


def test_every_bundled_graph_has_only_known_fields() -> None:
    for path in sorted(GRAPHS.rglob("*.json")):
        assert not parse_graph(json.loads(path.read_text()), path.name, allow_unknown=True).warnings, path


def test_run_and_inspect_take_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = _raw("pointwise/relu_clip_fp32.json")
    raw["nodes"][0]["inputs"]["relu_upper_clipp"] = raw["nodes"][0]["inputs"].pop("relu_upper_clip")
    path = tmp_path / "typo.json"
    path.write_text(json.dumps(raw))
    assert main(["inspect", str(path)]) == 1
    assert "did you mean 'relu_upper_clip'?" in capsys.readouterr().err
    assert main(["inspect", str(path), "--allow-unknown-fields"]) == 0
    assert "warning: $.nodes[0].inputs.relu_upper_clipp" in capsys.readouterr().err
    out = tmp_path / "runs"
    assert main(["run", str(path), "-w", "0", "-i", "2", "--out", str(out), "--no-trace",
                 "--allow-unknown-fields"]) == 0
    assert "warning: $.nodes[0].inputs.relu_upper_clipp" in capsys.readouterr().out


@pytest.mark.parametrize(("rel", "key", "value", "fragment"), [
    ("norm/layernorm_fp32.json", "forward_phase", "BOGUS", "unknown forward_phase 'BOGUS'"),
    ("norm/layernorm_fp32.json", "normalized_dim_count", "one",
     "option normalized_dim_count must be an integer or null, got 'one'"),
    ("norm/rmsnorm_fp32.json", "forward_phase", 7, "unknown forward_phase 7"),
    ("norm/layernorm_fp32.json", "normalized_dim_count", 9, "must be an integer from 1 to x's rank 3"),
])
def test_norm_options_of_the_wrong_kind_are_refused_at_load(rel: str, key: str, value, fragment: str) -> None:
    raw = _raw(rel)
    node = raw["nodes"][0]
    section = "attributes" if key in node.get("attributes", {}) else None
    (node[section] if section else node)[key] = value
    with pytest.raises(GraphError, match=fragment):
        parse_graph(raw, "norm.json")

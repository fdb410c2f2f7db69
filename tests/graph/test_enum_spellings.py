"""Every enum spelling hipDNN's repositories write is read the same; anything else is a one-line error
(docs/hipdnn-format.md 1.5, "Other enum spellings seen", and 1.6).

Spellings and where they are written (ROCm/rocm-libraries): upper-case names from the frontend's ``to_json``
(dnn-benchmarking ``graphs/sample_reduction.json`` ``ADD``, ``sample_resample_fwd.json``
``AVGPOOL_EXCLUDE_PADDING``/``ZERO_PAD``, ``sample_layernorm.json`` ``TRAINING`` @ 6c40e006; orchestrator
``test-graphs/conv_fwd_pointwise_fp32_nchw.json`` ``CROSS_CORRELATION`` and ``relu_fwd`` @ 68df9330); lower-case
ones from older serializers (``add``, ``maxpool``: docs 1.6) and the dnn-providers generators' ``TOP_LEFT`` /
``AUTO`` (generate_sdpa_fwd_golden.py @ 3005a4b1). Graphs are built here, not copied.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest

from hipdnn_trace.errors import GraphError
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.write import graph_to_json


def _conv() -> dict:
    b = GraphBuilder("conv")
    b.conv_fwd(b.tensor("x", [1, 4, 6, 6]), b.tensor("w", [2, 4, 3, 3]), pad=1)
    return b.to_json()


def _pointwise() -> dict:
    b = GraphBuilder("pw")
    b.pointwise("relu_fwd", b.tensor("x", [1, 4, 6, 6]))
    return b.to_json()


def _reduction() -> dict:
    b = GraphBuilder("red")
    b.reduction("ADD", b.tensor("x", [2, 3, 4]), [2, 1, 1])
    return b.to_json()


def _pool() -> dict:
    b = GraphBuilder("pool")
    b.pool(b.tensor("x", [1, 2, 6, 6]), "MAXPOOL", 2, stride=2)
    return b.to_json()


def _layernorm() -> dict:
    b = GraphBuilder("ln")
    b.layernorm(b.tensor("x", [2, 8]), b.tensor("g", [1, 8]), b.tensor("b", [1, 8]))
    return b.to_json()


def _sdpa() -> dict:
    b = GraphBuilder("attn", io="half")
    q, k, v = (b.tensor(n, [1, 2, 8, 16]) for n in ("Q", "K", "V"))
    b.sdpa(q, k, v, scale=1 / math.sqrt(16))
    return b.to_json()


def _set(data: dict, key: str, value: Any) -> dict:
    """Replace ``key`` wherever it sits on the first node (a section or the node itself)."""
    node = data["nodes"][0]
    for section in ("inputs", "parameters", "attributes"):
        if key in node.get(section, {}):
            node[section][key] = value
            return data
    assert key in node, f"{key} not on the built node"
    node[key] = value
    return data


# (graph, key, spellings hipDNN's repositories write, a value no hipDNN version has)
CASES: list[tuple[Callable[[], dict], str, tuple[Any, ...], str]] = [
    (_conv, "conv_mode", ("CROSS_CORRELATION", "cross_correlation", "CONVOLUTION"), "CORRELATE"),
    (_pointwise, "operation", ("relu_fwd", "RELU_FWD"), "relu_forward"),
    (_reduction, "mode", ("ADD", "add", "MAX", "max"), "SUMM"),
    (_pool, "resample_mode", ("MAXPOOL", "maxpool", "AVGPOOL_EXCLUDE_PADDING", "avgpool_include_padding"),
     "MINPOOL"),
    (_pool, "padding_mode", ("ZERO_PAD", "zero_pad", "NEG_INF_PAD"), "MIRROR_PAD"),
    (_layernorm, "forward_phase", ("TRAINING", "training", 2), "TRAIN"),
    (_sdpa, "diagonal_alignment", ("TOP_LEFT", "top_left", "BOTTOM_RIGHT"), "CENTER"),
    (_sdpa, "implementation", ("AUTO", "COMPOSITE", "UNIFIED", "auto"), "FUSED"),
]


@pytest.mark.parametrize(("build", "key", "spellings", "bad"), CASES, ids=[c[1] for c in CASES])
def test_every_spelling_loads_and_is_written_back_as_read(build: Callable[[], dict], key: str,
                                                          spellings: tuple[Any, ...], bad: str) -> None:
    for spelling in spellings:
        graph = load_bytes(json.dumps(_set(build(), key, spelling)).encode(), f"{key}.json")
        assert graph.nodes[0].params[key] == spelling
        assert json.dumps(graph_to_json(graph)).count(json.dumps(spelling)) >= 1


@pytest.mark.parametrize(("build", "key", "spellings", "bad"), CASES, ids=[c[1] for c in CASES])
def test_an_unknown_value_is_a_one_line_error(build: Callable[[], dict], key: str,
                                              spellings: tuple[Any, ...], bad: str) -> None:
    with pytest.raises(GraphError, match=key) as info:
        load_bytes(json.dumps(_set(build(), key, bad)).encode(), f"{key}.json")
    assert "\n" not in str(info.value) and bad in str(info.value)

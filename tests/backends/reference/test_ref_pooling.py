"""Pooling (hipDNN's resample): the float64 reference against per-output loops written from
hipDNN's CpuFpReferenceResampleFwd/Bwd, backward against finite differences and the adjoint
identity, the upstream sample's numbers, shape rules with JSON paths, the cuDNN refusal."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from finite_differences import numeric_grad
from graph_dicts import load_error

from hipdnn_trace.backends import cudnn_graph
from hipdnn_trace.backends.reference import executor
from hipdnn_trace.backends.reference.ops import pool_backward, pool_forward
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.load import load_file, parse_graph
from hipdnn_trace.graph.resample import Pooling, output_dims
from hipdnn_trace.graph.write import graph_to_json

RNG = np.random.default_rng(11)
CASES = [
    Pooling("MAXPOOL", "ZERO_PAD", (3, 3), (2, 2), (1, 1), (1, 1)),
    Pooling("MAXPOOL", "NEG_INF_PAD", (2, 3), (1, 2), (1, 0), (0, 2)),
    Pooling("AVGPOOL_INCLUDE_PADDING", "ZERO_PAD", (3, 2), (2, 1), (1, 0), (0, 1)),
    Pooling("AVGPOOL_EXCLUDE_PADDING", "ZERO_PAD", (3, 3), (2, 2), (2, 1), (1, 2)),
    Pooling("AVGPOOL_EXCLUDE_PADDING", "ZERO_PAD", (2, 2, 3), (2, 1, 2), (1, 0, 1), (0, 1, 1)),
    Pooling("MAXPOOL", "NEG_INF_PAD", (2, 2, 2), (2, 2, 1), (0, 1, 0), (1, 0, 1)),
]


def loop_forward(x: np.ndarray, p: Pooling):
    """CpuFpReferenceResampleFwd, one output and one window element at a time."""
    spatial = x.shape[2:]
    out = output_dims(spatial, p)
    y = np.zeros((*x.shape[:2], *out))
    index = np.full(y.shape, -1)
    for n, c, *o in itertools.product(*(range(d) for d in y.shape)):
        result = np.finfo(np.float32).min if p.mode == "MAXPOOL" else 0.0
        chosen, valid = -1, 0
        for w in itertools.product(*(range(k) for k in p.window)):
            pos = [oi * s + wi - a for oi, s, wi, a in zip(o, p.stride, w, p.pre)]
            inside = all(0 <= q < d for q, d in zip(pos, spatial))
            value, flat = 0.0, -1
            if inside:
                value, flat = x[(n, c, *pos)], int(np.ravel_multi_index(pos, spatial))
                valid += 1
            elif p.mode == "MAXPOOL" and p.padding_mode == "NEG_INF_PAD":
                continue
            if p.mode == "MAXPOOL":
                if value > result:
                    result, chosen = value, flat
            else:
                result += value
        if p.mode == "AVGPOOL_EXCLUDE_PADDING":
            result /= max(valid, 1)
        elif p.mode == "AVGPOOL_INCLUDE_PADDING":
            result /= np.prod(p.window)
        y[(n, c, *o)], index[(n, c, *o)] = result, chosen
    return y, index


@pytest.mark.parametrize("p", CASES, ids=lambda p: f"{p.mode}-{p.padding_mode}-{len(p.window)}d")
def test_forward_and_index_equal_hipdnns_loop(p: Pooling) -> None:
    x = RNG.standard_normal((2, 3, *(7 - i for i in range(len(p.window)))))
    x[0, 0] = -np.abs(x[0, 0]) - 1.0          # all negative: a zero pad wins under ZERO_PAD
    y, index = pool_forward(x, p, with_index=True)
    want_y, want_index = loop_forward(x, p)
    np.testing.assert_allclose(y, want_y, rtol=1e-14, atol=1e-15)
    if p.mode == "MAXPOOL":
        np.testing.assert_array_equal(index, want_index)
        if p.padding_mode == "ZERO_PAD":
            assert (index[0, 0] == -1).any(), "the case exercises a winning pad"


def test_ties_keep_the_first_element_in_window_order() -> None:
    p = Pooling("MAXPOOL", "NEG_INF_PAD", (2, 2), (2, 2), (0, 0), (0, 0))
    _, index = pool_forward(np.ones((1, 1, 2, 2)), p, with_index=True)
    assert index.item() == 0


def test_upstream_avgpool_example_numbers() -> None:
    """dnn-benchmarking's 1-d case (window 3, stride 2, pre 1): [1, 2, 3, 4] -> [1.5, 3.0]."""
    p = Pooling("AVGPOOL_EXCLUDE_PADDING", "ZERO_PAD", (1, 3), (1, 2), (0, 1), (0, 0))
    y, _ = pool_forward(np.array([[[[1.0, 2.0, 3.0, 4.0]]]]), p)
    np.testing.assert_allclose(y.reshape(-1), [1.5, 3.0])


@pytest.mark.parametrize("p", [c for c in CASES if c.mode != "MAXPOOL"], ids=lambda p: p.mode)
def test_average_backward_is_the_adjoint_of_the_forward(p: Pooling) -> None:
    x = RNG.standard_normal((2, 2, *(6 - i for i in range(len(p.window)))))
    y, _ = pool_forward(x, p)
    dy = RNG.standard_normal(y.shape)
    dx = pool_backward(dy, p, x.shape)
    assert np.isclose((y * dy).sum(), (x * dx).sum(), rtol=1e-12)
    np.testing.assert_allclose(dx, numeric_grad(lambda: float((pool_forward(x, p)[0] * dy).sum()), x),
                               rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("p", [c for c in CASES if c.mode == "MAXPOOL"], ids=lambda p: p.padding_mode)
def test_max_backward_matches_finite_differences_away_from_ties(p: Pooling) -> None:
    x = RNG.permutation(np.arange(2 * 2 * 6 * 5 * (4 if len(p.window) == 3 else 1), dtype=float))
    x = (x / x.size + 0.1).reshape(2, 2, 6, 5, *([4] if len(p.window) == 3 else []))   # distinct, positive
    y, index = pool_forward(x, p, with_index=True)
    dy = RNG.standard_normal(y.shape)
    dx = pool_backward(dy, p, x.shape, index)
    np.testing.assert_allclose(dx, numeric_grad(lambda: float((pool_forward(x, p)[0] * dy).sum()), x, eps=1e-7),
                               rtol=1e-6, atol=1e-7)


def test_indices_outside_their_window_reach_nothing_as_in_hipdnns_loop() -> None:
    p = Pooling("MAXPOOL", "NEG_INF_PAD", (2, 2), (2, 2), (0, 0), (0, 0))
    index = np.array([[[[0, 15], [-1, 15]]]])       # 15 lies outside output (0, 1)'s window
    dx = pool_backward(np.ones((1, 1, 2, 2)), p, (1, 1, 4, 4), index)
    assert dx.reshape(-1)[0] == 1.0 and dx.reshape(-1)[15] == 1.0 and dx.sum() == 2.0


def _pool_graph():
    b = GraphBuilder("pool")
    b.pool(b.tensor("x", [2, 3, 9, 9]), "MAXPOOL", 3, stride=2, pad=1, index_dtype="int32", name="pool")
    return b.build()


@pytest.mark.parametrize(("edit", "fragment"), [
    (lambda n, t: n["attributes"].update(window=[3]), "attributes.window: must be a list of 2 integers"),
    (lambda n, t: n["attributes"].update(resample_mode="BILINEAR"), "attributes.resample_mode: unknown"),
    (lambda n, t: n["attributes"].update(padding_mode="EDGE"), "attributes.padding_mode: unknown"),
    (lambda n, t: t[1].update(dims=[2, 3, 4, 4], strides=[48, 16, 4, 1]),
     "outputs.y_tensor_uid: dims [2, 3, 4, 4] do not match the pooled size [2, 3, 5, 5]"),
    (lambda n, t: t[2].update(data_type="float"), "outputs.index_tensor_uid: must be an integer type"),
    (lambda n, t: n["attributes"].update(resample_mode="avgpool_include_padding"),
     "an index belongs to MAXPOOL"),
])
def test_shape_and_option_errors_name_the_json_path(edit, fragment: str) -> None:
    assert fragment in load_error(_pool_graph(), edit, "pool.json")


def test_enum_spellings_of_both_hipdnn_writers_load() -> None:
    raw = graph_to_json(_pool_graph())
    raw["nodes"][0]["attributes"].update(resample_mode="maxpool", padding_mode="zero_pad")   # C++ writer's
    assert executor.check(parse_graph(raw, "pool.json")) is None


def test_generated_backward_index_is_a_real_argmax() -> None:
    b = GraphBuilder("pool_bwd")
    index = b.tensor("index", [1, 2, 4, 4], dtype="int32")
    b.pool_backward(b.tensor("dy", [1, 2, 4, 4]), [1, 2, 8, 8], "MAXPOOL", 2, stride=2, index=index)
    graph = b.build()
    idx = make_inputs(graph, seed=1)[index.uid].astype(int)
    rows, cols = np.divmod(idx, 8)
    out_r, out_c = np.indices((4, 4))
    assert ((rows // 2 == out_r) & (cols // 2 == out_c)).all(), "each index lies in its own window"


def test_cudnn_refuses_pooling_naming_the_missing_python_binding() -> None:
    with pytest.raises(UnsupportedError, match="no Python frontend binding"):
        cudnn_graph.plan(_pool_graph())


def test_upstream_resample_sample_runs_on_the_reference(shared_fixtures: Path) -> None:
    path = shared_fixtures / "upstream-graphs" / "samples" / "sample_resample_fwd.json"
    if not path.exists():
        pytest.skip("sample_resample_fwd.json not in the shared fixtures")
    graph = load_file(path)
    assert executor.check(graph) is None
    x = make_inputs(graph, seed=0)
    y = executor.evaluate(graph, x)
    assert y is not None

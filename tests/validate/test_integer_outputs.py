"""Integer outputs are judged in their own type: truncation (hipDNN) or round-half-even (cuDNN), saturated."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings, strategies as st

from hipdnn_trace.cli import main
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.dtypes import is_integer, to_integer
from hipdnn_trace.validate.compare import compare_tensor
from hipdnn_trace.validate.integers import allowed_range
from hipdnn_trace.validate.tolerances import graph_tolerance, tolerance_for

# ---------------------------------------------------------------- the conversions, by definition

@pytest.mark.parametrize("value, truncated, nearest_even", [
    (2.5, 2, 2), (3.5, 3, 4), (-2.5, -2, -2), (-3.5, -3, -4), (0.5, 0, 0), (-0.5, 0, 0),
    (1.5, 1, 2), (2.7, 2, 3), (-2.7, -2, -3),
    (126.5, 126, 126), (127.4, 127, 127), (127.5, 127, 127), (128.0, 127, 127), (1e9, 127, 127),
    (-127.5, -127, -128), (-128.5, -128, -128), (-128.9, -128, -128), (-129.0, -128, -128),
    (np.inf, 127, 127), (-np.inf, -128, -128),
])
def test_int8_truncates_or_rounds_half_even_then_saturates(value: float, truncated: int, nearest_even: int) -> None:
    assert to_integer(np.array([value]), "int8", "truncate")[0] == truncated
    assert to_integer(np.array([value]), "int8", "nearest_even")[0] == nearest_even


def test_uint8_and_int32_edges() -> None:
    v = np.array([-0.7, -1.0, 254.5, 255.5, 300.0])
    assert to_integer(v, "uint8", "truncate").tolist() == [0, 0, 254, 255, 255]
    assert to_integer(v, "uint8", "nearest_even").tolist() == [0, 0, 254, 255, 255]
    big = np.array([2147483646.5, 2147483647.5, -2147483648.5, -2147483649.0])
    assert to_integer(big, "int32", "truncate").tolist() == [2147483646, 2147483647, -2147483648, -2147483648]
    assert to_integer(big, "int32", "nearest_even").tolist() == [2147483646, 2147483647, -2147483648, -2147483648]
    assert to_integer(np.array([1e19, -1e19]), "int64", "nearest_even").tolist() == [2**63 - 1, -(2**63)]


def test_nan_and_non_integer_types_are_refused() -> None:
    with pytest.raises(ValueError, match="NaN"):
        to_integer(np.array([np.nan]), "int8")
    with pytest.raises(ValueError, match="not an integer type"):
        to_integer(np.array([1.0]), "float")
    with pytest.raises(ValueError, match="rounding"):
        to_integer(np.array([1.0]), "int8", "up")
    assert is_integer("int32") and not is_integer("boolean") and not is_integer("half")


# ---------------------------------------------------------------- which integers an output may hold

def test_integral_values_must_match_exactly_whatever_the_slack() -> None:
    low, high = allowed_range(np.array([3.0, -7.0, 300.0, -300.0]), "int8", atol=0.5, rtol=0.1)
    assert low.tolist() == [3, -7, 127, -128] and high.tolist() == low.tolist()


def test_fractional_values_admit_both_conversions_and_the_float_slack() -> None:
    e = np.array([2.5, 3.5, 2.7, -0.6, 2.2])
    low, high = allowed_range(e, "int8", atol=0.0, rtol=0.0)
    assert low.tolist() == [2, 3, 2, -1, 2]      # truncation: 2, 3, 2, 0, 2 / half-even: 2, 4, 3, -1, 2
    assert high.tolist() == [2, 4, 3, 0, 2]
    low, high = allowed_range(np.array([2.999, 2.2]), "int8", atol=0.01, rtol=0.0)
    assert low.tolist() == [2, 2] and high.tolist() == [3, 2]   # 3.009 and 2.989 both reachable in float
    low, high = allowed_range(np.array([127.3, -128.7]), "int8", atol=0.0, rtol=0.0)
    assert low.tolist() == [127, -128] and high.tolist() == [127, -128]


def test_nan_expected_admits_no_integer() -> None:
    low, high = allowed_range(np.array([np.nan]), "int8", atol=1.0, rtol=0.0)
    assert low[0] > high[0]


# ---------------------------------------------------------------- the comparison

def test_int8_output_passes_against_its_unrounded_reference() -> None:
    expected = np.array([789.0, -426.0, 2.5, 2.7, -0.6, 12.0])
    for rule in ("truncate", "nearest_even"):
        actual = to_integer(expected, "int8", rule)
        result = compare_tensor(actual, expected, atol=0.0, rtol=0.0, dtype="int8")
        assert result.passed, (rule, result.message())
        assert "int8 conversion" in result.message()


def test_int8_output_one_off_on_an_integral_value_fails() -> None:
    expected = np.array([12.0, 2.7, 300.0])
    actual = np.array([11, 3, 126], dtype=np.int8)
    result = compare_tensor(actual, expected, atol=0.01, rtol=0.01, dtype="int8", reference=expected)
    assert not result.passed and result.mismatches == 2
    worst = {e.index: e for e in result.worst}
    assert worst[(0,)].expected == 12 and worst[(0,)].abs_err == 1
    assert worst[(2,)].expected == 127 and worst[(2,)].reference == 300.0
    assert "no int8 conversion" in result.message()


def test_integer_type_is_taken_from_the_actual_array_when_not_given() -> None:
    result = compare_tensor(np.array([2], dtype=np.int32), np.array([2.6]), atol=0.0, rtol=0.0)
    assert result.passed and result.integer == "int32"
    assert not compare_tensor(np.array([2.0]), np.array([2.6]), atol=0.0, rtol=0.0).passed   # float: unchanged


def test_nan_reference_fails_an_integer_output() -> None:
    result = compare_tensor(np.array([0], dtype=np.int8), np.array([np.nan]), atol=1.0, rtol=1.0, dtype="int8")
    assert not result.passed and result.mismatches == 1


def _bn_int8(training: bool):
    b = GraphBuilder("bn_int8" if training else "bn_inf_int8", io="int8", compute="float", intermediate="float")
    x = b.tensor("x", [4, 3, 5, 5])
    scale, bias = (b.tensor(n, [1, 3, 1, 1], dtype="float") for n in ("scale", "bias"))
    if training:
        b.batchnorm(x, scale, bias, saved_stats=False)
    else:
        mean, inv_var = (b.tensor(n, [1, 3, 1, 1], dtype="float") for n in ("mean", "inv_variance"))
        b.batchnorm_inference(x, mean, inv_var, scale, bias)
    return b


def test_integer_output_tolerance_is_the_graphs_float_slack() -> None:
    graph = _bn_int8(True).build()
    out = next(t for t in graph.output_tensors if t.data_type == "int8")
    assert tolerance_for(graph, out.uid) == graph_tolerance(graph, "float")
    assert tolerance_for(graph, out.uid, atol=0.0, rtol=0.0) == (0.0, 0.0)


# ---------------------------------------------------------------- end to end on the reference

def _conv_int8() -> GraphBuilder:
    b = GraphBuilder("conv_int8", io="int8", compute="int32", intermediate="float")
    x = b.tensor("x", [2, 8, 6, 6])
    w = b.tensor("w", [4, 8, 3, 3])
    b.conv_fwd(x, w, pad=1)
    return b


def test_int8_conv_and_batchnorm_pass_validation_against_the_reference(tmp_path: Path) -> None:
    folder = tmp_path / "graphs"
    folder.mkdir()
    for builder in (_conv_int8(), _bn_int8(True), _bn_int8(False)):
        (folder / f"{builder.name}.json").write_text(json.dumps(builder.to_json()))
    code = main(["run", str(folder), "--out", str(tmp_path / "runs"), "--run-id", "r", "-w", "1", "-i", "2",
                 "--quiet"])
    validation = pl.read_csv(tmp_path / "runs" / "r" / "validation.csv")
    assert code == 0, validation["message"].to_list()
    assert sorted(validation["graph"].to_list()) == ["bn_inf_int8", "bn_int8", "conv_int8"]
    assert validation["passed"].all() and (validation["dtype"] == "int8").all()
    assert validation["total"].to_list() and (validation["mismatches"] == 0).all()


def test_int8_conv_reference_exercises_saturation() -> None:
    from hipdnn_trace.backends.reference import executor
    from hipdnn_trace.bench.inputs import make_inputs

    graph = _conv_int8().build()
    evaluation = executor.evaluate(graph, make_inputs(graph, seed=0))
    (uid,) = evaluation.exact
    exact, stored = evaluation.exact[uid], evaluation.stored[uid]
    assert (np.abs(exact) > 127).any()                 # the unrounded sums leave int8's range...
    assert stored.min() >= -128 and stored.max() <= 127 and (np.abs(stored) >= 127).any()   # ...and saturate
    assert compare_tensor(stored, exact, atol=0.0, rtol=0.0, dtype="int8").passed


_EDGES = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 127.5, 128.0, -128.5, 255.5, 256.0, 2.0**31, 2.0**31 - 0.5,
          -2.0**31 - 1, 2.0**53, 2.0**63, -2.0**63, 2.0**63 - 1024, 2.0**64, 1e308, -1e308, np.inf, -np.inf, np.nan]


@settings(max_examples=300, deadline=None, database=None)
@given(values=st.lists(st.one_of(st.sampled_from(_EDGES), st.floats(allow_nan=True, allow_infinity=True)),
                       min_size=1, max_size=30),
       dtype=st.sampled_from(["int8", "uint8", "int32", "int64"]),
       atol=st.sampled_from([0.0, 0.01, 0.5, 1.0, 3.0, 1e300]), rtol=st.sampled_from([0.0, 0.01, 0.5, 1e300]))
def test_allowed_range_equals_to_integer_per_rounding(values: list[float], dtype: str, atol: float,
                                                      rtol: float) -> None:
    """The Array API formulas give, bit for bit (the sign of zero too), the range the conversions of
    ``graph.dtypes.to_integer`` gave (the oracle keeps that version)."""
    from chunked_compare_oracle import allowed_range as by_to_integer

    e = np.array(values, dtype=np.float64)
    for got, want in zip(allowed_range(e, dtype, atol=atol, rtol=rtol), by_to_integer(e, dtype, atol=atol, rtol=rtol)):
        assert got.dtype == np.float64
        assert np.array_equal(got, want) and np.array_equal(np.signbit(got), np.signbit(want)), (got, want)

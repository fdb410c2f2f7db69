"""Tolerances follow hipDNN's table; comparisons count mismatches, NaN/Inf and unwritten elements."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.validate.compare import compare_tensor
from hipdnn_trace.validate.poison import poison, poisoned_like, unwritten_mask
from hipdnn_trace.validate.tolerances import graph_tolerance, op_tolerance, tolerance_for, type_epsilon


@pytest.mark.parametrize("op, dtype, expected", [
    # values from hipDNN test_sdk TestTolerances.hpp (docs/hipdnn-format.md section 4)
    ("ConvolutionFwdAttributes", "float", (1e-5, 1e-5)),
    ("ConvolutionFwdAttributes", "half", (1e-1, 1e-2)),
    ("ConvolutionFwdAttributes", "bfloat16", (1e-1, 2e-2)),
    ("ConvolutionBwdAttributes", "float", (8.5e-6, 8.5e-6)),
    ("ConvolutionWrwAttributes", "half", (2e-1, 2e-1)),
    ("MatmulAttributes", "bfloat16", (1e-2, 1e-2)),
    ("BatchnormAttributes", "float", (4e-3, 4e-3)),
    ("BatchnormBackwardAttributes", "half", (4e-4, 4e-4)),
    ("LayernormAttributes", "double", (1e-5, 1e-5)),
    ("PointwiseAttributes", "int8", (0.0, 0.0)),
    ("ReductionAttributes", "bfloat16", (5e-2, 5e-2)),
])
def test_hipdnn_table(op: str, dtype: str, expected: tuple[float, float]) -> None:
    assert op_tolerance(op, dtype) == expected


def _conv_relu(dtype: str):
    b = GraphBuilder("conv_relu", io=dtype, compute="float", intermediate="float")
    x = b.tensor("x", [1, 4, 5, 5])
    w = b.tensor("w", [4, 4, 3, 3])
    y = b.conv_fwd(x, w, pad=[1, 1], stride=[1, 1], dilation=[1, 1], virtual=True)
    return b.pointwise("relu_fwd", y), b.build()


def test_fused_graph_takes_its_loosest_op_and_type_epsilon_floor() -> None:
    out, graph = _conv_relu("half")
    assert graph_tolerance(graph, "half") == (1e-1, 1e-2)        # conv loosest, pointwise tighter
    atol, rtol = tolerance_for(graph, out.uid)
    assert (atol, rtol) == (1e-1, 1e-2)
    assert tolerance_for(graph, out.uid, atol=3.0, rtol=0.0) == (3.0, 0.0)   # user overrides win exactly
    assert type_epsilon("half") == 2.0 ** -10 and type_epsilon("int32") == 0.0


def test_rtol_floor_is_the_output_types_epsilon() -> None:
    b = GraphBuilder("bn_bwd", io="half", compute="float", intermediate="float")
    x = b.tensor("x", [2, 3, 4, 4])
    dy = b.tensor("dy", [2, 3, 4, 4])
    scale, mean, inv = (b.tensor(n, [1, 3, 1, 1]) for n in ("scale", "mean", "inv"))
    dx = b.batchnorm_backward(dy, x, scale, mean=mean, inv_variance=inv).dx
    graph = b.build()
    assert op_tolerance("BatchnormBackwardAttributes", "half")[1] == 4e-4
    assert tolerance_for(graph, dx.uid)[1] == 2.0 ** -10


def test_exact_half_rounding_of_the_reference_passes_the_floor() -> None:
    exact = np.random.default_rng(0).standard_normal(1000) * 100
    stored = exact.astype(np.float16)
    assert compare_tensor(stored, exact, atol=0.0, rtol=type_epsilon("half")).passed
    assert not compare_tensor(stored, exact, atol=0.0, rtol=1e-6).passed


def test_compare_counts_and_reports_the_worst_elements() -> None:
    expected = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    actual = expected.astype(np.float32)
    actual[1, 2, 3] += 0.5
    actual[0, 1, 1] += 0.01
    r = compare_tensor(actual, expected, atol=1e-3, rtol=0.0, reference=expected + 1e-12)
    assert not r.passed and r.mismatches == 2 and r.nonfinite == 0 and r.total == 24
    assert r.worst_index == (1, 2, 3) and r.worst[1].index == (0, 1, 1)
    assert r.worst[0].actual == pytest.approx(23.5) and r.worst[0].expected == 23.0
    assert r.worst[0].reference == pytest.approx(23.0)
    assert r.max_abs == pytest.approx(0.5)
    assert "2/24 elements outside" in r.message()


def test_nonfinite_outputs_always_fail_even_with_huge_tolerance() -> None:
    expected = np.zeros(5)
    actual = np.array([0, np.inf, 0, -np.inf, np.nan], dtype=np.float32)
    r = compare_tensor(actual, expected, atol=1e30, rtol=1e30)
    assert not r.passed and r.nonfinite == 3 and r.mismatches == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn])
def test_poisoned_elements_are_reported_as_never_written(dtype: object) -> None:
    actual = np.zeros((4, 4), dtype=dtype)
    poison(actual[1:3])
    r = compare_tensor(actual, np.zeros((4, 4)), atol=1.0, rtol=1.0)
    assert r.unwritten == 8 and r.nonfinite == 0 and not r.passed
    assert "never written" in r.message()


def test_computed_nan_is_not_mistaken_for_poison() -> None:
    computed = np.array([np.nan, 0.0], dtype=np.float32)   # canonical quiet NaN from arithmetic
    assert not unwritten_mask(computed).any()


def test_integer_poison_only_counts_when_the_whole_tensor_is_untouched() -> None:
    partial = np.array([-1, 3, -1], dtype=np.int32)
    assert not unwritten_mask(partial).any()
    assert unwritten_mask(poisoned_like((3,), np.dtype(np.int32))).all()


def test_shape_mismatch_is_its_own_failure() -> None:
    r = compare_tensor(np.zeros((2, 3)), np.zeros((3, 2)), atol=1, rtol=1)
    assert not r.passed and "shape" in r.message()


def test_atol_scales_with_the_outputs_rms_above_one() -> None:
    from hipdnn_trace.validate.tolerances import scaled_atol

    assert scaled_atol(8.5e-6, np.full(10, 0.5)) == 8.5e-6           # order-1 outputs: hipDNN's value
    assert scaled_atol(8.5e-6, np.full(10, 20.0)) == pytest.approx(1.7e-4)
    assert scaled_atol(1e-5, np.array([np.nan, np.inf])) == 1e-5


def test_an_output_without_finite_values_has_no_maxima_and_says_so() -> None:
    """All NaN: "all 6 elements NaN/Inf", not "max abs 0, max rel 0"; all unwritten likewise; some NaN:
    the maxima are said to cover the finite elements only."""
    expected = np.arange(6, dtype=np.float64)
    r = compare_tensor(np.full(6, np.nan, dtype=np.float32), expected, atol=1e-3, rtol=1e-3)
    assert r.finite == 0 and math.isnan(r.max_abs) and math.isnan(r.max_rel)
    assert r.message() == "all 6 elements NaN/Inf (no element with finite values to measure an error on; " \
                          "worst at [0])"
    unwritten = np.zeros(6, dtype=np.float32)
    poison(unwritten)
    assert compare_tensor(unwritten, expected, atol=1e-3, rtol=1e-3).message().startswith(
        "all 6 elements never written (still poisoned) (no element with finite values")
    some = expected.astype(np.float32)
    some[2], some[4] = np.nan, 9.0
    r = compare_tensor(some, expected, atol=1e-3, rtol=1e-3)
    assert r.finite == 5 and r.max_abs == pytest.approx(5.0)
    assert r.message() == ("1 NaN/Inf element(s), 1/6 elements outside atol 0.001 rtol 0.001 (max abs 5, max rel "
                           "1.25 over the 5 finite element(s); worst at [2])")


def test_worst_elements_carry_the_error_they_were_allowed_and_are_ordered_by_the_ratio() -> None:
    """The list is ordered by abs_err / allowed: a small error on a small value can outrank a larger one."""
    expected = np.array([100.0, 0.01, 5.0])
    actual = np.array([100.5, 0.02, 5.2])
    r = compare_tensor(actual, expected, atol=1e-3, rtol=1e-3)
    allowed = [1e-3 + 1e-3 * abs(x) for x in expected]
    assert [e.index for e in r.worst] == [(2,), (1,), (0,)]   # by abs error it would be 0, 2, 1
    assert [e.allowed for e in r.worst] == pytest.approx([allowed[2], allowed[1], allowed[0]])
    ratios = [e.abs_err / e.allowed for e in r.worst]
    assert ratios == sorted(ratios, reverse=True)

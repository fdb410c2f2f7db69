"""Reference pointwise modes against scalar definitions written with the math module."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest

from hipdnn_trace.backends.reference.ops.pointwise import POINTWISE_MODES, pointwise
from hipdnn_trace.errors import UnsupportedError

X = np.array([-3.0, -1.5, -0.5, -1e-3, 0.0, 1e-3, 0.25, 0.7, 1.0, 2.5, 4.0])
POS = np.array([1e-3, 0.1, 0.5, 1.0, 2.0, 9.0, 100.0])


def sig(v):
    return 1.0 / (1.0 + math.exp(-v))


# scalar definitions of the forward activations (also differentiated numerically below)
FWD = {
    "gelu_fwd": lambda v: 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))),
    "gelu_approx_tanh_fwd": lambda v: 0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3))),
    "sigmoid_fwd": sig,
    "tanh_fwd": math.tanh,
    "swish_fwd": lambda v: v * sig(v),
    "elu_fwd": lambda v: v if v > 0 else math.exp(v) - 1.0,
    "softplus_fwd": lambda v: math.log1p(math.exp(v)),
    "erf": math.erf,
    "exp": math.exp,
    "sin": math.sin,
    "tan": math.tan,
    "abs": abs,
    "neg": lambda v: -v,
    "ceil": math.ceil,
    "floor": math.floor,
    "identity": lambda v: v,
    "logical_not": lambda v: 1.0 if v == 0 else 0.0,
}


def apply(f, arr):
    return np.array([float(f(float(v))) for v in arr.ravel()]).reshape(arr.shape)


@pytest.mark.parametrize("mode", sorted(FWD))
def test_unary_modes_match_scalar_definitions(mode):
    got = pointwise(mode, [X], out_shape=X.shape)
    np.testing.assert_allclose(got, apply(FWD[mode], X), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize(
    "mode, f",
    [("log", math.log), ("sqrt", math.sqrt), ("rsqrt", lambda v: 1 / math.sqrt(v)),
     ("reciprocal", lambda v: 1 / v)],
)
def test_positive_domain_modes(mode, f):
    np.testing.assert_allclose(pointwise(mode, [POS], out_shape=POS.shape), apply(f, POS), rtol=1e-15)


def test_domain_errors_give_ieee_values_not_exceptions():
    got = pointwise("log", [np.array([-1.0, 0.0])], out_shape=(2,))
    assert np.isnan(got[0]) and got[1] == -np.inf
    assert pointwise("div", [np.array([1.0]), np.array([0.0])], out_shape=(1,))[0] == np.inf


@pytest.mark.parametrize("mode", ["gelu_fwd", "gelu_approx_tanh_fwd", "sigmoid_fwd", "tanh_fwd",
                                  "swish_fwd", "elu_fwd", "softplus_fwd"])
def test_backward_modes_are_dy_times_numerical_derivative(mode):
    bwd = mode.replace("_fwd", "_bwd")
    x = X[X != 0.0]                      # elu has a kink at 0
    dy = np.linspace(-2.0, 3.0, x.size)
    h = 1e-6
    numeric = apply(lambda v: (FWD[mode](v + h) - FWD[mode](v - h)) / (2 * h), x)
    got = pointwise(bwd, [dy, x], out_shape=x.shape)   # in_0 = dy, in_1 = x
    np.testing.assert_allclose(got, dy * numeric, rtol=1e-6, atol=1e-8)


def test_parameterized_activations_use_their_parameters():
    x = np.array([-2.0, -0.5, 0.5, 3.0])
    beta = 1.7
    np.testing.assert_allclose(pointwise("swish_fwd", [x], swish_beta=beta, out_shape=x.shape),
                               apply(lambda v: v * sig(beta * v), x), rtol=1e-14)
    np.testing.assert_allclose(pointwise("elu_fwd", [x], elu_alpha=0.3, out_shape=x.shape),
                               apply(lambda v: v if v > 0 else 0.3 * (math.exp(v) - 1), x), rtol=1e-14)
    np.testing.assert_allclose(pointwise("softplus_fwd", [x], softplus_beta=2.0, out_shape=x.shape),
                               apply(lambda v: math.log1p(math.exp(2 * v)) / 2, x), rtol=1e-14)
    h = 1e-6
    num = apply(lambda v: ((v + h) * sig(beta * (v + h)) - (v - h) * sig(beta * (v - h))) / (2 * h), x)
    np.testing.assert_allclose(pointwise("swish_bwd", [np.ones(4), x], swish_beta=beta, out_shape=(4,)),
                               num, rtol=1e-6)


def test_relu_clips_and_slope_follow_hipdnn():
    x = np.array([-4.0, -1.0, 0.0, 0.5, 2.0, 6.0, 9.0])
    # y = slope*(x - lower) + lower below the lower clip, upper above the upper clip
    got = pointwise("relu_fwd", [x], relu_lower_clip=-1.0, relu_upper_clip=6.0,
                    relu_lower_clip_slope=0.1, out_shape=x.shape)
    np.testing.assert_allclose(got, [-1.3, -1.0, 0.0, 0.5, 2.0, 6.0, 6.0])
    np.testing.assert_array_equal(pointwise("relu_fwd", [x], out_shape=x.shape),
                                  [0, 0, 0, 0.5, 2, 6, 9])
    dy = np.full(x.shape, 2.0)
    np.testing.assert_array_equal(pointwise("relu_bwd", [dy, x], out_shape=x.shape), [0, 0, 0, 2, 2, 2, 2])
    # parameterized: slope at and below lower, 0 strictly above upper, 1 between
    got = pointwise("relu_bwd", [dy, x], relu_lower_clip=-1.0, relu_upper_clip=6.0,
                    relu_lower_clip_slope=0.1, out_shape=x.shape)
    np.testing.assert_allclose(got, [0.2, 0.2, 2, 2, 2, 2, 0])


@pytest.mark.parametrize(
    "mode, f",
    [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
     ("div", lambda a, b: a / b), ("max_op", max), ("min_op", min), ("max", max),
     ("add_square", lambda a, b: a + b * b),
     ("cmp_eq", lambda a, b: float(a == b)), ("cmp_neq", lambda a, b: float(a != b)),
     ("cmp_gt", lambda a, b: float(a > b)), ("cmp_ge", lambda a, b: float(a >= b)),
     ("cmp_lt", lambda a, b: float(a < b)), ("cmp_le", lambda a, b: float(a <= b)),
     ("logical_and", lambda a, b: float(bool(a) and bool(b))),
     ("logical_or", lambda a, b: float(bool(a) or bool(b)))],
)
def test_binary_modes_broadcast_like_hipdnn(mode, f):
    a = np.array([[0.0], [1.5], [-2.0]])            # (3, 1)
    b = np.array([-2.0, 0.0, 1.5, 3.0])             # (4,) aligned from the right
    got = pointwise(mode, [a, b], out_shape=(2, 3, 4))
    with np.errstate(all="ignore"):
        expect = np.array([[[f(a[i, 0], b[j]) for j in range(4)] for i in range(3)]] * 2)
    assert got.shape == (2, 3, 4)
    np.testing.assert_allclose(got, expect, rtol=1e-15)


def test_binary_select_picks_in0_where_mask_is_set():
    a, b = np.array([1.0, 2.0, 3.0]), np.array([-1.0, -2.0, -3.0])
    mask = np.array([1.0, 0.0, 5.0])
    np.testing.assert_array_equal(pointwise("binary_select", [a, b, mask], out_shape=(3,)), [1, -2, 3])


def test_gen_index_counts_along_the_axis():
    got = pointwise("gen_index", [np.zeros((2, 3))], axis=1, out_shape=(2, 3))
    np.testing.assert_array_equal(got, [[0, 1, 2], [0, 1, 2]])
    with pytest.raises(UnsupportedError, match="axis"):
        pointwise("gen_index", [np.zeros(2)], out_shape=(2,))


def test_every_mode_runs_and_returns_owned_float64_of_out_shape():
    for mode, arity in POINTWISE_MODES.items():
        inputs = [np.linspace(0.1, 0.9, 3)] * arity
        out = pointwise(mode, inputs, axis=0, out_shape=(2, 3))
        assert out.shape == (2, 3) and out.dtype == np.float64 and out.flags.writeable, mode
        assert out.base is None, mode


def test_unknown_mode_wrong_arity_and_bad_broadcast_are_unsupported():
    with pytest.raises(UnsupportedError, match="unsupported pointwise mode pow"):
        pointwise("pow", [X, X], out_shape=X.shape)
    with pytest.raises(UnsupportedError, match="takes 2 inputs"):
        pointwise("add", [X], out_shape=X.shape)
    with pytest.raises(UnsupportedError, match="broadcast"):
        pointwise("add", [np.ones(3), np.ones(4)], out_shape=(4,))


def test_erf_without_scipy_matches_math_erf():
    # the package re-exports the function `pointwise`, so fetch the module itself
    pw_module = importlib.import_module("hipdnn_trace.backends.reference.ops.pointwise")
    v = np.linspace(-4, 4, 17)
    np.testing.assert_allclose(pw_module._erf_with_math(v), apply(math.erf, v), rtol=0, atol=0)

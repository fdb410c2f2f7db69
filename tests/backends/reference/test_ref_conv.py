"""Reference convolution: fprop against a direct loop definition, dgrad/wgrad as adjoints."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hipdnn_trace.backends.reference.ops.conv import (
    conv_dgrad,
    conv_fwd,
    conv_output_shape,
    conv_wgrad,
)
from hipdnn_trace.errors import UnsupportedError


def direct_conv(x, w, pre, post, stride, dilation, flip=False):
    """Textbook grouped convolution, one output element at a time."""
    n_, c_ = x.shape[:2]
    k_, cg = w.shape[:2]
    kg = k_ // (c_ // cg)
    sp, ks = x.shape[2:], w.shape[2:]
    out = [(s + a + b - d * (k - 1) - 1) // t + 1
           for s, k, a, b, t, d in zip(sp, ks, pre, post, stride, dilation)]
    y = np.zeros((n_, k_, *out))
    for n, k, *o in product(range(n_), range(k_), *(range(v) for v in out)):
        g = k // kg
        acc = 0.0
        for c in range(cg):
            for r in product(*(range(v) for v in ks)):
                idx = [oi * t + ri * d - a for oi, ri, t, d, a in zip(o, r, stride, dilation, pre)]
                if all(0 <= i < s for i, s in zip(idx, sp)):
                    wr = tuple(k2 - 1 - ri for k2, ri in zip(ks, r)) if flip else tuple(r)
                    acc += x[(n, g * cg + c, *idx)] * w[(k, c, *wr)]
        y[(n, k, *o)] = acc
    return y


CASES = [
    # x shape, w shape, pre, post, stride, dilation
    ((2, 3, 7), (4, 3, 3), [1], [2], [2], [1]),                          # 1D, asymmetric pad
    ((1, 4, 6, 5), (6, 2, 3, 2), [1, 0], [0, 2], [1, 2], [2, 1]),       # 2D, 2 groups, dilation
    ((2, 6, 5, 5), (3, 2, 2, 2), [0, 1], [1, 0], [2, 1], [1, 1]),       # 3 groups, 1 out/group
    ((1, 2, 4, 3, 4), (2, 1, 2, 2, 3), [1, 0, 1], [0, 1, 1], [1, 2, 1], [1, 1, 2]),  # 3D depthwise
    ((2, 3, 5, 5), (4, 3, 1, 1), [0, 0], [0, 0], [1, 1], [1, 1]),       # 1x1
]


@pytest.mark.parametrize("mode", ["CROSS_CORRELATION", "CONVOLUTION"])
@pytest.mark.parametrize("xs,ws,pre,post,stride,dil", CASES)
def test_fwd_matches_direct_definition(xs, ws, pre, post, stride, dil, mode):
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    y = conv_fwd(x, w, pre_padding=pre, post_padding=post, stride=stride, dilation=dil, mode=mode)
    expect = direct_conv(x, w, pre, post, stride, dil, flip=(mode == "CONVOLUTION"))
    assert y.dtype == np.float64
    assert y.shape == expect.shape == conv_output_shape(
        xs, ws, pre_padding=pre, post_padding=post, stride=stride, dilation=dil)
    np.testing.assert_allclose(y, expect, rtol=1e-12, atol=1e-12)


def test_fwd_accepts_float32_and_non_contiguous_views():
    rng = np.random.default_rng(2)
    big = rng.standard_normal((2, 5, 6, 8)).astype(np.float32)
    x = big.transpose(0, 3, 1, 2)[:, ::2]          # (2, 4, 5, 6), strided, NHWC-like view
    w = rng.standard_normal((3, 4, 2, 3)).astype(np.float32)
    kw = dict(pre_padding=[1, 1], post_padding=[0, 1], stride=[1, 2], dilation=[1, 1])
    expect = direct_conv(x.astype(np.float64), w.astype(np.float64), [1, 1], [0, 1], [1, 2], [1, 1])
    np.testing.assert_allclose(conv_fwd(x, w, **kw), expect, rtol=1e-12, atol=1e-12)


def test_batch_chunking_matches_one_image_at_a_time():
    # 7x7 outputs fold many images into one GEMM; each image alone must agree
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((50, 3, 7, 7)), rng.standard_normal((4, 3, 3, 3))
    kw = dict(pre_padding=[1, 1], post_padding=[1, 1], stride=[1, 1], dilation=[1, 1])
    y = conv_fwd(x, w, **kw)
    for n in (0, 17, 49):
        np.testing.assert_allclose(y[n:n + 1], conv_fwd(x[n:n + 1], w, **kw), rtol=1e-13, atol=1e-13)


@st.composite
def conv_problems(draw):
    nsp = draw(st.integers(1, 3))
    kernel, inp, pre, post, stride, dil = [], [], [], [], [], []
    for _ in range(nsp):
        k = draw(st.integers(1, 3))
        d = draw(st.integers(1, 2))
        a, b = draw(st.integers(0, 2)), draw(st.integers(0, 2))
        extent = d * (k - 1) + 1
        s = draw(st.integers(max(1, extent - a - b), max(1, extent - a - b) + 4))
        kernel.append(k), dil.append(d), pre.append(a), post.append(b), inp.append(s)
        stride.append(draw(st.integers(1, 3)))
    groups = draw(st.integers(1, 3))
    cg, kg = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    n = draw(st.integers(1, 2))
    mode = draw(st.sampled_from(["CROSS_CORRELATION", "CONVOLUTION"]))
    seed = draw(st.integers(0, 2**16))
    return (n, groups * cg, *inp), (groups * kg, cg, *kernel), pre, post, stride, dil, mode, seed


@settings(max_examples=60, deadline=None)
@given(conv_problems())
def test_dgrad_and_wgrad_are_adjoints_of_fwd(problem):
    check_adjoints(*problem)


@pytest.mark.parametrize("mode", ["CROSS_CORRELATION", "CONVOLUTION"])
@pytest.mark.parametrize(
    "ws, pre, post, dil",
    [
        ((4, 2, 3, 3), [1, 2], [0, 1], [1, 1]),   # stride 1, pad <= dilated kernel - 1: fprop path
        ((4, 2, 3, 2), [2, 1], [1, 0], [2, 1]),   # same, dilated
        ((4, 2, 1, 3), [1, 0], [0, 1], [1, 1]),   # pad beyond a 1-wide kernel: col2im path
    ],
)
def test_stride_one_dgrad_paths_are_adjoints(ws, pre, post, dil, mode):
    check_adjoints((2, 4, 6, 5), ws, pre, post, [1, 1], dil, mode, seed=5)


def check_adjoints(xs, ws, pre, post, stride, dil, mode, seed):
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    kw = dict(pre_padding=pre, post_padding=post, stride=stride, dilation=dil, mode=mode)
    y = conv_fwd(x, w, **kw)
    dy = rng.standard_normal(y.shape)
    dx = conv_dgrad(dy, w, x_shape=xs, **kw)
    dw = conv_wgrad(x, dy, w_shape=ws, **kw)
    assert dx.shape == xs and dw.shape == ws
    lhs = float(np.sum(y * dy))
    # the sum of |every product term|: a scale for rounding error, not a checked value
    scale = float(np.sum(conv_fwd(np.abs(x), np.abs(w), **kw) * np.abs(dy)))
    assert abs(lhs - float(np.sum(x * dx))) <= 1e-10 * scale + 1e-300
    assert abs(lhs - float(np.sum(w * dw))) <= 1e-10 * scale + 1e-300


def test_dgrad_of_unit_impulse_is_the_scattered_kernel():
    # one dy entry at output (0, k, o) spreads w[k] onto the window that produced it
    w = np.arange(1.0, 1.0 + 2 * 1 * 3).reshape(2, 1, 3)
    dy = np.zeros((1, 2, 3))
    dy[0, 1, 1] = 1.0          # output position 1, stride 2, pre-pad 1: window starts at x index 1
    dx = conv_dgrad(dy, w, x_shape=(1, 1, 6), pre_padding=[1], post_padding=[0], stride=[2], dilation=[1])
    np.testing.assert_array_equal(dx[0, 0], [0, 4, 5, 6, 0, 0])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(pre_padding=[-1], post_padding=[0], stride=[1], dilation=[1]), "padding"),
        (dict(pre_padding=[0], post_padding=[0], stride=[0], dilation=[1]), "stride"),
        (dict(pre_padding=[0, 0], post_padding=[0], stride=[1], dilation=[1]), "pre_padding"),
        (dict(pre_padding=[0], post_padding=[0], stride=[1], dilation=[5]), "larger"),
    ],
)
def test_bad_options_are_unsupported(kwargs, message):
    with pytest.raises(UnsupportedError, match=message):
        conv_fwd(np.ones((1, 2, 5)), np.ones((2, 2, 3)), **kwargs)


def test_bad_groups_and_mode_are_unsupported():
    kw = dict(pre_padding=[0], post_padding=[0], stride=[1], dilation=[1])
    with pytest.raises(UnsupportedError, match="multiple"):
        conv_fwd(np.ones((1, 5, 4)), np.ones((2, 2, 3)), **kw)
    with pytest.raises(UnsupportedError, match="groups"):
        conv_fwd(np.ones((1, 4, 4)), np.ones((3, 2, 3)), **kw)
    with pytest.raises(UnsupportedError, match="mode"):
        conv_fwd(np.ones((1, 2, 4)), np.ones((2, 2, 3)), mode="FULL", **kw)
    with pytest.raises(UnsupportedError, match="dy"):
        conv_dgrad(np.ones((1, 2, 3)), np.ones((2, 2, 3)), x_shape=(1, 2, 4), **kw)

"""Batchnorm, layernorm and rmsnorm against textbook formulas written here, element by element."""

from __future__ import annotations

import math
from itertools import product

import numpy as np
import pytest

from hipdnn_trace.backends.reference.ops.batchnorm import (
    batchnorm_backward,
    batchnorm_inference,
    batchnorm_train,
)
from hipdnn_trace.backends.reference.ops.layernorm import layernorm, layernorm_backward
from hipdnn_trace.backends.reference.ops.rmsnorm import rmsnorm
from hipdnn_trace.errors import UnsupportedError

EPS = 1e-5


def channel_values(x, c):
    """All values of channel c of an N, C, ... tensor, as a Python list."""
    return [float(v) for v in np.moveaxis(x, 1, 0)[c].ravel()]


def textbook_bn_train(x, gamma, beta, eps):
    """y, mean, 1/sqrt(biased var + eps) per channel, with Python sums."""
    y = np.empty_like(x)
    means, invs = [], []
    for c in range(x.shape[1]):
        vals = channel_values(x, c)
        m = sum(vals) / len(vals)
        var = sum((v - m) ** 2 for v in vals) / len(vals)
        inv = 1.0 / math.sqrt(var + eps)
        means.append(m), invs.append(inv)
        y[:, c] = gamma[c] * (x[:, c] - m) * inv + beta[c]
    return y, np.array(means), np.array(invs)


def test_batchnorm_inference_matches_formula_with_hipdnn_shaped_params():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 5))
    mean, inv, s, b = (rng.standard_normal(3) for _ in range(4))
    shaped = [v.reshape(1, 3, 1, 1) for v in (mean, inv, s, b)]
    y = batchnorm_inference(x, *shaped)
    for n, c, h, w in product(range(2), range(3), range(4), range(5)):
        assert y[n, c, h, w] == pytest.approx(s[c] * (x[n, c, h, w] - mean[c]) * inv[c] + b[c], rel=1e-13)


def test_batchnorm_train_stats_output_and_running_update():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 2, 4)) * 3.0 + 1.0
    gamma, beta = rng.standard_normal(2), rng.standard_normal(2)
    prev_m, prev_v = rng.standard_normal(2), rng.random(2) + 0.5
    out = batchnorm_train(x, gamma, beta, epsilon=EPS, momentum=0.1,
                          prev_running_mean=prev_m, prev_running_var=prev_v)
    y, means, invs = textbook_bn_train(x, gamma, beta, EPS)
    np.testing.assert_allclose(out["y"], y, rtol=1e-12, atol=1e-12)
    assert out["mean"].shape == out["inv_variance"].shape == (1, 2, 1)
    np.testing.assert_allclose(out["mean"].ravel(), means, rtol=1e-13)
    np.testing.assert_allclose(out["inv_variance"].ravel(), invs, rtol=1e-12)
    for c in range(2):
        vals = channel_values(x, c)
        n = len(vals)
        unbiased = sum((v - means[c]) ** 2 for v in vals) / (n - 1)
        assert out["next_running_mean"].ravel()[c] == pytest.approx(0.9 * prev_m[c] + 0.1 * means[c], rel=1e-13)
        assert out["next_running_var"].ravel()[c] == pytest.approx(0.9 * prev_v[c] + 0.1 * unbiased, rel=1e-13)


def test_batchnorm_train_without_running_stats_returns_none_for_them():
    out = batchnorm_train(np.arange(8.0).reshape(2, 2, 2), np.ones(2), np.zeros(2), epsilon=EPS)
    assert out["next_running_mean"] is None and out["next_running_var"] is None


def numeric_grad(f, arr, h=1e-6):
    g = np.zeros_like(arr)
    for idx in np.ndindex(arr.shape):
        up, dn = arr.copy(), arr.copy()
        up[idx] += h
        dn[idx] -= h
        g[idx] = (f(up) - f(dn)) / (2 * h)
    return g


@pytest.mark.parametrize("saved_stats", [True, False])
def test_batchnorm_backward_matches_finite_differences(saved_stats):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 2, 2))
    gamma, beta = rng.standard_normal(3), rng.standard_normal(3)
    dy = rng.standard_normal(x.shape)

    def loss_x(xv):
        return float(np.sum(textbook_bn_train(xv, gamma, beta, EPS)[0] * dy))

    _, means, invs = textbook_bn_train(x, gamma, beta, EPS)
    stats = dict(mean=means.reshape(1, 3, 1, 1), inv_variance=invs.reshape(1, 3, 1, 1)) if saved_stats \
        else dict(epsilon=EPS)
    out = batchnorm_backward(dy, x, gamma.reshape(1, 3, 1, 1), **stats)
    np.testing.assert_allclose(out["dx"], numeric_grad(loss_x, x), rtol=1e-6, atol=1e-7)
    dscale = numeric_grad(lambda g: float(np.sum(textbook_bn_train(x, g, beta, EPS)[0] * dy)), gamma)
    dbias = numeric_grad(lambda b: float(np.sum(textbook_bn_train(x, gamma, b, EPS)[0] * dy)), beta)
    np.testing.assert_allclose(out["dscale"].ravel(), dscale, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(out["dbias"].ravel(), dbias, rtol=1e-6, atol=1e-7)


def test_batchnorm_rejects_wrong_channel_counts():
    with pytest.raises(UnsupportedError, match="one per channel"):
        batchnorm_inference(np.ones((1, 3, 2)), np.ones(2), np.ones(3), np.ones(3), np.ones(3))
    with pytest.raises(UnsupportedError, match="epsilon"):
        batchnorm_backward(np.ones((1, 3, 2)), np.ones((1, 3, 2)), np.ones(3))


def textbook_layernorm(x, gamma, beta, k, eps):
    lead = x.shape[: x.ndim - k]
    rows = x.reshape(int(np.prod(lead)) if lead else 1, -1)
    y = np.empty_like(rows)
    means, invs = [], []
    for i, row in enumerate(rows):
        vals = [float(v) for v in row]
        m = sum(vals) / len(vals)
        inv = 1.0 / math.sqrt(sum((v - m) ** 2 for v in vals) / len(vals) + eps)
        means.append(m), invs.append(inv)
        y[i] = [(v - m) * inv * g + b for v, g, b in zip(vals, gamma.ravel(), beta.ravel())]
    return y.reshape(x.shape), np.array(means), np.array(invs)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_layernorm_matches_formula(k):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4)) * 2 + 0.5
    gamma, beta = rng.standard_normal(x.shape[3 - k:]), rng.standard_normal(x.shape[3 - k:])
    out = layernorm(x, gamma, beta, epsilon=EPS, normalized_dim_count=k)
    y, means, invs = textbook_layernorm(x, gamma, beta, k, EPS)
    np.testing.assert_allclose(out["y"], y, rtol=1e-12, atol=1e-12)
    assert out["mean"].shape == x.shape[: 3 - k] + (1,) * k
    np.testing.assert_allclose(out["mean"].ravel(), means, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(out["inv_variance"].ravel(), invs, rtol=1e-12)


def test_layernorm_accepts_padded_scale_and_missing_affine():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4))
    gamma = rng.standard_normal(4)
    padded = layernorm(x, gamma.reshape(1, 1, 4), None, epsilon=EPS, normalized_dim_count=1)["y"]
    y, _, _ = textbook_layernorm(x, gamma, np.zeros(4), 1, EPS)
    np.testing.assert_allclose(padded, y, rtol=1e-12, atol=1e-12)
    plain = layernorm(x, None, None, epsilon=EPS, normalized_dim_count=1)["y"]
    y1, _, _ = textbook_layernorm(x, np.ones(4), np.zeros(4), 1, EPS)
    np.testing.assert_allclose(plain, y1, rtol=1e-12, atol=1e-12)
    with pytest.raises(UnsupportedError, match="normalized_dim_count"):
        layernorm(x, None, None, epsilon=EPS, normalized_dim_count=4)


def test_layernorm_backward_matches_finite_differences():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 2, 3))
    gamma, beta = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    dy = rng.standard_normal(x.shape)
    out = layernorm_backward(dy, x, gamma, normalized_dim_count=2, epsilon=EPS)

    def loss(xv=x, g=gamma, b=beta):
        return float(np.sum(textbook_layernorm(xv, g, b, 2, EPS)[0] * dy))

    np.testing.assert_allclose(out["dx"], numeric_grad(lambda v: loss(xv=v), x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(out["dscale"], numeric_grad(lambda v: loss(g=v), gamma), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(out["dbias"], numeric_grad(lambda v: loss(b=v), beta), rtol=1e-6, atol=1e-7)
    _, means, invs = textbook_layernorm(x, gamma, beta, 2, EPS)
    saved = layernorm_backward(dy, x, gamma, normalized_dim_count=2,
                               mean=means.reshape(3, 1, 1), inv_variance=invs.reshape(3, 1, 1))
    np.testing.assert_allclose(saved["dx"], out["dx"], rtol=1e-12, atol=1e-12)


def textbook_rms(x, gamma, start, eps, bias=None):
    lead = x.shape[:start]
    rows = x.reshape(int(np.prod(lead)), -1)
    y = np.empty_like(rows)
    invs = []
    for i, row in enumerate(rows):
        vals = [float(v) for v in row]
        inv = 1.0 / math.sqrt(sum(v * v for v in vals) / len(vals) + eps)
        invs.append(inv)
        b = np.zeros(len(vals)) if bias is None else bias.ravel()
        y[i] = [v * inv * g + bb for v, g, bb in zip(vals, gamma.ravel(), b)]
    return y.reshape(x.shape), np.array(invs)


def test_rmsnorm_derives_normalized_dims_from_scale_shape():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 4, 5))
    gamma = rng.standard_normal((1, 1, 4, 5))          # trailing H, W match: normalize over H, W
    out = rmsnorm(x, gamma, epsilon=EPS)
    y, invs = textbook_rms(x, gamma, 2, EPS)
    np.testing.assert_allclose(out["y"], y, rtol=1e-12, atol=1e-12)
    assert out["inv_rms"].shape == (2, 3, 1, 1)
    np.testing.assert_allclose(out["inv_rms"].ravel(), invs, rtol=1e-12)
    full = rmsnorm(x, gamma.repeat(3, axis=1), rng.standard_normal((1, 3, 4, 5)), epsilon=EPS)
    assert full["inv_rms"].shape == (2, 1, 1, 1)       # C, H, W all match: normalize from dim 1


def test_rmsnorm_with_explicit_count_and_bias():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 6))
    gamma, beta = rng.standard_normal(6), rng.standard_normal(6)
    out = rmsnorm(x, gamma, beta, epsilon=1e-3, normalized_dim_count=1)
    y, _ = textbook_rms(x, gamma, 1, 1e-3, bias=beta)
    np.testing.assert_allclose(out["y"], y, rtol=1e-12, atol=1e-12)
    with pytest.raises(UnsupportedError, match="no trailing dims"):
        rmsnorm(np.ones((2, 3, 4)), np.ones((1, 3, 1)), epsilon=EPS)

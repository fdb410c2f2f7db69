"""Rounding float64 results to hipDNN tensor types, checked against bit-level definitions."""

from __future__ import annotations

import struct

import ml_dtypes
import numpy as np
import pytest

from hipdnn_trace.backends.reference.ops.rounding import round_to
from hipdnn_trace.errors import UnsupportedError


def bf16_bits_rne(f32: float) -> int:
    """Round-to-nearest-even of a float32 to bfloat16, on the bit pattern."""
    bits = struct.unpack("<I", struct.pack("<f", f32))[0]
    lsb = (bits >> 16) & 1
    return ((bits + 0x7FFF + lsb) >> 16) & 0xFFFF


def f32(v: float) -> float:
    return struct.unpack("<f", struct.pack("<f", v))[0]


VALUES = [1 / 3, -2.71828, 1.00390625, 1.01171875, 65504.0, 1e-6, -123456.789, 3.0e38]


@pytest.mark.parametrize("v", VALUES)
def test_bfloat16_is_round_nearest_even_of_the_float32(v):
    got = round_to(np.array([v]), "bfloat16")
    assert got.dtype == ml_dtypes.bfloat16
    assert int(got.view(np.uint16)[0]) == bf16_bits_rne(f32(v))


@pytest.mark.parametrize("v", [v for v in VALUES if abs(v) < 65520])
def test_half_matches_ieee_binary16_of_the_float32(v):
    got = round_to(np.array([v]), "half")
    assert got.dtype == np.float16
    assert got.tobytes() == struct.pack("<e", f32(v))      # struct rounds half to even


def test_half_goes_through_float_like_hipdnn():
    # 1 + 2^-11 + 2^-40: direct rounding to half goes up, but via float32 the tail is
    # dropped first and the tie then rounds to even (1.0), as hipDNN's safeConvert does
    v = 1.0 + 2.0**-11 + 2.0**-40
    assert round_to(np.array([v]), "half")[0] == np.float16(1.0)
    assert round_to(np.array([1e6]), "half")[0] == np.inf


def test_fp8_rounds_to_nearest_even_and_saturates_like_hip_satfinite():
    got = round_to(np.array([1.0625, 1.1875, 500.0, -1e30, np.inf, np.nan]), "fp8_e4m3")
    assert got.dtype == ml_dtypes.float8_e4m3fn
    # e4m3 has 3 mantissa bits: 1 + 1/16 ties to 1.0, 1 + 3/16 ties up to 1.25
    assert got[:5].astype(np.float64).tolist() == [1.0, 1.25, 448.0, -448.0, 448.0]
    assert np.isnan(got[5].astype(np.float64))
    e5 = round_to(np.array([1e6, -np.inf, 3.0]), "fp8_e5m2").astype(np.float64)
    assert e5.tolist() == [57344.0, -57344.0, 3.0]


def test_float_and_double():
    v = np.array([0.1, 1e39])
    got = round_to(v, "float")
    assert got.dtype == np.float32 and got[0] == np.float32(0.1) and got[1] == np.inf
    assert round_to(v, "double").tobytes() == v.tobytes()


def test_integers_truncate_toward_zero_and_saturate():
    v = np.array([2.9, -2.9, 0.5, 300.0, -300.0, 1e12])
    np.testing.assert_array_equal(round_to(v, "int8"), np.array([2, -2, 0, 127, -128, 127], dtype=np.int8))
    np.testing.assert_array_equal(round_to(v, "uint8"), np.array([2, 0, 0, 255, 0, 255], dtype=np.uint8))
    np.testing.assert_array_equal(round_to(v, "int32"),
                                  np.array([2, -2, 0, 300, -300, 2**31 - 1], dtype=np.int32))
    big = round_to(np.array([1e19, -1e19]), "int64")
    assert big.tolist() == [2**63 - 1, -(2**63)]


def test_unrepresentable_values_and_types_are_unsupported():
    with pytest.raises(UnsupportedError, match="NaN"):
        round_to(np.array([np.nan]), "int32")
    with pytest.raises(UnsupportedError, match="host form"):
        round_to(np.array([1.0]), "mxfp4")
    with pytest.raises(UnsupportedError, match="unknown"):
        round_to(np.array([1.0]), "float128")


@pytest.mark.parametrize("dtype", ["half", "bfloat16", "fp8_e4m3", "fp8_e5m2"])
def test_rounding_in_chunks_gives_the_bits_of_one_pass(dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Large outputs go through float32 a chunk at a time (issue 33: a whole-output float32 copy was
    half the output's float64 size again); the bits are those of the one-pass definition."""
    from hipdnn_trace.backends.reference.ops import rounding

    rng = np.random.default_rng(3)
    values = rng.standard_normal((5, 7, 11)) * np.float64(10.0) ** rng.integers(-8, 8, (5, 7, 11))
    values[0, 0, :4] = [np.nan, np.inf, -np.inf, 1e300]
    target = np.dtype({"half": np.float16, "bfloat16": ml_dtypes.bfloat16, "fp8_e4m3": ml_dtypes.float8_e4m3fn,
                       "fp8_e5m2": ml_dtypes.float8_e5m2}[dtype])
    whole = rounding._via_float(values, target, dtype)
    monkeypatch.setattr(rounding, "ROUND_CHUNK_ELEMENTS", 13)   # 385 elements: 30 chunks, the last partial
    chunked = round_to(values, dtype)
    assert chunked.dtype == whole.dtype and chunked.shape == values.shape
    np.testing.assert_array_equal(chunked.view(np.uint8), whole.view(np.uint8))

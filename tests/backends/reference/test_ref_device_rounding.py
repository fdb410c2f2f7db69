"""Rounding on a torch device gives ``round_to``'s bits for every data type with a host form.

``round_in`` rounds in torch where torch's conversion is the same rule (float, half, bfloat16, fp8
e4m3/e5m2, the integers, boolean), from the exponent bits for fp8_e8m0, and on the host otherwise;
either way a validator reading the device's stored values sees exactly what the host would store.
The values cover every tie between neighbours of the small types, the values one float64 / float32
step either side of a tie (double rounding through float32), subnormals of every type, overflow and
saturation, the integer limits, infinities and NaNs with both signs and odd payloads. Runs on
torch's CPU (skipped without torch); the GPU is checked by the ``cuda`` test at the end.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from hipdnn_trace.backends.reference import xp as shim
from hipdnn_trace.backends.reference.ops.rounding import TORCH_EXACT, round_in, round_to, stored_values
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.dtypes import DTYPES, is_integer

torch = pytest.importorskip("torch")

HOST_TYPES = sorted(n for n, d in DTYPES.items() if d.numpy is not None)
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _nans() -> np.ndarray:
    """Quiet and signalling NaNs of both signs, with small and large payloads."""
    patterns = [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0xFFF4000000000ABC,
                0x7FFFFFFFFFFFFFFF, 0x7FF8000020000000]
    return np.array(patterns, dtype=np.uint64).view(np.float64)


@np.errstate(over="ignore")
def _neighbours(values: np.ndarray) -> np.ndarray:
    """Each value, one float64 step and one float32 step either side of it."""
    v = values[np.isfinite(values)]
    v32 = v.astype(np.float32)
    return np.concatenate([v, np.nextafter(v, np.inf), np.nextafter(v, -np.inf),
                           np.nextafter(v32, np.float32(np.inf)).astype(np.float64),
                           np.nextafter(v32, np.float32(-np.inf)).astype(np.float64)])


@np.errstate(over="ignore", invalid="ignore")
def _float_cases(name: str, rng: np.random.Generator) -> np.ndarray:
    """Every value of a small float type (a sample for float32 and double), the midpoints between
    neighbours (ties), their neighbours, values past the largest finite one, infinities and NaNs."""
    dtype = np.dtype(DTYPES[name].numpy)
    if dtype.itemsize <= 2:
        codes = np.arange(1 << (8 * dtype.itemsize), dtype=_UINT[dtype.itemsize])
    else:
        uint = _UINT[dtype.itemsize]
        codes = rng.integers(0, np.iinfo(uint).max, 50_000, dtype=uint, endpoint=True)
        codes[:64] = np.arange(64)          # the smallest subnormals
    values = codes.view(dtype).astype(np.float64)
    finite = np.unique(values[np.isfinite(values)])
    ties = (finite[:-1] + finite[1:]) / 2
    top = float(finite.max())
    beyond = np.array([top * 1.0001, top * 1.5, top * 2, 1e300, np.finfo(np.float64).max, 5e-324, 1e-310])
    base = np.concatenate([finite, ties, beyond])
    return np.concatenate([_neighbours(np.concatenate([base, -base])), [np.inf, -np.inf, 0.0, -0.0], _nans()])


def _integer_cases(name: str, rng: np.random.Generator) -> np.ndarray:
    info = np.iinfo(DTYPES[name].numpy)
    lo, hi = float(info.min), float(info.max)
    around = np.array([lo, hi, 0.0, 1.0, -1.0, 2.0 ** 31, -(2.0 ** 31), 2.0 ** 63, -(2.0 ** 63), 2.0 ** 53])
    halves = np.arange(-300, 300) + 0.5
    spread = rng.standard_normal(20_000) * np.exp2(rng.integers(-4, 70, 20_000))
    base = np.concatenate([around, around + 0.5, around - 0.5, halves, spread, [1e300, -1e300, 5e-324]])
    return np.concatenate([_neighbours(base), [np.inf, -np.inf, -0.0]])


def _cases(name: str) -> np.ndarray:
    rng = np.random.default_rng(sum(map(ord, name)))
    if name == "boolean":
        return np.concatenate([_neighbours(np.array([0.0, 1.0, -1.0, 5e-324, 1e300])), [np.inf, -np.inf, -0.0]])
    return _float_cases(name, rng) if DTYPES[name].is_float else _integer_cases(name, rng)


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(_UINT[a.itemsize]) if a.dtype != np.bool_ else a


@pytest.mark.parametrize("name", HOST_TYPES)
def test_device_rounding_equals_round_to_bit_for_bit(name: str) -> None:
    values = _cases(name)
    want = round_to(values, name)
    got = round_in(torch.from_numpy(values), name)
    assert got.dtype == shim.torch_storage_dtype(name)
    host = shim.storage_to_numpy(got, name)
    assert host.dtype == want.dtype
    differ = np.flatnonzero(_bits(host) != _bits(want))
    assert differ.size == 0, f"{name}: {values[differ[:5]]} -> {host[differ[:5]]}, round_to {want[differ[:5]]}"


@np.errstate(invalid="ignore")
def _e8m0_grid() -> np.ndarray:
    """Every float32 exponent (subnormals included) with the mantissas either side of e8m0's rounding
    boundaries (1.0 and 1.5; 2^-127 for subnormals), both signs, as float64."""
    mantissas = np.array([0, 1, 2, 0x3FFFFF, 0x400000, 0x400001, 0x5FFFFF, 0x600000, 0x600001, 0x7FFFFE, 0x7FFFFF],
                         dtype=np.uint32)
    exponents = np.arange(256, dtype=np.uint32)
    bits = (exponents[:, None] << 23 | mantissas[None, :]).reshape(-1)
    bits = np.concatenate([bits, bits | np.uint32(0x80000000)])
    return bits.view(np.float32).astype(np.float64)


@pytest.mark.skipif(not hasattr(torch, "float8_e8m0fnu"), reason="this torch has no float8_e8m0fnu")
def test_e8m0_is_rounded_in_torch_never_on_the_host(monkeypatch) -> None:
    """fp8_e8m0 (a block scale) is rounded on the device from the exponent bits, with ml_dtypes'
    rule (not torch's own cast, which maps 0 and negatives to 2^-127): no host round trip, and
    round_to's bits over every float32 exponent at the rounding boundaries and all the usual cases."""
    from hipdnn_trace.backends.reference.ops import rounding

    values = np.concatenate([_cases("fp8_e8m0"), _e8m0_grid()])
    want = round_to(values, "fp8_e8m0")

    def refuse(*args, **kwargs):
        raise AssertionError("rounded on the host")

    monkeypatch.setattr(rounding, "round_to", refuse)
    monkeypatch.setattr(shim, "to_numpy", refuse)
    got = round_in(torch.from_numpy(values), "fp8_e8m0")
    monkeypatch.undo()
    assert got.dtype == torch.float8_e8m0fnu
    host = shim.storage_to_numpy(got, "fp8_e8m0")
    differ = np.flatnonzero(_bits(host) != _bits(want))
    assert differ.size == 0, f"{values[differ[:5]]} -> {host[differ[:5]]}, round_to {want[differ[:5]]}"


@pytest.mark.parametrize("name", [n for n in HOST_TYPES if n in TORCH_EXACT and (is_integer(n) or n == "boolean")])
def test_nan_into_an_integer_or_boolean_is_the_same_refusal(name: str) -> None:
    values = np.array([1.0, np.nan])
    with pytest.raises(UnsupportedError) as host:
        round_to(values, name)
    with pytest.raises(UnsupportedError) as device:
        round_in(torch.from_numpy(values), name)
    assert str(device.value) == str(host.value)


def test_stored_values_read_back_as_float64_in_the_same_namespace() -> None:
    values = np.array([1.0 + 2.0 ** -9, 65520.0, -3.0e-8, np.nan])
    got = stored_values(torch.from_numpy(values), "half")
    assert got.dtype == torch.float64
    np.testing.assert_array_equal(got.numpy(), round_to(values, "half").astype(np.float64))
    np.testing.assert_array_equal(stored_values(values, "half"), round_to(values, "half").astype(np.float64))


def test_storage_round_trips_every_type_bit_for_bit() -> None:
    rng = np.random.default_rng(5)
    for name in HOST_TYPES:
        dtype = np.dtype(DTYPES[name].numpy)
        raw = rng.integers(0, 256, 64 * dtype.itemsize, dtype=np.uint8)
        host = (raw % 2).astype(bool) if name == "boolean" else raw.view(dtype)
        if dtype.itemsize == 1 and DTYPES[name].bits < 8:   # fp4 / fp6 codes use the low bits only
            host = (raw % (1 << DTYPES[name].bits)).view(dtype)
        back = shim.storage_to_numpy(shim.to_storage(host, name), name)
        assert back.dtype == host.dtype and back.tobytes() == host.tobytes(), name


def test_types_torch_lacks_are_held_as_exact_float32_values() -> None:
    codes = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn)
    t = shim.to_storage(codes, "fp4_e2m1")
    assert t.dtype == torch.float32
    np.testing.assert_array_equal(t.numpy(), codes.astype(np.float32))


@pytest.mark.gpu
@pytest.mark.cuda
def test_cuda_rounding_equals_round_to_bit_for_bit() -> None:
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    for name in HOST_TYPES:
        values = _cases(name)
        want = round_to(values, name)
        got = shim.storage_to_numpy(round_in(torch.from_numpy(values).cuda(), name), name)
        assert got.tobytes() == want.tobytes(), name
    grid = _e8m0_grid()
    got = shim.storage_to_numpy(round_in(torch.from_numpy(grid).cuda(), "fp8_e8m0"), "fp8_e8m0")
    assert got.tobytes() == round_to(grid, "fp8_e8m0").tobytes()


def test_to_numpy_brings_every_torch_float8_storage_back_bit_for_bit() -> None:
    """torch's .numpy() refuses its float8 types (e8m0 included: a stored block scale); to_numpy gives
    them back as the ml_dtypes type with the same bits (a GPU run failed here on an e8m0 scale)."""
    torch = pytest.importorskip("torch")
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"):
        dtype = getattr(torch, name, None)
        if dtype is None:
            continue
        t = torch.tensor([0.25, 1.0, 2.0, 8.0]).to(dtype)
        host = shim.to_numpy(t)
        assert host.dtype.name == name
        assert np.array_equal(host.view(np.uint8), shim.bits(t).numpy().view(np.uint8))
        assert host.astype(np.float64).tolist() == [0.25, 1.0, 2.0, 8.0]


def _e8m0_by_definition(x: float) -> float:
    """The nearest power of two in [2^-127, 2^127] by the linear midpoint, ties up (1.5 * 2^k -> 2^(k+1));
    NaN for zero, negatives, inf, NaN and from 1.5 * 2^127 up (e8m0 has no zero, no sign)."""
    if not math.isfinite(x) or x <= 0:
        return math.nan
    mantissa, exponent = math.frexp(x)          # x = mantissa * 2^exponent, mantissa in [0.5, 1)
    k = exponent - 1                            # 2^k <= x < 2^(k+1)
    k = k + 1 if mantissa * 2 >= 1.5 else k
    if k > 127:
        return math.nan
    return 2.0 ** max(k, -127)


def test_e8m0_host_rounding_is_the_definition_whatever_ml_dtypes_is() -> None:
    """The rule is written out (rounding._e8m0_codes), so an ml_dtypes release that changes its own cast
    (0.7 did, for float64 and below 2^-126) cannot move the reference: checked against the definition over
    every float32 exponent at the boundaries, on values already float32 (the rule's input)."""
    values = _e8m0_grid().astype(np.float32).astype(np.float64)
    got = round_to(values, "fp8_e8m0").astype(np.float64)
    want = np.array([_e8m0_by_definition(float(v)) for v in values])
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    assert same.all(), f"{values[~same][:5]} -> {got[~same][:5]}, definition {want[~same][:5]}"

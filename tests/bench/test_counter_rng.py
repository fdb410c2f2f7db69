"""The counter-based input generator on the host: pinned known answers, determinism, chunk and
thread invariance, 2^32 boundaries, and domains that hold for every value a table can give."""

from __future__ import annotations

import statistics

import ml_dtypes
import numpy as np
import pytest

from hipdnn_trace.bench import counter_rng as cr
from hipdnn_trace.errors import UnsupportedError

STREAM = cr.Stream.of(0, "known-answer", 7)
#: every type with a host form, narrow and wide
TYPES = ["float", "double", "half", "bfloat16", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3_fnuz", "fp8_e5m2_fnuz",
         "fp8_e8m0", "fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "int8", "uint8", "int32", "int64", "boolean"]


def _fill(dtype: str, n: int, domain: str = "any", stream: cr.Stream = STREAM, **kw) -> np.ndarray:
    values = cr.table(domain, dtype)
    out = np.empty(n, dtype=np.float64 if dtype == "double" else values.dtype)
    cr.fill(out, stream, values, wide=dtype in cr.WIDE, **kw)
    return out


def test_known_answers_pin_the_generator_version() -> None:
    """Any change to these bits must come with a new GENERATOR (cache keys and --resume trust it)."""
    assert cr.GENERATOR == "counter-fmix32-v1"
    assert (STREAM.key, STREAM.gamma) == (316701089, 1162296369)
    assert [int(h) for h in cr.hashes(STREAM, 0, 3)] == [0x10594BA7, 0x64DEBFF8, 0xBCE37146]
    assert [int(h) for h in cr.hashes(STREAM, 2**32, 2)] == [0x0E81D092, 0x22BF7414]
    assert cr.tables_digest() == "eb184b4d4ac0e8c9"
    # half: words 0x4BA7, 0x1059, 0xBFF8, 0x64DE of the hashes above, looked up in the table
    half = _fill("half", 4)
    assert [int(v) for v in half.view(np.uint16)] == [
        int(cr.table("any", "half").view(np.uint16)[w]) for w in (0x4BA7, 0x1059, 0xBFF8, 0x64DE)]
    f32 = cr.float_table("any").view(np.uint32)
    assert [int(v) for v in _fill("float", 2).view(np.uint32)] == [
        int(f32[0x4BA7]) ^ 0x1059, int(f32[0xBFF8]) ^ 0x64DE]
    assert [float(v) for v in half] == [-0.45361328125, -0.164306640625, 3.314453125, 0.095947265625]


def test_fmix32_is_murmur3s_finalizer() -> None:
    assert cr.fmix32(0) == 0 and cr.fmix32(1) == 0x514E28B7   # murmur3's published fmix32(1)


def test_the_same_key_gives_the_same_bits_and_another_key_others() -> None:
    a = _fill("float", 5000)
    assert a.tobytes() == _fill("float", 5000).tobytes()
    for other in (cr.Stream.of(1, "known-answer", 7), cr.Stream.of(0, "known-answer!", 7),
                  cr.Stream.of(0, "known-answer", 8)):
        b = _fill("float", 5000, stream=other)
        assert np.mean(a == b) < 0.01
        assert abs(np.corrcoef(a, b)[0, 1]) < 0.1


@pytest.mark.parametrize("dtype", ["half", "float", "double", "int8", "boolean", "fp4_e2m1"])
@pytest.mark.parametrize(("chunk", "threads"), [(1, 1), (2, 3), (7, 2), (1000, 5), (1 << 16, 4)])
def test_bits_do_not_depend_on_chunk_or_threads(dtype: str, chunk: int, threads: int,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cr, "THREADED_MIN", 0)          # small tensors take the pool too
    whole = _fill(dtype, 20001)
    assert _fill(dtype, 20001, chunk=chunk, threads=threads).tobytes() == whole.tobytes()
    tail = _fill(dtype, 20001 - 9, start=9, chunk=chunk, threads=threads)   # an odd first element
    assert tail.tobytes() == whole[9:].tobytes()


@pytest.mark.parametrize("dtype", ["half", "float"])
def test_hash_index_2_to_the_32_starts_a_new_block(dtype: str) -> None:
    """Segments split at 2^32 hashes: element values there are the reference hashes' and do not
    repeat the tensor's start (a period of 2^32 would repeat huge tensors)."""
    per = 1 if dtype in cr.WIDE else 2               # elements per hash
    first = (2**32 - 3) * per
    near = _fill(dtype, 10 * per, start=first, chunk=4)
    words = cr.hashes(STREAM, 2**32 - 3, 10)
    assert np.array_equal(words, np.concatenate([cr.hashes(STREAM, 2**32 - 3, 3), cr.hashes(STREAM, 2**32, 7)]))
    assert not np.array_equal(cr.hashes(STREAM, 2**32, 7), cr.hashes(STREAM, 0, 7))
    if dtype == "half":
        expected = cr.table("any", "half")[words.view(np.uint16)]
    else:
        expected = (cr.float_table("any").view(np.uint32)[words & 0xFFFF] ^ (words >> 16)).view(np.float32)
    assert near.tobytes() == expected.tobytes()


def test_quantiles_are_far_from_float32_rounding_ties() -> None:
    """The float tables come from libm's log (NormalDist.inv_cdf): each float64 quantile lies at
    least 1024 float64 ulps from a float32 rounding midpoint, so any libm within a few ulps rounds
    the same table (measured: ~50000 ulps), and another machine's cache entry holds our values."""
    n = 1 << 14
    q = np.array([statistics.NormalDist().inv_cdf((m + 0.5) / n) for m in range(n)])
    f = q.astype(np.float32)
    ulp = np.spacing(np.abs(q))
    for toward in (np.inf, -np.inf):
        mid = (f.astype(np.float64) + np.nextafter(f, np.float32(toward)).astype(np.float64)) / 2
        assert np.min(np.abs(q - mid) / ulp) > 1024


def test_any_spreads_signs_and_binary_orders() -> None:
    x = _fill("float", 200_000).astype(np.float64)
    assert 0.48 < np.mean(x > 0) < 0.52 and not (x == 0).any()
    assert abs(np.mean(x)) < 0.02
    octaves = np.floor(np.log2(np.abs(x)))
    spread = np.percentile(octaves, 95) - np.percentile(octaves, 5)
    assert spread >= 4                                  # several binary orders, not one
    assert abs(np.corrcoef(x[:-1], x[1:])[0, 1]) < 0.02  # neighbours are not related
    assert len(np.unique(x)) > 0.99 * x.size             # float: 2^32 patterns, hardly a repeat


@pytest.mark.parametrize("dtype", [t for t in TYPES if t not in ("fp8_e8m0",)])
def test_every_value_a_table_gives_keeps_its_domain(dtype: str) -> None:
    """Exhaustive: narrow types take only table values; wide ones only change the 16 low mantissa
    bits, so the smallest magnitude they reach is the table value with those bits cleared."""
    for domain in cr.DOMAINS:
        values = cr.table(domain, dtype)
        if dtype in cr.WIDE:
            values = (values.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
        v = values.astype(np.float64)
        if not cr.dtypes.lookup(dtype).is_float:
            lo, hi = cr.INT_RANGES.get(dtype, (-8, 9))
            assert set(np.unique(v)) == set(range(lo, hi))
            continue
        assert np.isfinite(v).all() and (v != 0).any()
        if domain == "positive":
            assert v.min() >= 0.5
        elif domain == "nonzero":
            assert np.abs(v).min() >= 0.25 and (v < 0).any() and (v > 0).any()
        else:
            assert (v < 0).any() and (v > 0).any()


def test_e8m0_scales_are_positive_powers_of_two() -> None:
    v = cr.table("positive", "fp8_e8m0").astype(np.float64)
    assert np.isfinite(v).all() and v.min() >= 0.5 and (np.log2(v) % 1 == 0).all()


def test_narrow_tables_are_round_to_of_the_float_table() -> None:
    """A narrow type's entries are the float32 values stored as hipDNN stores them (via float,
    round-to-nearest-even, fp8 saturating): one rounding rule for every input."""
    from hipdnn_trace.backends.reference.ops.rounding import round_to

    for dtype in ("half", "bfloat16", "fp8_e4m3", "fp4_e2m1"):
        expected = round_to(cr.float_table("any").astype(np.float64), dtype)
        assert cr.table("any", dtype).tobytes() == expected.tobytes()
    assert cr.table("any", "bfloat16").dtype == ml_dtypes.bfloat16


def test_types_without_a_host_form_are_refused_as_before() -> None:
    with pytest.raises(UnsupportedError, match="no element-wise host form"):
        cr.table("any", "mxfp8")

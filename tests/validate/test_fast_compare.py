"""The cache-sized, threaded host comparison equals the comparison as it was, field for field.

The oracle is compare_tensor before this path (``chunked_compare_oracle.compare_chunked``, commit
2091ff9). Cases come from hypothesis (``compare_cases.py``): every stored type, NaN/Inf/poison, ties,
zeros, ignore masks, empty outputs; chunk sizes from 1 element and 1 to 4 threads, so every merge
of per-chunk tallies (in index order, whatever thread judged a chunk) is exercised.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from chunked_compare_oracle import compare_chunked
from compare_cases import Case, cases, same
from hypothesis import HealthCheck, given, settings, strategies as st

from hipdnn_trace.validate import compare
from hipdnn_trace.validate.compare import HOST_CHUNK_ELEMENTS, compare_tensor
from hipdnn_trace.validate.poison import poison

CHUNKS = st.sampled_from([None, 1, 2, 3, 5, 7, 16, 1 << 20])


def _assert_as_before(case: Case, **how: object) -> None:
    want = compare_chunked(case.actual, case.expected, **case.kwargs)
    got = compare_tensor(case.actual, case.expected, **how, **case.kwargs)
    assert same(got, want), f"{how}: {got} != {want}"
    assert got.passed == want.passed and got.message() == want.message()


@settings(max_examples=600, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(), chunk=CHUNKS, threads=st.integers(1, 4))
def test_equals_the_comparison_as_it_was(case: Case, chunk: int | None, threads: int) -> None:
    _assert_as_before(case, chunk_elements=chunk, threads=threads)


def _rounded(shape: tuple[int, ...], dtype: object, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A passing output: the float64 expected values stored in ``dtype``, a quarter of them zero (ReLU)."""
    rng = np.random.default_rng(seed)
    expected = rng.standard_normal(shape) * 30.0
    expected[rng.random(shape) < 0.25] = 0.0
    return expected.astype(dtype), expected


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, ml_dtypes.float8_e4m3fnuz])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_multi_chunk_outputs_with_few_failures(dtype: object, threads: int) -> None:
    """Several cache-sized chunks (and a ragged last one), mostly passing: the quick path decides most
    chunks, the exact judge the few with a NaN, an Inf, a poisoned element, a zero or a wrong value."""
    n = 3 * HOST_CHUNK_ELEMENTS + 77
    actual, expected = _rounded((n,), dtype, threads)
    _assert_as_before(Case(actual, expected, {"atol": 0.05, "rtol": 0.1}), threads=threads)
    flat = actual.reshape(-1)
    flat[HOST_CHUNK_ELEMENTS - 1] = np.nan
    flat[HOST_CHUNK_ELEMENTS] = np.inf
    poison(flat[2 * HOST_CHUNK_ELEMENTS + 3:2 * HOST_CHUNK_ELEMENTS + 5])
    flat[n - 1] += 40
    ignore = np.zeros(n, dtype=bool)
    ignore[HOST_CHUNK_ELEMENTS:HOST_CHUNK_ELEMENTS + 1000] = True
    for kwargs in ({"atol": 0.05, "rtol": 0.1}, {"atol": 0.05, "rtol": 0.1, "ignore": ignore, "top": 3},
                   {"atol": 0.0, "rtol": 0.0, "reference": expected}):
        _assert_as_before(Case(actual, expected, kwargs), threads=threads)
        _assert_as_before(Case(actual, expected, kwargs), threads=threads, chunk_elements=4099)


def test_any_thread_count_and_chunk_size_give_one_result() -> None:
    actual, expected = _rounded((5, 7001), np.float16, 9)
    actual.reshape(-1)[::997] += 1.0
    base = compare_tensor(actual, expected, atol=1e-3, rtol=1e-3, threads=1)
    assert base.mismatches > 0
    for threads in (2, 3, 8):
        for chunk in (1000, 4096, 35005, None):
            assert same(compare_tensor(actual, expected, atol=1e-3, rtol=1e-3, threads=threads,
                                       chunk_elements=chunk), base)


def test_an_output_with_finite_values_never_needs_the_exact_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only chunks with a non-finite (or possibly poisoned) element need the whole exact judge; values
    outside their bound are ranked among the failing elements alone."""
    calls: list[int] = []
    exact = compare._judge_chunk

    def counting(*args: object) -> object:
        calls.append(1)
        return exact(*args)

    monkeypatch.setattr(compare, "_judge_chunk", counting)
    actual, expected = _rounded((4, HOST_CHUNK_ELEMENTS), np.float16, 1)
    assert compare_tensor(actual, expected, atol=0.05, rtol=1e-2, threads=2).passed
    actual[1, ::7] += 1
    assert compare_tensor(actual, expected, atol=0.05, rtol=1e-2, threads=2).mismatches > 1000
    assert calls == []
    actual[2, 5] = np.nan
    assert compare_tensor(actual, expected, atol=0.05, rtol=1e-2, threads=2).nonfinite == 1
    assert len(calls) == 1


def test_a_finite_poison_value_is_told_from_the_same_value_written() -> None:
    """fp4 is stored one element per byte: 0x0F and 0xFF both read as -6, only 0xFF is the poison."""
    expected = np.full(8, -6.0)
    actual = np.full(8, 0x0F, dtype=np.uint8)
    actual[[1, 6]] = 0xFF
    result = compare_tensor(actual.view(ml_dtypes.float4_e2m1fn), expected, atol=0.0, rtol=0.0, chunk_elements=3)
    assert result.unwritten == 2 and result.mismatches == 0 and result.nonfinite == 0
    assert [e.index for e in result.worst] == [(1,), (6,)]


def test_ignored_elements_count_nowhere_even_when_every_element_passes() -> None:
    """Ignored elements are compared as zeros on both sides: with a tolerance wide enough for their
    garbage to pass, they must still not lift the maxima."""
    actual, expected = _rounded((2, 3, HOST_CHUNK_ELEMENTS // 4), np.float32, 4)
    expected[1, 2] = 1e5
    ignore = np.zeros((2, 3, 1), dtype=bool)
    ignore[1, 2] = True
    kwargs = {"atol": 1e9, "rtol": 0.0, "ignore": ignore}
    _assert_as_before(Case(actual, expected, kwargs), threads=2)
    assert compare_tensor(actual, expected, **kwargs).max_abs < 1.0

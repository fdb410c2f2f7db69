"""Chunked comparison equals the whole-array one exactly, and its memory stays bounded.

The oracle is compare_tensor as it was before chunking (``unchunked_compare.compare_whole``).
Outputs carry NaN, Inf, overflowing and never-written (poisoned) elements placed on chunk edges,
and chunk sizes are tiny, so every merge across chunks (sums, maxima, the worst-element list and
its ties) is exercised.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from peak_rss import CHILD_HELPERS, can_reset_peak
from unchunked_compare import compare_whole

from hipdnn_trace.validate.compare import CHUNK_BYTES_PER_ELEMENT, CHUNK_ELEMENTS, compare_tensor
from hipdnn_trace.validate.poison import poison

REPO = Path(__file__).resolve().parents[2]
CHUNKS = (1, 3, 7, 16, 1 << 20)


def _same(x: object, y: object) -> bool:
    """Equality where NaN equals NaN (max_abs of a shape problem, NaN expected values)."""
    if isinstance(x, float) and isinstance(y, float):
        return (math.isnan(x) and math.isnan(y)) or x == y
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    if dataclasses.is_dataclass(x) and dataclasses.is_dataclass(y):
        return type(x) is type(y) and all(_same(getattr(x, f.name), getattr(y, f.name))
                                          for f in dataclasses.fields(x))
    return x == y


def _assert_identical(actual, expected, **kw) -> None:
    whole = compare_whole(actual, expected, **kw)
    for chunk in CHUNKS:
        chunked = compare_tensor(actual, expected, chunk_elements=chunk, **kw)
        assert _same(chunked, whole), f"chunk {chunk}: {chunked} != {whole}"
        assert chunked.passed == whole.passed and chunked.message() == whole.message()


def _damaged(rng: np.random.Generator, shape: tuple[int, ...], dtype) -> tuple[np.ndarray, np.ndarray]:
    """(actual, float64 expected): rounding noise, a few wrong values, and NaN/Inf/poison at the
    positions where chunks of 3, 7 and 16 start and end."""
    expected = rng.standard_normal(shape) * 4.0
    actual = (expected + rng.standard_normal(shape) * 1e-3).astype(dtype)
    flat = actual.reshape(-1)
    n = flat.size
    edges = sorted({i for c in (3, 7, 16) for k in range(1, n // c + 1) for i in (k * c - 1, k * c) if i < n})
    picks = rng.choice(edges, size=min(len(edges), 12), replace=False)
    for j, i in enumerate(picks):
        kind = j % 4
        if kind == 0:
            flat[i] = np.nan
        elif kind == 1:
            flat[i] = np.inf if j % 8 == 1 else -np.inf
        elif kind == 2:
            poison(flat[i:i + 1])
        else:
            flat[i] = flat[i] + 3.0                      # a plain mismatch
    return actual, expected


@pytest.mark.parametrize("dtype", [np.float16, np.float32, ml_dtypes.bfloat16, np.float64])
@pytest.mark.parametrize("seed", range(4))
def test_chunked_equals_whole_with_nan_inf_poison_at_chunk_edges(dtype, seed: int) -> None:
    rng = np.random.default_rng(seed)
    actual, expected = _damaged(rng, (5, 7, 3), dtype)
    reference = expected + 1e-12
    _assert_identical(actual, expected, atol=1e-2, rtol=1e-2, reference=reference)
    _assert_identical(actual, expected, atol=0.0, rtol=0.0)            # nearly everything fails
    _assert_identical(actual, expected, atol=1e-2, rtol=1e-2, top=3)
    _assert_identical(actual, expected, atol=1e-2, rtol=1e-2, top=0)


def test_ties_and_nan_scores_rank_as_one_sort_would() -> None:
    """Equal scores are listed by index, across chunks; NaN scores (NaN or Inf expected values)
    come after every passing element, so they show only when every element failed."""
    expected = np.array([1.0, np.nan, 1.0, np.inf, 1.0, 1.0, -np.inf, 1.0, 1.0, np.nan])
    actual = np.array([3.0, 0.0, 3.0, 0.0, 3.0, 3.0, 1.0, 1.0, 3.0, 2.0], dtype=np.float32)
    _assert_identical(actual, expected, atol=0.5, rtol=0.0)
    _assert_identical(actual, expected, atol=0.5, rtol=0.0, top=2)
    everything_fails = actual.copy()
    everything_fails[7] = 9.0
    _assert_identical(everything_fails, expected, atol=0.5, rtol=0.0)


def test_ignored_rows_broadcast_and_all_ignored() -> None:
    rng = np.random.default_rng(7)
    actual, expected = _damaged(rng, (2, 3, 8, 4), np.float16)
    rows = np.zeros((2, 1, 8, 1), dtype=bool)
    rows[0, 0, 5:] = True
    rows[1, 0, :2] = True
    _assert_identical(actual, expected, atol=1e-2, rtol=1e-2, ignore=rows)
    _assert_identical(actual, expected, atol=1e-2, rtol=1e-2, ignore=np.ones(actual.shape, dtype=bool))


def test_integer_outputs_and_wholly_poisoned_integers() -> None:
    rng = np.random.default_rng(3)
    expected = rng.uniform(-140, 140, size=(6, 11))
    actual = np.clip(np.rint(expected), -128, 127).astype(np.int8)
    actual.reshape(-1)[[2, 15, 16, 31]] = [5, -1, -1, 100]            # -1 is all-ones: a legal value
    _assert_identical(actual, expected, atol=0.01, rtol=0.01, dtype="int8", reference=expected)
    _assert_identical(actual, np.rint(expected), atol=0.0, rtol=0.0, dtype="int8")
    unwritten = np.empty((4, 5), dtype=np.int32)
    poison(unwritten)
    _assert_identical(unwritten, np.zeros((4, 5)), atol=0.0, rtol=0.0)


def test_shape_problem_and_empty_outputs() -> None:
    _assert_identical(np.zeros((2, 3)), np.zeros((3, 2)), atol=1, rtol=1)
    _assert_identical(np.zeros((0, 4), dtype=np.float16), np.zeros((0, 4)), atol=1, rtol=1)


def test_non_contiguous_actual() -> None:
    rng = np.random.default_rng(11)
    actual, expected = _damaged(rng, (9, 10), np.float32)
    _assert_identical(actual.T, expected.T, atol=1e-2, rtol=1e-2, reference=expected.T)


MEMORY_CHILD = CHILD_HELPERS + """
import gc, sys
import numpy as np
from hipdnn_trace.validate.compare import compare_tensor

n, kind = int(sys.argv[1]), sys.argv[2]
failing = 1
if kind.startswith("half"):
    reference = np.random.default_rng(0).standard_normal(n)
    actual = reference.astype(np.float16)
    actual[123] = np.nan
    if kind == "half-failing":          # every element ranked: the rounding error exceeds atol=rtol=0
        reference += 1e-9
        failing, kind = n, "half"
else:                                            # an integer output's allowed range: more temporaries
    reference = np.random.default_rng(0).uniform(-100, 100, n)
    actual = np.clip(np.rint(reference), -128, 127).astype(np.int8)
    actual[123] = 127
gc.collect()
base = status("VmRSS")
reset_peak()
tol = 0.0 if failing > 1 else 1e-3
result = compare_tensor(actual, reference, atol=tol, rtol=tol, reference=reference, dtype=kind)
assert result.nonfinite + result.mismatches == failing and result.total == n, result
print(base, status("VmHWM"))
"""


@pytest.mark.slow
@pytest.mark.skipif(not can_reset_peak(), reason="needs /proc/self/clear_refs to reset the peak RSS")
@pytest.mark.parametrize("n, kind", [(64 * 2**20, "half"), (16 * 2**20, "int8"), (16 * 2**20, "half-failing")])
def test_comparing_a_large_output_stays_under_twice_its_float64_size(n: int, kind: str) -> None:
    """64M fp16 elements: the float64 reference (512 MiB) and the output (128 MiB) exist before;
    the comparison itself may add the temporaries of the chunks in flight, one per thread (measured
    with 2 threads: 7 MiB; int8: 13 MiB; one 2^20-element chunk as before: 61 and 94 MiB), far
    under one more float64 copy (the whole-array comparison added 4.9 GiB, about 10 copies)."""
    done = subprocess.run([sys.executable, "-c", MEMORY_CHILD, str(n), kind], capture_output=True, text=True,
                          cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr
    base, peak = (int(v) for v in done.stdout.split())
    float64_size = 8 * n
    inputs = float64_size + np.dtype(np.int8 if kind == "int8" else np.float16).itemsize * n
    added = peak - base
    assert added <= CHUNK_BYTES_PER_ELEMENT * CHUNK_ELEMENTS, f"comparison added {added / 2**20:.0f} MiB"
    assert peak < 2 * float64_size + inputs


def test_scaled_atol_by_chunks_equals_the_whole_array_rms() -> None:
    """Three chunks and a half, NaN and Inf skipped: the RMS of the whole within float64 rounding."""
    from hipdnn_trace.validate.tolerances import scaled_atol

    values = np.random.default_rng(5).standard_normal(CHUNK_ELEMENTS * 7 // 2) * 30.0
    values[::1001] = np.nan
    values[5::2003] = np.inf
    finite = values[np.isfinite(values)]
    whole = 1e-5 * max(1.0, float(np.sqrt(np.mean(np.square(finite)))))
    assert scaled_atol(1e-5, values) == pytest.approx(whole, rel=1e-14)
    assert scaled_atol(1e-5, values.astype(np.float16)) == pytest.approx(
        1e-5 * float(np.sqrt(np.mean(np.square(values.astype(np.float16).astype(np.float64)[np.isfinite(values)])))),
        rel=1e-14)


def test_scaled_atol_of_a_torch_tensor_equals_the_host_path() -> None:
    """A device tensor's sums (torch on the CPU here) are queued chunk by chunk and read back once: the same
    chunks, counts and RMS as the numpy path, NaN and Inf skipped, a partial last chunk included."""
    torch = pytest.importorskip("torch")
    from hipdnn_trace.validate.tolerances import _finite_square_sums, _finite_square_sums_torch, scaled_atol

    values = np.random.default_rng(6).standard_normal(5 * 1000 + 17) * 40.0
    values[::97] = np.nan
    values[3::211] = -np.inf
    sums, count = _finite_square_sums_torch(torch.from_numpy(values.astype(np.float32)), 1000)
    host = values.astype(np.float32).astype(np.float64)
    expected = [float(np.sum(np.square(part[np.isfinite(part)])))
                for part in np.split(host, range(1000, host.size, 1000))]
    assert count == int(np.isfinite(host).sum())
    assert sums == pytest.approx(expected, rel=1e-12)
    for per_batch in (2, 5, 64):   # batches of chunks, as a GPU sums them: the same chunks and sums
        batched, batched_count = _finite_square_sums_torch(torch.from_numpy(values.astype(np.float32)), 1000,
                                                           per_batch)
        assert batched == pytest.approx(expected, rel=1e-12) and batched_count == count
    assert _finite_square_sums_torch(torch.zeros(0), 1000) == ([], 0)
    assert scaled_atol(1e-5, torch.from_numpy(values)) == pytest.approx(scaled_atol(1e-5, values), rel=1e-14)
    assert _finite_square_sums(torch.from_numpy(values))[1] == int(np.isfinite(values).sum())

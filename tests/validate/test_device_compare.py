"""The device comparison (validate/device_compare.py) equals the host one, field for field.

torch on the CPU stands in for a GPU (same code: only the device differs), array-api-strict for
any Array API namespace (CI has no torch). The oracle is compare_tensor before the device path
(``chunked_compare_oracle.compare_chunked``); cases come from hypothesis (``compare_cases.py``)
and from outputs of bundled graphs run on the float64 reference backend, some damaged.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from chunked_compare_oracle import compare_chunked
from compare_cases import ALL_TYPES, BOOLEAN, FLOATS, INTEGERS, Case, cases, same
from hypothesis import HealthCheck, given, settings, strategies as st
from peak_rss import CHILD_HELPERS, can_reset_peak, fixed_mmap_env

from hipdnn_trace.validate.compare import compare_tensor
from hipdnn_trace.validate.device_compare import (
    DEVICE_BYTES_PER_ELEMENT,
    DEVICE_CHUNK_CAP,
    DEVICE_CHUNK_FLOOR,
    HOST_MEMORY_CHUNK_ELEMENTS,
    budget_chunk_elements,
)
from hipdnn_trace.validate.poison import poison

REPO = Path(__file__).resolve().parents[2]
#: numpy types torch has (fp4 stored a byte per element has no torch type)
TORCH_TYPES = {d: n for d, n in ALL_TYPES.items() if d != np.dtype(ml_dtypes.float4_e2m1fn)}
#: the Array API's own types: array-api-strict has no half, bfloat16 or fp8
STRICT_TYPES = {d: n for d, n in {**FLOATS, **INTEGERS, **BOOLEAN}.items()
                if d in (np.dtype(np.float32), np.dtype(np.float64)) or d.kind in "iub"}
CHUNKS = st.sampled_from([None, 1, 2, 3, 7, 16])


def _torch(values: np.ndarray) -> Any:
    """A torch CPU tensor with ``values``' exact bits (ml_dtypes arrays go through their bits)."""
    import torch

    values = np.array(values, order="C")          # (ascontiguousarray would make a 0-d array 1-d)
    special = {np.dtype(ml_dtypes.bfloat16): torch.bfloat16, np.dtype(ml_dtypes.float8_e4m3fn): torch.float8_e4m3fn,
               np.dtype(ml_dtypes.float8_e5m2): torch.float8_e5m2,
               np.dtype(ml_dtypes.float8_e4m3fnuz): torch.float8_e4m3fnuz}
    if values.dtype in special:
        bits = np.uint8 if values.dtype.itemsize == 1 else np.int16
        return torch.from_numpy(values.view(bits).copy()).view(special[values.dtype])
    return torch.from_numpy(values.copy())


def _strict(values: np.ndarray) -> Any:
    import array_api_strict

    return array_api_strict.asarray(np.array(values, order="C"))


def _on_device(case: Case, move: Any, keep_numpy: frozenset[str] = frozenset()) -> tuple[Any, Any, dict[str, Any]]:
    """The case with ``actual`` (and ``expected``, ``ignore``, ``reference`` unless kept numpy) moved."""
    kwargs = dict(case.kwargs)
    for name in ("ignore", "reference"):
        if name in kwargs and name not in keep_numpy:
            kwargs[name] = move(kwargs[name])
    expected = case.expected if "expected" in keep_numpy else move(case.expected)
    return move(case.actual), expected, kwargs


def _assert_as_on_host(case: Case, move: Any, chunk: int | None, keep_numpy: frozenset[str] = frozenset()) -> None:
    want = compare_chunked(case.actual, case.expected, **case.kwargs)
    actual, expected, kwargs = _on_device(case, move, keep_numpy)
    got = compare_tensor(actual, expected, chunk_elements=chunk, **kwargs)
    assert same(got, want), f"chunk {chunk}, numpy {sorted(keep_numpy)}: {got} != {want}"
    assert got.message() == want.message()


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(TORCH_TYPES), chunk=CHUNKS,
       keep_numpy=st.sets(st.sampled_from(["expected", "ignore", "reference"])).map(frozenset))
def test_torch_equals_the_host(case: Case, chunk: int | None, keep_numpy: frozenset[str]) -> None:
    pytest.importorskip("torch")
    _assert_as_on_host(case, _torch, chunk, keep_numpy)


@settings(max_examples=250, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(STRICT_TYPES), chunk=CHUNKS)
def test_array_api_strict_equals_the_host(case: Case, chunk: int | None) -> None:
    pytest.importorskip("array_api_strict")
    _assert_as_on_host(case, _strict, chunk)


@pytest.mark.parametrize("namespace", ["torch", "array_api_strict"])
def test_finite_count_allowed_error_and_their_words_on_a_device(namespace: str) -> None:
    """The report's finite count, NaN maxima and allowed errors come from the device judge as from the host:
    an all-NaN output has no maxima; ignored elements (zeros on both sides) are not counted finite; the worst
    list is ordered by abs_err / allowed; an integer output allows no error."""
    pytest.importorskip(namespace)
    move = _torch if namespace == "torch" else _strict
    expected = np.arange(6, dtype=np.float64)

    def both(actual: np.ndarray, wanted: np.ndarray, **kw: Any) -> Any:
        host = compare_tensor(actual, wanted, **kw)
        on_device = compare_tensor(move(actual), move(wanted), chunk_elements=4,
                                   **{k: move(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()})
        assert same(on_device, host) and on_device.message() == host.message()
        return on_device

    r = both(np.full(6, np.nan, dtype=np.float32), expected, atol=1e-3, rtol=1e-3)
    assert r.finite == 0 and math.isnan(r.max_abs) and math.isnan(r.max_rel)
    assert r.message() == "all 6 elements NaN/Inf (no element with finite values to measure an error on; worst at [0])"
    some = expected.astype(np.float32)
    some[[1, 4]] = np.nan, 9.0
    ignore = np.zeros(6, dtype=bool)
    ignore[[0, 5]] = True
    r = both(some, expected, atol=1e-3, rtol=1e-3, ignore=ignore)
    assert (r.total, r.finite, r.ignored) == (4, 3, 2) and r.max_abs == pytest.approx(5.0)
    assert "over the 3 finite element(s)" in r.message()
    r = both(np.array([100.5, 0.02, 5.2]), np.array([100.0, 0.01, 5.0]), atol=1e-3, rtol=1e-3)
    assert [e.index for e in r.worst] == [(2,), (1,), (0,)]
    assert [e.allowed for e in r.worst] == pytest.approx([1e-3 + 5e-3, 1e-3 + 1e-5, 1e-3 + 0.1])
    r = both(np.array([1, 7, 3], dtype=np.int8), np.array([1.0, 2.0, 3.0]), atol=0.0, rtol=0.0)
    assert [(e.index, e.allowed) for e in r.worst] == [((1,), 0.0)] and r.finite == 3


GRAPHS = ["pointwise/relu_clip_fp16", "conv/conv_fwd_nchw_fp16", "attention/sdpa_varlen_causal_fp16",
          "pool/maxpool_3d_index_fp32", "norm/rmsnorm_bf16", "matmul/matmul_batched_fp32"]


def _graph_outputs(name: str) -> list[tuple[np.ndarray, np.ndarray, np.ndarray | None, str, float, float]]:
    """(stored output, float64 exact, undefined mask, type, atol, rtol) of each output of a bundled graph
    on the reference backend, tolerances as bench/graph_run.py derives them."""
    from hipdnn_trace.backends.reference.executor import evaluate
    from hipdnn_trace.bench.attention_inputs import undefined_elements
    from hipdnn_trace.bench.inputs import make_inputs
    from hipdnn_trace.graph.load import load_file
    from hipdnn_trace.validate.tolerances import scaled_atol, tolerance_for

    graph = load_file(REPO / "graphs" / f"{name}.json")
    inputs = make_inputs(graph, 0)
    result, undefined = evaluate(graph, inputs), undefined_elements(graph, inputs)
    found = []
    for t in graph.output_tensors:
        atol, rtol = tolerance_for(graph, t.uid)
        exact = result.exact[t.uid]
        found.append((np.array(result.stored[t.uid]), exact, undefined.get(t.uid), t.data_type,
                      scaled_atol(atol, exact), rtol))
    return found


def _damaged(stored: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Some elements off by a lot, NaN, Inf and never written."""
    out = stored.copy()
    flat = out.reshape(-1)
    picks = rng.choice(flat.size, size=min(flat.size, 9), replace=False)
    for j, i in enumerate(picks):
        if j % 3 == 2:
            poison(flat[i:i + 1])
        elif flat.dtype.kind == "f" and j % 3 == 1:
            flat[i] = np.nan if j % 2 else np.inf
        else:
            flat[i] = flat[i] + 7
    return out


@pytest.mark.parametrize("name", GRAPHS)
def test_bundled_graph_outputs_judged_on_torch_as_on_the_host(name: str) -> None:
    pytest.importorskip("torch")
    rng = np.random.default_rng(len(name))
    for stored, exact, undefined, dtype, atol, rtol in _graph_outputs(name):
        for actual in (stored, _damaged(stored, rng)):
            kwargs = {"atol": atol, "rtol": rtol, "reference": exact, "dtype": dtype, "ignore": undefined}
            case = Case(actual, exact, {k: v for k, v in kwargs.items() if v is not None})
            want = compare_chunked(actual, exact, **case.kwargs)
            assert want.passed == (actual is stored), want.message()
            for chunk in (None, 1000):
                _assert_as_on_host(case, _torch, chunk)
            host = compare_tensor(actual, exact, **case.kwargs)
            assert same(host, want)


def test_budget_sizes_chunks_from_free_memory() -> None:
    assert budget_chunk_elements(80 * 2**30) == min(DEVICE_CHUNK_CAP, 40 * 2**30 // DEVICE_BYTES_PER_ELEMENT)
    assert budget_chunk_elements(2**40) == DEVICE_CHUNK_CAP
    assert budget_chunk_elements(0) == DEVICE_CHUNK_FLOOR
    assert DEVICE_CHUNK_CAP * DEVICE_BYTES_PER_ELEMENT <= 16 * 2**30


MEMORY_CHILD = CHILD_HELPERS + """
import gc, sys
import numpy as np, torch
from hipdnn_trace.validate.compare import compare_tensor

torch.set_num_threads(1)
n, kind, masked = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "masked"
rng = np.random.default_rng(0)
source = rng.standard_normal(n) if kind == "half" else rng.uniform(-100, 100, n)
reference = torch.from_numpy(source)
if kind == "half":
    actual = reference.to(torch.float16)
    actual[123] = float("nan")
else:
    actual = reference.round().clamp(-128, 127).to(torch.int8)
    actual[123] = 127
ignore = None
if masked:
    ignore = torch.zeros(n, dtype=torch.bool)
    ignore[1::3] = True
# torch's own warm-up
compare_tensor(actual[:1000], reference[:1000], atol=1e-3, rtol=1e-3, dtype=kind, chunk_elements=100)
gc.collect()
base = status("VmRSS")
reset_peak()
result = compare_tensor(actual, reference, atol=1e-3, rtol=1e-3, reference=reference, dtype=kind, ignore=ignore)
assert result.nonfinite + result.mismatches == 1, result
print(base, status("VmHWM"))
"""


@pytest.mark.slow
@pytest.mark.skipif(not can_reset_peak(), reason="needs /proc/self/clear_refs to reset the peak RSS")
@pytest.mark.parametrize("kind", ["half", "int8"])
@pytest.mark.parametrize("masked", ["masked", "whole"])
def test_device_temporaries_stay_within_the_budget_per_element(kind: str, masked: str) -> None:
    """8 chunks of torch CPU tensors: what the comparison adds to the peak RSS is one chunk's
    temporaries, at most DEVICE_BYTES_PER_ELEMENT each (measured 62-70 for half, 70-76 for int8, with glibc's
    mmap threshold fixed so the peak is the live temporaries, not what the heap happened to keep: with its
    default, 68-149 and a flaky test)."""
    pytest.importorskip("torch")
    n = 8 * HOST_MEMORY_CHUNK_ELEMENTS
    done = subprocess.run([sys.executable, "-c", MEMORY_CHILD, str(n), kind, masked], capture_output=True,
                          text=True, cwd=REPO, timeout=600, env=fixed_mmap_env())
    assert done.returncode == 0, done.stderr
    base, peak = (int(v) for v in done.stdout.split())
    assert peak - base <= DEVICE_BYTES_PER_ELEMENT * HOST_MEMORY_CHUNK_ELEMENTS, \
        f"added {(peak - base) / HOST_MEMORY_CHUNK_ELEMENTS:.0f} bytes per chunk element"
    assert math.isfinite(peak)

"""GPU proof for the NVIDIA backends (issue 4): sample graphs validate on cudnn and torch,
``--engine all`` gives one row per plan, cold cache really flushes, staged timing and
CUDA-graph replay work. Skipped without an NVIDIA GPU (tests/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from hipdnn_trace import backends
from hipdnn_trace.backends.base import RunOptions
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings, run_graph
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.bench.loop import LoopSettings, run_loop
from hipdnn_trace.cli import main as cli
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.sources import expand
from hipdnn_trace.markers import Markers

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]

REPO = Path(__file__).resolve().parents[2]
GRAPHS = REPO / "graphs"


def _sample_sources() -> list:
    if not GRAPHS.is_dir():
        pytest.skip("graphs/ not present")
    return expand([str(GRAPHS)], skip_dirs=("perf",))


def _load(relative: str):
    path = GRAPHS / relative
    if not path.exists():
        pytest.skip(f"{relative} not present")
    return load_bytes(path.read_bytes(), str(path))


def _fp32_accumulation_only(run) -> bool:
    """A fp32 mismatch that is summation order, not wrong math: at most 0.1% of the elements,
    off by at most 1e-4 absolute (TF32 or a bug is off by ~1e-2 nearly everywhere).

    hipDNN's fp32 tolerances (8.5e-6 for dgrad, 1e-5 for matmul) sit at the level of fp32
    rounding for sums over hundreds of O(1) terms with cancellation; seen on an H200 for
    conv_dgrad_nchw_fp32 (one element of 2304, 1.4e-5 off) with cuDNN and torch alike.
    """
    failed = [v for v in run.validation if not v.passed]
    return bool(failed) and all(v.dtype == "float" and v.mismatches <= max(1, v.total // 1000)
                                and v.max_abs <= 1e-4 and v.nonfinite == 0 for v in failed)


@pytest.mark.parametrize("backend", ["cudnn", "torch"])
def test_every_sample_graph_validates_against_the_reference(backend: str) -> None:
    settings = RunSettings(loop=LoopSettings(warmup=1, iters=3))
    rows, rounding = [], []
    for source in _sample_sources():
        run = run_graph(source, [Config(backend, backend)], settings, Markers())
        c = run.configs[0]
        rows.append((run.name, c.status, c.validation, c.error or ""))
        if c.status == "failed" and _fp32_accumulation_only(run):
            rounding.append(rows.pop())
    if rounding:
        print(f"\n{backend}: fp32 summation-order mismatches (see _fp32_accumulation_only): {rounding}")
    bad = [r for r in rows if r[1] not in ("ok", "unsupported") or (r[1] == "ok" and r[2] != "passed")]
    unsupported = [r for r in rows if r[1] == "unsupported"]
    table = "\n".join(f"{n:<45} {s:<12} {v:<8} {e[:120]}" for n, s, v, e in rows)
    print(f"\n{backend}: {len(rows)} graphs, {len(unsupported)} unsupported\n{table}")
    assert not bad, f"{len(bad)} graph(s) failed on {backend}:\n" + "\n".join(map(str, bad))
    if backend == "torch":
        assert not unsupported, unsupported
    for name, _, _, reason in unsupported:
        assert reason, f"{name}: unsupported without a reason"


def test_engine_all_gives_one_row_per_plan(tmp_path: Path) -> None:
    graph_file = GRAPHS / "conv" / "conv_fwd_nhwc_stride2_fp16.json"
    graph = _load("conv/conv_fwd_nhwc_stride2_fp16.json")
    engines = backends.get("cudnn").engines(graph, RunOptions())
    assert len(engines) >= 2, "expected several cuDNN plans for a conv"
    assert len({e.name for e in engines}) == len(engines)
    rc = cli(["run", str(graph_file), "--backend", "cudnn", "--engine", "all", "-w", "1", "-i", "3",
              "--out", str(tmp_path), "--run-id", "all", "--no-trace", "--quiet"])
    summary = pl.read_csv(tmp_path / "all" / "summary.csv")
    assert summary.height == len(engines)
    assert sorted(summary["engine"].to_list()) == sorted(e.label() for e in engines)
    assert rc == 0 and set(summary["validation"].to_list()) == {"passed"}


def _cache_resident_graph():
    """A relu over 4 Mi halfs: 8 MiB in + 8 MiB out, well inside the H100's 50 MB L2."""
    b = GraphBuilder("l2_resident_relu", io="half", compute="float", intermediate="float")
    x = b.tensor("x", [4, 1024, 1024])
    b.pointwise("relu_fwd", x, out="y")
    return b.build()


@pytest.mark.parametrize("backend", ["cudnn", "torch"])
def test_cold_cache_really_flushes(backend: str) -> None:
    graph = _cache_resident_graph()
    inputs = make_inputs(graph, 0)
    medians = {}
    for cache in ("warm", "cold"):
        session = backends.get(backend).prepare(graph, None, RunOptions(cache=cache, timing="staged"))
        try:
            session.bind(inputs)
            samples, _ = run_loop(session, LoopSettings(warmup=20, iters=200), Markers())
            medians[cache] = float(np.median(samples.timed_kernel_ms()))
            if cache == "cold":
                assert session.info()["l2_flush"]["flush_bytes"] >= 2 * 40e6
        finally:
            session.close()
    print(f"\n{backend}: warm {medians['warm'] * 1e3:.2f} us, cold {medians['cold'] * 1e3:.2f} us")
    if backend == "torch":
        # torch runs a clipped relu as several elementwise kernels: only the first misses L2
        # after a flush, so the slowdown is diluted (H200: 64.7 vs 64.5 us). The flush itself
        # is asserted above; the timing proof is the single-kernel cuDNN case.
        return
    assert medians["cold"] > 1.15 * medians["warm"], medians


def test_staged_timing_is_available_on_the_h100() -> None:
    graph = _load("conv/conv_fwd_nhwc_stride2_fp16.json")
    session = backends.get("cudnn").prepare(graph, None, RunOptions(timing="staged"))
    try:
        session.bind(make_inputs(graph, 0))
        samples, _ = run_loop(session, LoopSettings(warmup=2, iters=5), Markers())
        info = session.info()
        assert info["timer"] == "cuda-event-staged", info
        assert "timing_fallback" not in info
        assert all(ms > 0 for ms in samples.timed_kernel_ms())
    finally:
        session.close()


@pytest.mark.parametrize("backend", ["cudnn", "torch"])
def test_cuda_graph_replay_validates(tmp_path: Path, backend: str) -> None:
    graph_file = GRAPHS / "fused" / "conv_bias_relu_nhwc_fp16.json"
    _load("fused/conv_bias_relu_nhwc_fp16.json")
    rc = cli(["run", str(graph_file), "--backend", backend, "--cuda-graph", "-w", "2", "-i", "5",
              "--out", str(tmp_path), "--run-id", "g", "--no-trace", "--quiet"])
    summary = pl.read_csv(tmp_path / "g" / "summary.csv")
    meta = json.loads((tmp_path / "g" / "run.json").read_text())
    assert rc == 0 and summary["validation"].to_list() == ["passed"]
    assert meta["sessions"][backend]["method"]["cuda_graph"] is True


def test_run_json_records_the_method(tmp_path: Path) -> None:
    graph_file = GRAPHS / "matmul" / "matmul_2d_fp16.json"
    _load("matmul/matmul_2d_fp16.json")
    cli(["run", str(graph_file), "--backend", "cudnn", "--cache", "cold", "--timing", "staged", "-w", "1",
         "-i", "5", "--out", str(tmp_path), "--run-id", "m", "--quiet"])
    meta = json.loads((tmp_path / "m" / "run.json").read_text())
    method = meta["sessions"]["cudnn"]["method"]
    assert method["timer"] == "cuda-event-staged" and method["cache"] == "cold"
    assert method["l2_flush"]["flush_bytes"] > method["l2_flush"]["l2_bytes"]
    assert meta["gpu"]["name"].startswith("NVIDIA")
    assert meta["timing"]["clocks"]["source"] == "nvml"
    iterations = pl.read_parquet(tmp_path / "m" / "iterations.parquet")
    assert iterations["sm_clock_mhz"].drop_nulls().len() == iterations.height
    assert iterations["clock_flag"].drop_nulls().len() == iterations.height


def _zero_scale_gqa_graph(dtype: str = "half"):
    """The shape of dnn-benchmarking's aotriton graph gqa_fp16_b4_qh16_kvh8_sq2048_skv579_d203_causal_off
    (attn_scale_value 0.0): torch's flash SDPA kernel returns NaN for a zero scale when the key length is
    not a multiple of its key block (docs/reliability.md "Whose fault is a FAILED row")."""
    b = GraphBuilder("aotriton_gqa_d203_scale0", io=dtype)
    q = b.tensor("query", [4, 16, 2048, 203])
    k = b.tensor("key", [4, 8, 579, 203])
    v = b.tensor("value", [4, 8, 579, 203])
    b.sdpa(q, k, v, scale=0.0)
    return b.build()


def test_torch_zero_scale_nan_is_rechecked_on_the_math_kernel_and_blamed_on_torch() -> None:
    graph = _zero_scale_gqa_graph()
    sources = [_source_of(graph)]
    default = _run_torch(sources, "default")
    assert default["status"] == "failed", default
    assert "NaN/Inf" in default["error"]
    assert "torch's math SDPA kernel passes on the same inputs" in default["error"]
    assert "the fault is this torch kernel's, not the harness's" in default["error"]
    math = _run_torch(sources, "math")
    assert math["status"] == "ok", math


def _source_of(graph):
    import tempfile

    from hipdnn_trace.graph.write import graph_to_json

    folder = Path(tempfile.mkdtemp())
    path = folder / f"{graph.name}.json"
    path.write_text(json.dumps(graph_to_json(graph)))
    return str(path)


def _run_torch(sources: list[str], sdpa: str) -> dict:
    import tempfile

    import hipdnn_trace

    run = hipdnn_trace.run(sources, out=Path(tempfile.mkdtemp()), backend="torch", iters=2, warmup=1,
                           isolate=False, torch_sdpa_backend=sdpa)
    return run.summary.to_dicts()[0]

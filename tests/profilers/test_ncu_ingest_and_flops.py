"""`hipdnn-trace ingest` on ncu raw CSV, and counter FLOPs against analytical FLOPs on real
H200 counters (tests/data/ncu/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.ops import graph_flops
from hipdnn_trace.profilers import counters as derived
from hipdnn_trace.profilers.ingest import ingest
from hipdnn_trace.profilers.rocprof.detect import detect

REPO = Path(__file__).resolve().parents[2]
ROOFLINE = REPO / "tests" / "data" / "ncu" / "perf_cudnn_roofline_raw_base_units.csv"
GRAPHS = {"15e43276107871de": "perf/conv/resnet50_res4_3x3_256_fwd_fp16.json",
          "16cbe2bf9aefeba9": "perf/matmul/gemm_4096x4096x4096_fp16.json",
          "431a59c626a05cba": "perf/norm/llm_layernorm_8x2048x4096_fp16.json"}


def test_ncu_csv_is_detected_from_its_header() -> None:
    found = detect(ROOFLINE)
    assert (found.kind, found.format) == ("ncu_raw", "ncu")


def test_ingest_gives_kernels_counters_agent_and_verdicts() -> None:
    result = ingest([ROOFLINE])
    assert result.kernels.height == 9 and set(result.kernels["iteration"].to_list()) == {0, 1, 2}
    assert result.agents.row(0, named=True)["arch"] == "sm_90"
    verdicts = dict(zip(result.graphs["graph_id"].to_list(), result.graphs["verdict"].to_list()))
    # the dominant limiter (docs/nvidia.md "Why"); the basic set has no pipe metrics, so "compute sm";
    # the conv's 98 blocks leave 34 of 132 SMs idle
    assert verdicts == {"15e43276107871de": "parallelism", "16cbe2bf9aefeba9": "compute sm",
                        "431a59c626a05cba": "memory dram"}
    assert set(result.graphs["gpu"].to_list()) == {"H200-SXM"}


def test_tensor_core_flops_from_counters_match_the_analytical_flops() -> None:
    result = ingest([ROOFLINE])
    analytical = {}
    for graph_id, relative in GRAPHS.items():
        path = REPO / "graphs" / relative
        if not path.exists():
            pytest.skip(f"{relative} not present")
        graph = load_bytes(path.read_bytes(), str(path))
        assert graph.graph_id == graph_id
        analytical[graph_id] = graph_flops(graph)
    table = derived.compare_flops(result.graphs, analytical)
    ratio = dict(zip(table["graph_id"].to_list(), table["flops_ratio"].to_list()))
    assert ratio["15e43276107871de"] == pytest.approx(1.0, abs=0.005)    # implicit-GEMM conv, fp16 tensor cores
    assert ratio["16cbe2bf9aefeba9"] == pytest.approx(1.0, abs=1e-6)     # 4096^3 GEMM: 2*M*N*K exactly
    assert ratio["431a59c626a05cba"] > 1.0    # layernorm: FMA-pipe FLOPs exceed the 8/element estimate
    conv = result.kernel_metrics.filter(pl.col("graph_id") == "15e43276107871de")
    assert (conv["peak_class"] == "fp16_matrix").all()

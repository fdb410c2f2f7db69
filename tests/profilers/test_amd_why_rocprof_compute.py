"""AMD why columns against rocprof-compute's own System Speed-of-Light on the same real workloads.

The expected numbers are what rocprof-compute printed (table 2.1, "Avg" and "Pct of Peak"), run on
the CPU at ROCm/rocm-systems commit 1b1610fc2b2ab32af71e6e04e4d4a6a4ae597992 with its
requirements.txt in a venv (pandas pinned below 3: with pandas 3's copy-on-write its metric
evaluation writes into row copies and every cell stays an unevaluated string):

    python src/rocprof-compute analyze -p <copy of the workload folder> -b 2

(docs/amd-profiling.md "Why on AMD"). rocprof-compute's AVG(...) is the mean over dispatches of
each dispatch's value, so ours is the mean of the per-dispatch column. Tolerances: half a unit of
the printed last digit; GB/s also 2e-5 relative (the timestamps' float rounding differs).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from hipdnn_trace.profilers.ingest import ingest
from hipdnn_trace.profilers.rocprof.legacy import waves_accumulator
from hipdnn_trace.profilers.rocprof.why_amd import occupancy_limiter
from tests.support.amd_fixtures import upstream_file
from tests.support.repo_paths import SHARED_FIXTURES

ROCPROF = SHARED_FIXTURES / "rocprof"

#: bmm1 (MI300X, rocprof-compute 3.3 workload, 20 dispatches): our column -> rocprof-compute's value.
BMM1 = {
    "sol_salu_util": 3.46, "sol_valu_util": 4.71, "sol_mfma_util": 1.95, "sol_vmem_util": 1.57,
    "sol_branch_util": 1.04, "sol_ipc": 0.32, "sol_ipc_pct": 6.40, "sol_lds_gbps": 3905.50, "sol_lds_pct": 4.78,
    "sol_vl1d_hit_rate": 35.95, "sol_vl1d_gbps": 23489.72, "sol_vl1d_pct": 28.75, "sol_l2_gbps": 7171.08,
    "sol_l2_pct": 20.84, "sol_fabric_read_gbps": 766.92, "sol_fabric_read_pct": 14.40,
    "sol_fabric_write_gbps": 1737.15, "sol_fabric_write_pct": 32.62,
}
#: vcopy MI350 (gfx950): sysinfo's max_sclk is 0, so rocprof-compute's peaks are 0 and its % of
#: peak inf or blank; ours are null. The values that need no clock agree.
MI350 = {
    "sol_salu_util": 10.54, "sol_valu_util": 9.03, "sol_mfma_util": 0.00, "sol_vmem_util": 3.01,
    "sol_branch_util": 3.01, "sol_ipc": 0.40, "sol_ipc_pct": 8.03, "sol_lds_gbps": 0.00,
    "sol_vl1d_hit_rate": 62.50, "sol_vl1d_gbps": 3676.49, "sol_l2_gbps": 1388.35,
    "sol_fabric_read_gbps": 230.07, "sol_fabric_write_gbps": 459.56,
}


def _workload(name: str) -> Path:
    return upstream_file(ROCPROF / name, "sysinfo.csv").parent


def _agree(metrics: pl.DataFrame, expected: dict[str, float]) -> None:
    for col, want in expected.items():
        got = metrics[col].mean()
        tol = 0.005 + (2e-5 * abs(want) if col.endswith("_gbps") else 0.0)
        assert got == pytest.approx(want, abs=tol), f"{col}: ours {got}, rocprof-compute {want}"


def test_bmm1_mi300x_equals_rocprof_compute_speed_of_light():
    metrics = ingest([_workload("rocprof-compute3.3_bmm1_MI300X")]).kernel_metrics
    assert metrics.height == 20
    _agree(metrics, BMM1)
    # the contract's columns are those rows, named as on NVIDIA
    assert metrics["l1_throughput_pct"].mean() == pytest.approx(28.75, abs=0.005)
    assert metrics["l2_throughput_pct"].mean() == pytest.approx(20.84, abs=0.005)
    assert metrics["lds_throughput_pct"].mean() == pytest.approx(4.78, abs=0.005)
    assert metrics["tensor_pipe_pct"].mean() == pytest.approx(1.95, abs=0.005)
    assert metrics["issue_active_pct"].mean() == pytest.approx(6.40, abs=0.005)
    assert metrics["dram_throughput_pct"].mean() == pytest.approx(14.40 + 32.62, abs=0.01)
    gemm = metrics.filter(pl.col("kernel").str.contains("batched_matrix_multiplication"))
    assert gemm.height == 9   # the 9 GEMM dispatches rocprof-compute's Top Kernels counts
    assert set(gemm["grid_size"]) == {2048} and set(gemm["block_size"]) == {256} and set(gemm["sm_count"]) == {304}
    assert (gemm["sm_throughput_pct"] >= gemm["sol_valu_util"]).all()
    assert (gemm["memory_throughput_pct"] >= gemm["l2_throughput_pct"]).all()


def test_mi350_equals_rocprof_compute_where_it_has_a_clock():
    folder = _workload("rocprof-compute_vcopy_MI350")
    metrics = ingest([folder / "pmc_perf.csv", folder / "sysinfo.csv"]).kernel_metrics
    assert metrics.height == 3
    _agree(metrics, MI350)
    for col in ("sol_vl1d_pct", "sol_l2_pct", "sol_lds_pct", "l1_throughput_pct"):
        # rocprof-compute: inf / blank; ours: not computable (no clock), so absent or null
        assert col not in metrics.columns or metrics[col].null_count() == metrics.height, col
    assert set(metrics["grid_size"]) == {4096} and set(metrics["block_size"]) == {256}


def test_truncated_rocpd_workload_is_blank_where_rocprof_compute_is_blank():
    # The fixture keeps 400 of 6027 long rows: rocprof-compute's 2.1 rows are all blank except
    # MFMA F8/F32/I8 FLOPs (0.00); none of our why rows can be computed either.
    metrics = ingest([_workload("rocprof-compute_vcopy_MI300X_A1_rocpd")]).kernel_metrics
    assert metrics.height == 3
    for col in BMM1:
        assert col not in metrics.columns or metrics[col].null_count() == metrics.height, col


def test_wave_accumulator_is_kept_only_in_the_pass_of_sq_level_waves():
    header = ["Dispatch_ID", "Kernel_ID", "SQ_IFETCH_LEVEL", "SQ_ACCUM_PREV_HIRES", "Kernel_ID_1",
              "SQ_LEVEL_WAVES", "SQ_ACCUM_PREV_HIRES_1", "Kernel_ID_2", "SQ_INST_LEVEL_LDS", "SQ_ACCUM_PREV_HIRES_2"]
    kept, rename = waves_accumulator(header, list(range(1, len(header))))
    assert [header[c] for c in kept if "ACCUM" in header[c]] == ["SQ_ACCUM_PREV_HIRES_1"]
    assert rename == {6: "SQ_ACCUM_PREV_HIRES"}
    alone, none = waves_accumulator(["SQ_IFETCH_LEVEL", "SQ_ACCUM_PREV_HIRES"], [0, 1])
    assert alone == [0] and none == {}


def test_occupancy_limiter_names_the_resource_waves_waited_on():
    assert occupancy_limiter({"spi_vgprs_pct": 30.0, "spi_lds_pct": 5.0}) == "registers"
    assert occupancy_limiter({"spi_lds_pct": 12.0, "spi_barriers_pct": 12.0}) == "barriers,shared_memory"
    assert occupancy_limiter({"spi_waves_pct": 0.2}) is None
    assert occupancy_limiter({}) is None

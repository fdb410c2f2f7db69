"""Derived metrics, roofline point and verdicts on known numbers (counters.py is vendor-neutral)."""

from __future__ import annotations

import polars as pl
import pytest

from hipdnn_trace.errors import UserError
from hipdnn_trace.profilers.counters import Thresholds, compare_flops, derive, graph_verdicts, verdict, wide_counters
from hipdnn_trace.profilers.profiles import load_peaks, profile_for_arch
from hipdnn_trace.profilers.rocprof.frames import COUNTERS_FULL, KERNELS_FULL, columns_frame

MI300X = load_peaks()["MI300X"]
H100 = load_peaks()["H100-SXM"]


def counters(rows: list[dict]) -> pl.DataFrame:
    return columns_frame({k: [r.get(k) for r in rows] for k in COUNTERS_FULL}, COUNTERS_FULL)


def row(dispatch, kernel, counter, value, start=0, end=1_000_000, pass_no=1, **labels):
    return dict(dispatch_id=dispatch, kernel=kernel, counter=counter, value=value, device=1, start_ns=start,
                end_ns=end, capture="c", **{"pass": pass_no}, **labels)


def gfx942_wide(values: dict[str, float], duration_ns: float = 1e6) -> pl.DataFrame:
    base = {c: 0.0 for c in profile_for_arch("gfx942").counters}
    base.update(values)
    return pl.DataFrame({"kernel": ["k"], "dispatch_id": [1], "duration_ns": [duration_ns],
                         **{k: [v] for k, v in base.items()}})


def test_mfma_flops_dram_bytes_and_roofline_mi300x():
    wide = gfx942_wide({
        "SQ_INSTS_VALU_MFMA_MOPS_F16": 1e9,            # 512e9 FLOPs
        "SQ_INSTS_VALU_FMA_F32": 1e6,                  # 64 * 2 * 1e6 = 128e6 FLOPs
        "TCC_EA0_RDREQ_sum": 2e6, "TCC_BUBBLE_sum": 5e5, "TCC_EA0_RDREQ_32B_sum": 1e5,
        "TCC_EA0_WRREQ_sum": 3e5, "TCC_EA0_WRREQ_64B_sum": 1e5,
        "GRBM_GUI_ACTIVE": 8 * 2.1e6, "GRBM_COUNT": 8 * 2.1e6, "SQ_ACTIVE_INST_VALU": 304 * 2.1e6 / 2,
        "SQ_VALU_MFMA_BUSY_CYCLES": 304 * 4 * 2.1e6 / 4, "TCC_HIT_sum": 3, "TCC_MISS_sum": 1,
    })
    d = derive(wide, profile_for_arch("gfx942"), MI300X, {"num_xcd": 8}).row(0, named=True)
    assert d["flops_fp16_matrix"] == 512e9 and d["flops_valu"] == 128e6
    assert d["flops"] == pytest.approx(512e9 + 128e6)
    # rocprof-compute MI300 HBM bytes: 128*bubble + 32*rd32 + 64*(rd - bubble - rd32) + 32*(wr - wr64) + 64*wr64
    dram = 128 * 5e5 + 32 * 1e5 + 64 * (2e6 - 5e5 - 1e5) + 32 * (3e5 - 1e5) + 64 * 1e5
    assert d["dram_bytes"] == pytest.approx(dram)
    assert d["tflops"] == pytest.approx((512e9 + 128e6) / 1e6 / 1e3)
    assert d["dram_gbps"] == pytest.approx(dram / 1e6)
    assert d["arithmetic_intensity"] == pytest.approx((512e9 + 128e6) / dram)
    assert d["pct_peak_compute"] == pytest.approx(100 * (512e9 / 1e6 / 1e3 / 1307.4 + 128e6 / 1e6 / 1e3 / 81.7))
    assert d["pct_peak_dram"] == pytest.approx(100 * dram / 1e6 / 5300)
    assert d["peak_class"] == "fp16_matrix" and d["peak_tflops"] == 1307.4
    assert d["ridge_intensity"] == pytest.approx(1307.4e3 / 5300)
    assert d["roofline_tflops"] == pytest.approx(min(1307.4, d["arithmetic_intensity"] * 5300 / 1e3))
    assert d["gpu_busy"] == 100.0
    assert d["valu_util"] == pytest.approx(50.0)      # per-XCD: GRBM_GUI_ACTIVE / 8
    assert d["mfma_util"] == pytest.approx(25.0)
    assert d["l2_hit_rate"] == pytest.approx(75.0)
    assert d["verdict"] == "compute-bound"
    assert "39.3% of 1307.4 TFLOPS fp16_matrix" in d["verdict_reason"] and "ridge 247" in d["verdict_reason"]


def test_without_the_xcd_division_utilisation_would_be_8x_low():
    wide = gfx942_wide({"GRBM_GUI_ACTIVE": 8 * 1000, "SQ_ACTIVE_INST_VALU": 304 * 1000})
    assert derive(wide, profile_for_arch("gfx942"), MI300X, {"num_xcd": 8})["valu_util"][0] == pytest.approx(100.0)
    assert derive(wide, profile_for_arch("gfx942"), MI300X, {"num_xcd": 1})["valu_util"][0] == pytest.approx(12.5)


def test_mi200_hbm_formula():
    p = profile_for_arch("gfx90a")
    base = {c: 0.0 for c in p.counters}
    base.update({"TCC_EA_RDREQ_sum": 1000, "TCC_EA_RDREQ_32B_sum": 100,
                 "TCC_EA_WRREQ_sum": 500, "TCC_EA_WRREQ_64B_sum": 200})
    wide = pl.DataFrame({"duration_ns": [1000.0], **{k: [v] for k, v in base.items()}})
    d = derive(wide, p, load_peaks()["MI250X"], {"num_xcd": 1}).row(0, named=True)
    assert d["dram_bytes"] == 32 * 100 + 64 * 900 + 64 * 200 + 32 * 300


def test_nvidia_profile_uses_ncu_duration_and_tensor_ops():
    p = profile_for_arch("sm_90")
    cols = {c: [0.0] for c in p.counters}
    cols.update({"gpu__time_duration.sum": [2e6], "sm__ops_path_tensor_src_fp16.sum": [1e15],
                 "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": [1e9], "dram__bytes.sum": [1e9]})
    d = derive(pl.DataFrame(cols), p, H100).row(0, named=True)
    assert d["duration_ns"] == 2e6
    assert d["flops_fp16_matrix"] == 1e15 and d["flops_fp32_vector"] == 2e9
    assert d["tflops"] == pytest.approx((1e15 + 2e9) / 2e6 / 1e3)
    assert d["dram_gbps"] == pytest.approx(500.0)
    assert d["verdict"] == "compute-bound" and d["peak_class"] == "fp16_matrix"


@pytest.mark.parametrize("compute, dram, expected", [
    (80.0, 10.0, "compute-bound"), (10.0, 80.0, "memory-bound"), (29.0, 12.0, "latency-bound"),
    (30.0, 30.0, "compute-bound"), (None, 50.0, None),
])
def test_verdict_rule(compute, dram, expected):
    got, reason = verdict(compute, dram, thresholds=Thresholds(busy_pct=30.0))
    assert got == expected and reason


def test_missing_counters_skip_formulas_not_fail():
    wide = pl.DataFrame({"kernel": ["k"], "duration_ns": [100.0], "GRBM_GUI_ACTIVE": [10.0], "GRBM_COUNT": [20.0]})
    d = derive(wide, profile_for_arch("gfx942"), MI300X, {"num_xcd": 8})
    assert d["gpu_busy"][0] == 50.0
    assert "flops" not in d.columns and d["verdict"][0] is None and "no verdict" in d["verdict_reason"][0]


def test_wide_merges_passes_and_averages_repeated_counters():
    long = counters([
        row(1, "gemm", "SQ_WAVES", 10.0, 0, 100, 1), row(1, "gemm", "GRBM_GUI_ACTIVE", 50.0, 0, 100, 1),
        row(1, "gemm", "TCC_HIT_sum", 7.0, 1000, 1120, 2), row(1, "gemm", "GRBM_GUI_ACTIVE", 70.0, 1000, 1120, 2),
        row(2, "copy", "SQ_WAVES", 4.0, 200, 240, 1),
    ])
    w = wide_counters(long)
    columns = ("dispatch_id", "kernel", "passes", "duration_ns", "SQ_WAVES", "TCC_HIT_sum", "GRBM_GUI_ACTIVE")
    assert w.select(*columns).rows() == [
        (1, "gemm", 2, 110.0, 10.0, 7.0, 60.0), (2, "copy", 1, 40.0, 4.0, None, None)]


def test_wide_durations_from_kernels_when_counters_have_no_times():
    long = counters([row(5, "k", "SQ_WAVES", 1.0, None, None, None)])
    kernels = columns_frame({"name": ["k"], "dispatch_id": [5], "device": [1], "duration_ns": [777], "capture": ["c"]},
                            KERNELS_FULL)
    assert wide_counters(long, kernels)["duration_ns"].to_list() == [777.0]


def test_a_dispatch_that_is_two_kernels_across_passes_is_an_error():
    long = counters([row(1, "gemm", "SQ_WAVES", 1.0, pass_no=1), row(1, "copy", "TCC_HIT_sum", 1.0, pass_no=2)])
    with pytest.raises(UserError, match="did not replay the same work"):
        wide_counters(long)


def test_graph_verdict_sums_kernels_per_iteration_and_compares_flops():
    p = profile_for_arch("gfx942")
    rows = []
    for it in (0, 1):
        base = {c: 0.0 for c in p.counters}
        rows.append({"graph_id": "g", "config": "c", "phase": "timed", "iteration": it, "kernel": "gemm",
                     "dispatch_id": 2 * it, "duration_ns": 1e6, **base,
                     "SQ_INSTS_VALU_MFMA_MOPS_F16": 2e9, "TCC_EA0_RDREQ_sum": 1e5})
        rows.append({"graph_id": "g", "config": "c", "phase": "timed", "iteration": it, "kernel": "copy",
                     "dispatch_id": 2 * it + 1, "duration_ns": 1e4, **base, "TCC_EA0_RDREQ_sum": 8e5,
                     "TCC_EA0_WRREQ_sum": 4e5, "TCC_EA0_WRREQ_64B_sum": 4e5})
    d = derive(pl.DataFrame(rows), p, MI300X, {"num_xcd": 8})
    assert d.filter(pl.col("kernel") == "copy")["verdict"].to_list() == ["memory-bound"] * 2
    g = graph_verdicts(d, MI300X, analytical={"g": 1.024e12}).row(0, named=True)
    assert g["iterations"] == 2 and g["kernels"] == 4
    assert g["flops"] == pytest.approx(1.024e12) and g["duration_ns"] == pytest.approx(1.01e6)
    assert g["flops_ratio"] == pytest.approx(1.0) and g["analytical_flops"] == 1.024e12
    assert g["verdict"] == "compute-bound"
    assert g["kernel_verdicts"].startswith("compute-bound 99%")


def test_graph_with_gpu_idle_between_kernels_is_latency_bound():
    p = profile_for_arch("gfx942")
    base = {c: 0.0 for c in p.counters}
    d = derive(pl.DataFrame([{"graph_id": "g", "config": "c", "phase": "timed", "iteration": 0, "kernel": "k",
                              "dispatch_id": 1, "duration_ns": 1e6, **base, "SQ_INSTS_VALU_MFMA_MOPS_F16": 2e9}]),
               p, MI300X, {"num_xcd": 8})
    kernels = pl.DataFrame({"graph_id": ["g", "g"], "config": ["c", "c"], "phase": ["timed"] * 2, "iteration": [0, 0],
                            "start_ns": [0, 3_000_000], "end_ns": [500_000, 3_500_000],
                            "duration_ns": [500_000, 500_000]})
    g = graph_verdicts(d, MI300X, kernels=kernels).row(0, named=True)
    assert g["gpu_idle_pct"] == pytest.approx(100 * (1 - 1e6 / 3.5e6))
    assert g["verdict"] == "latency-bound" and g["verdict_reason"].startswith("GPU idle 71.4%")


def test_compare_flops_by_graph_and_config():
    table = pl.DataFrame({"graph_id": ["a", "b"], "config": ["x", "x"], "flops": [200.0, 50.0]})
    ref = pl.DataFrame({"graph_id": ["a", "b"], "config": ["x", "x"], "flops": [100.0, 0.0]})
    out = compare_flops(table, ref)
    assert out["flops_ratio"].to_list() == [2.0, None]

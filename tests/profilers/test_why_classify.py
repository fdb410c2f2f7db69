"""classify's decision order, graph_limiters' shares and flag, the harness list, the replay note."""

from __future__ import annotations

from types import SimpleNamespace

import polars as pl
import pytest

from hipdnn_trace.profilers.graph_limiters import dominant_limiter, graph_limiters
from hipdnn_trace.profilers.harness_kernels import is_harness_kernel
from hipdnn_trace.profilers.ncu import replay_estimate
from hipdnn_trace.profilers.why import VOCABULARY, classify

BUSY_GRID = {"grid_size": 4096, "block_size": 256, "sm_count": 132, "waves_per_sm": 7.8,
             "achieved_occupancy_pct": 70.0, "theoretical_occupancy_pct": 75.0}


def row(**kw: object) -> dict[str, object]:
    base = {"sm_throughput_pct": 20.0, "memory_throughput_pct": 20.0, "dram_throughput_pct": 15.0,
            "l2_throughput_pct": 18.0, "l1_throughput_pct": 20.0, "issue_active_pct": 10.0, "top_pipe": "fma",
            "top_pipe_pct": 12.0, "top_stalls": "long_scoreboard 60%, wait 10%, barrier 5%", **BUSY_GRID}
    return {**base, **kw}


def test_memory_names_the_busiest_level() -> None:
    limiter, why = classify(row(memory_throughput_pct=85.0, dram_throughput_pct=84.0, l2_throughput_pct=40.0))
    assert limiter == "memory dram" and "85.0%" in why
    assert classify(row(memory_throughput_pct=70.0, l2_throughput_pct=70.0, dram_throughput_pct=10.0))[0] == \
        "memory l2"


def test_compute_names_the_pipe_and_issue_wins_when_busier() -> None:
    assert classify(row(sm_throughput_pct=90.0, top_pipe="tensor", top_pipe_pct=92.0))[0] == "compute tensor"
    assert classify(row(sm_throughput_pct=70.0, issue_active_pct=70.0, top_pipe_pct=40.0))[0] == "issue"


def test_near_peak_wins_over_a_small_grid() -> None:
    # a unit at its peak limits the kernel whatever the grid (SOLBottleneck is read first)
    assert classify(row(sm_throughput_pct=80.0, top_pipe="alu", top_pipe_pct=80.0, grid_size=64,
                        waves_per_sm=0.5))[0] == "compute alu"


def test_parallelism_below_one_wave_or_fewer_blocks_than_sms() -> None:
    limiter, why = classify(row(grid_size=264, waves_per_sm=0.5))
    assert limiter == "parallelism" and "0.50 waves" in why and "estimate" not in why
    limiter, why = classify(row(grid_size=66, waves_per_sm=0.03))
    assert limiter == "parallelism" and "estimate: up to 50% less time" in why


def test_latency_names_the_top_stall() -> None:
    limiter, why = classify(row())
    assert limiter == "latency long_scoreboard" and "long_scoreboard 60%" in why


def test_missing_columns_give_no_limiter() -> None:
    assert classify({"grid_size": 1})[0] is None


def test_every_limiter_starts_with_a_vocabulary_word() -> None:
    cases = [row(), row(grid_size=10, waves_per_sm=0.1), row(sm_throughput_pct=90.0, top_pipe_pct=90.0),
             row(sm_throughput_pct=90.0, issue_active_pct=95.0), row(memory_throughput_pct=90.0)]
    assert {classify(c)[0].split()[0] for c in cases} == set(VOCABULARY)


def test_graph_limiters_shares_dominant_kernel_and_flops_flag() -> None:
    km = pl.DataFrame({"graph_id": ["g"] * 6, "config": ["c"] * 6, "iteration": [0, 0, 0, 1, 1, 1],
                       "kernel": ["a", "b", "c"] * 2, "limiter": ["parallelism", "parallelism", "compute alu"] * 2,
                       "duration_ns": [600.0, 200.0, 200.0] * 2, "flops": [0.0, 0.0, 40.0] * 2})
    out = graph_limiters(km, pl.DataFrame({"graph_id": ["g"], "config": ["c"], "flops": [20.0]}))
    top = out.row(0, named=True)
    assert (top["limiter"], top["share_pct"], top["kernel_time_ns"]) == ("parallelism", 80.0, 800.0)
    assert (top["dominant_kernel"], top["dominant_share_pct"]) == ("a", 60.0)
    assert top["flops_ratio"] == 2.0 and "much more work" in top["flops_flag"]
    assert dominant_limiter(out)["bottleneck"].to_list() == ["parallelism"]
    assert graph_limiters(km, pl.DataFrame({"graph_id": ["g"], "flops": [80.0]}))["flops_flag"].is_null().all()


@pytest.mark.parametrize("name, in_range, expected", [
    ("hipdnn_trace_hold", True, True),
    ("void at::vectorized_elementwise_kernel<2, at::BinaryFunctor<long, long, long, at::BitwiseXorFunctor<long>>, "
     "std::array<char *, 3>>(int, T2, T3)", False, True),
    ("void at::vectorized_elementwise_kernel<8, at::FillFunctor<c10::BFloat16>, std::array<char *, 1>>(int, T2, T3)",
     False, True),
    ("void at::vectorized_elementwise_kernel<8, at::FillFunctor<c10::BFloat16>, std::array<char *, 1>>(int, T2, T3)",
     True, False),   # a torch graph's own fill in its timed range
    ("void at::vectorized_elementwise_kernel<4, at::CUDAFunctor_add<float>, std::array<char *, 3>>(int, T2, T3)",
     False, False),  # float add: a graph's pointwise kernel
    ("LayerNormGradBetaGammaInToTemp", False, False),
])
def test_harness_kernel_names(name: str, in_range: bool, expected: bool) -> None:
    assert is_harness_kernel(name, in_range=in_range) is expected


def test_replay_cost_is_said_up_front() -> None:
    args = SimpleNamespace(profile_set="why", graphs=("graphs/perf/norm",), oracle=True, a=None)
    note = replay_estimate(args, 3)
    assert "~22 replay passes per kernel (measured)" in note and "x 2 configuration(s) x 3 iteration(s)" in note

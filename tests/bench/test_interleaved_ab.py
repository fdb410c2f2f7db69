"""Interleaved A/B (run --a X --b Y): blocks in ABBA/BAAB order, a paired interval, a verdict that stops
the graph, the ab frame, and compare/report showing it. No timing assertion beyond a B that sleeps
1 ms per execute (tens of times the reference's add_relu) being SLOWER."""

from __future__ import annotations

import math
import time
from pathlib import Path

import graph_dicts as hg
import numpy as np
import polars as pl
import pytest

from hipdnn_trace import backends
from hipdnn_trace.backends.reference import ReferenceBackend, ReferenceSession
from hipdnn_trace.bench.ab import Arm, merge_block
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.loop import Phase, Samples
from hipdnn_trace.bench.paired import FASTER, SAME, SLOWER, UNDECIDED, ABPlan, interval, signed_rank_cdf, verdict
from hipdnn_trace.bench.records import ConfigRun
from hipdnn_trace.cli import main
from hipdnn_trace.compare.report_model import interleaved_section
from hipdnn_trace.results.rundir import load_run

FAST = ["-w", "1", "-i", "10", "--ab-block", "5", "--ab-block-ms", "0.5", "--ab-min-rounds", "8",
        "--ab-max-rounds", "8", "--no-trace"]


class SleepySession(ReferenceSession):
    """The reference plus a 1 ms sleep per execute: a stand-in for a clearly slower B."""

    def execute(self) -> None:
        time.sleep(0.001)
        super().execute()


class SleepyBackend(ReferenceBackend):
    name = "sleepy"

    def prepare(self, graph, engine, options):  # type: ignore[override]
        super().prepare(graph, engine, options)
        return SleepySession(graph)


@pytest.fixture
def sleepy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(backends.REGISTRY, "sleepy", "tests:SleepyBackend")
    monkeypatch.setitem(backends._instances, "sleepy", SleepyBackend())


def _run(tmp_path: Path, run_id: str, *flags: str) -> tuple[int, object]:
    graph = hg.write(tmp_path / "g", [hg.add_relu()])[0]
    code = main(["run", str(graph), *flags, "--out", str(tmp_path / "runs"), "--run-id", run_id])
    return code, load_run(tmp_path / "runs" / run_id)


def test_aa_is_never_faster_or_slower_and_writes_the_frame(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, run = _run(tmp_path, "aa", "--a", "reference", "--b", "reference", *FAST)
    assert code == 0
    ab = run.ab
    assert ab.height == 1
    row = ab.row(0, named=True)
    assert (row["config"], row["config_b"]) == ("reference#A", "reference#B")
    assert row["verdict"] in (SAME, UNDECIDED)
    assert row["ci_low"] <= row["ratio"] <= row["ci_high"]
    assert (row["rounds"], row["blocks"], row["band"]) == (8, 32, 0.02)
    assert (tmp_path / "runs" / "aa" / "ab.csv").is_file()
    assert "A/B add_relu:" in capsys.readouterr().out
    # each config's samples stay in iterations, with the block they came from, in ABBA / BAAB order
    timed = run.iterations.filter(pl.col("phase") == "timed")
    blocks = dict(timed.group_by("config").agg(pl.col("block").unique().sort()).iter_rows())
    assert blocks["reference#A"][:4] == [0, 3, 5, 6]
    assert blocks["reference#B"][:4] == [1, 2, 4, 7]
    per_block = timed.group_by("block").len()
    assert per_block.height == 32 and per_block["len"].min() >= 5
    numbering = timed.group_by("config").agg(pl.col("iteration").n_unique().alias("unique"), pl.len())
    assert (numbering["unique"] == numbering["len"]).all()   # numbered on across blocks, never repeated
    assert set(run.summary["config"]) == {"reference#A", "reference#B"}   # the summary rows stay
    assert run.meta["timing"]["ab"]["band"] == 0.02


def test_a_clearly_slower_b_is_slower_and_compare_exits_3(tmp_path: Path, sleepy: None,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, run = _run(tmp_path, "slow", "--a", "reference", "--b", "sleepy", *FAST)
    assert code == 0
    row = run.ab.row(0, named=True)
    assert row["verdict"] == SLOWER and row["ci_low"] > 1.02
    assert row["stop"] == "decided after 8 rounds"
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "runs" / "slow")]) == 3
    out = capsys.readouterr().out
    assert "interleaved A/B in" in out and "SLOWER" in out and "add_relu" in out
    section = interleaved_section([run])
    assert section is not None and section.blocks[0].rows[0][5] == SLOWER


def test_compare_of_one_run_without_an_ab_frame_is_one_line(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = _run(tmp_path, "seq", "--a", "reference", "--b", "reference", "--ab-sequential", *FAST)
    assert code == 0 and not (tmp_path / "runs" / "seq" / "ab.csv").exists()
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "runs" / "seq")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no interleaved A/B verdicts" in err[0]


def test_max_rounds_below_min_rounds_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = hg.write(tmp_path / "g", [hg.add_relu()])[0]
    code = main(["run", str(graph), "--a", "reference", "--b", "reference", "--ab-min-rounds", "8",
                 "--ab-max-rounds", "4", "--out", str(tmp_path / "runs")])
    assert code == 1
    assert "--ab-max-rounds 4 is below --ab-min-rounds 8" in capsys.readouterr().err


# -- the statistic ------------------------------------------------------------------------

def test_signed_rank_distribution_matches_scipy() -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    for n in (6, 7, 9, 12, 20):
        for _ in range(20):
            d = rng.normal(0.01 * rng.standard_normal(), 0.03, n)
            _, low, high = interval(d, 0.95)
            p = stats.wilcoxon(d, method="exact").pvalue
            assert (low > 1 or high < 1) == (p < 0.05), (n, p, low, high)   # the interval inverts the test
        assert signed_rank_cdf(n)[-1] == pytest.approx(1.0)


def test_too_few_rounds_give_no_interval() -> None:
    ratio, low, high = interval([0.5, 0.6, 0.55, 0.52, 0.58], 0.95)   # 2/2^5 > 5%: no 95% interval exists
    assert ratio == pytest.approx(math.exp(0.55), rel=0.05) and (low, high) == (0.0, math.inf)
    assert verdict(low, high, 0.02) == UNDECIDED


@pytest.mark.parametrize(("low", "high", "expected"), [
    (0.99, 1.01, SAME), (1.03, 1.10, SLOWER), (0.90, 0.97, FASTER), (1.005, 1.03, UNDECIDED),
    (0.97, 1.01, UNDECIDED)])
def test_verdict_against_the_band(low: float, high: float, expected: str) -> None:
    assert verdict(low, high, 0.02) == expected


def test_looks_double_from_the_minimum_and_share_alpha() -> None:
    plan = ABPlan(min_rounds=8, max_rounds=32)
    assert plan.looks() == [8, 16, 32]
    assert plan.confidence() == pytest.approx(1 - 0.05 / 3)
    assert ABPlan(min_rounds=8, max_rounds=8).looks() == [8]


def test_merge_numbers_iterations_on_and_pads_columns() -> None:
    arm = Arm(ConfigRun(config=Config("a", "reference")), "range")
    for index in (0, 3):
        block = Samples(phase=["warmup", "timed", "timed"], iteration=[0, 0, 1], kernel_ms=[5.0, 1.0, 2.0],
                        host_ms=[5.0, 1.0, 2.0], start_ns=[1, 2, 3], end_ns=[2, 3, 4])
        if index == 3:
            block.extra["sm_clock_mhz"] = [1.0, 1.0, 1.0]
        merge_block(arm, block, [Phase("execute", 0, 1)], index)
    s = arm.samples
    assert s.iteration == [0, 0, 1, 1, 2, 3]
    assert s.extra["block"] == [0, 0, 0, 3, 3, 3]
    assert s.extra["sm_clock_mhz"] == [None, None, None, 1.0, 1.0, 1.0]
    assert [list(b) for b in arm.blocks] == [[1.0, 2.0], [1.0, 2.0]]


def test_the_estimate_prices_the_blocks_up_to_the_first_look() -> None:
    from hipdnn_trace.backends.reference import cost
    from hipdnn_trace.bench import estimate
    from hipdnn_trace.bench.graph_run import RunSettings
    from hipdnn_trace.bench.loop import LoopSettings
    from hipdnn_trace.graph.build import GraphBuilder

    b = GraphBuilder("mm", io="half")
    b.matmul(b.tensor("a", [1, 64, 64]), b.tensor("b", [1, 64, 64]), out="c")
    rates = cost.Rates(gemm=1e10, passes=1e9, transcendental=1e8, call_s=1e-6, small_gemm=1e9)
    pair = [Config("a", "reference"), Config("b", "reference")]
    loop = LoopSettings(warmup=2, iters=20)
    plan = ABPlan(block_iters=10, block_ms=0.0, min_rounds=8, max_rounds=32)
    sequential = estimate.estimate_graph(b.build(), pair, RunSettings(loop=loop, ab=True), rates)
    interleaved = estimate.estimate_graph(b.build(), pair, RunSettings(loop=loop, ab=True, ab_plan=plan), rates)
    assert sequential.rows == 2 * (2 + 20)
    assert interleaved.rows == 2 * 16 * (2 + 10)   # 8 rounds: 16 blocks per configuration, each warmup + 10


def test_the_trace_gives_each_stretch_of_blocks_its_own_configuration_slice(tmp_path: Path) -> None:
    from hipdnn_trace.trace import read_trace

    flags = [f for f in FAST if f != "--no-trace"]
    _run(tmp_path, "traced", "--a", "reference", "--b", "reference", *flags)
    slices = read_trace(tmp_path / "runs" / "traced" / "trace.pftrace").slices
    configs = slices.filter(pl.col("name").is_in(["reference#A", "reference#B"])).sort("ts_ns")
    # init A, init B, then 8 rounds alternating in stretches (A BB AA BB ... ), then fetch A, fetch B
    assert configs.height > 8
    assert configs["depth"].n_unique() == 1   # siblings under the graph slice: none overlaps another
    ends = (configs["ts_ns"] + configs["dur_ns"]).to_list()
    assert all(end <= start for end, start in zip(ends, configs["ts_ns"].to_list()[1:]))
    depth = configs["depth"][0]
    assert set(slices.filter(pl.col("name") == "execute")["depth"]) == {depth + 1}


def test_on_a_gpu_timer_each_block_is_timed_by_the_kernel_clock_fake_cupti_and_events() -> None:
    """No GPU here: staged events and CUPTI are the stand-ins of test_timing_sources.py. Every block
    goes through run_loop, so each gets its kernel clock window and its side blocks, numbered."""
    from test_timing_sources import FakeKernelClock, FakeSession, FakeStagedTimer

    from hipdnn_trace.bench import ab
    from hipdnn_trace.bench.loop import LoopSettings, side_iterations
    from hipdnn_trace.markers import Markers

    clocks = [FakeKernelClock(per_window=0.001), FakeKernelClock(per_window=0.002)]
    arms = [Arm(ConfigRun(config=Config(name, "cudnn")), name, session=FakeSession(FakeStagedTimer()), clock=clock)
            for name, clock in zip("ab", clocks)]
    plan = ABPlan(block_iters=4, block_ms=0.0, min_rounds=8, max_rounds=16)
    result = ab.interleave(arms, plan, LoopSettings(warmup=1, iters=4), Markers())
    assert (result.verdict, result.rounds, result.ratio) == (SLOWER, 8, pytest.approx(2.0))
    assert [c.begun for c in clocks] == [c.finished for c in clocks] == [16, 16]   # one window per block
    s = arms[1].samples
    assert set(s.phase) == {"warmup", "timed", "latency", "span"}
    first = 1 + 4 + 2 * side_iterations(4)   # B's first block: warmup, timed, the latency and span side blocks
    assert s.extra["block"][:first] == [1] * first and s.extra["block"][first] == 2
    assert s.timing["kernel_ms"] == "cupti-activity"


def test_the_estimate_prices_a_plan_build_per_recreated_session() -> None:
    """--ab-fresh-sessions N re-creates both sessions every N rounds: each re-creation is one more plan
    build per configuration up to the first look (8 rounds: 7 more with N=1, 3 with N=2, none with 0)."""
    from hipdnn_trace.backends.reference import cost
    from hipdnn_trace.bench import estimate
    from hipdnn_trace.bench.graph_run import RunSettings
    from hipdnn_trace.bench.loop import LoopSettings
    from hipdnn_trace.graph.build import GraphBuilder

    b = GraphBuilder("mm", io="half")
    b.matmul(b.tensor("a", [1, 64, 64]), b.tensor("b", [1, 64, 64]), out="c")
    rates = cost.Rates(gemm=1e10, passes=1e9, transcendental=1e8, call_s=1e-6, small_gemm=1e9)
    pair = [Config("a", "cudnn"), Config("b", "cudnn")]   # priced, never run: no GPU is needed
    loop = LoopSettings(warmup=2, iters=20)

    def init_s(every: int) -> float:
        plan = ABPlan(block_iters=10, block_ms=0.0, min_rounds=8, max_rounds=32, fresh_every=every)
        settings = RunSettings(loop=loop, ab=True, ab_plan=plan)
        return estimate.estimate_graph(b.build(), pair, settings, rates).stages["init"]

    assert init_s(0) == pytest.approx(2 * estimate.GPU_INIT_S)
    assert init_s(1) == pytest.approx(2 * 8 * estimate.GPU_INIT_S)
    assert init_s(2) == pytest.approx(2 * 4 * estimate.GPU_INIT_S)

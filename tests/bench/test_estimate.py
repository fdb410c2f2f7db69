"""The suite estimate (bench/estimate.py): which float64 evaluations a run makes, and how many.

The reference backend evaluates once per warmup and timed iteration, and its own float64 result is
the oracle (no further evaluation); a GPU configuration is validated against one evaluation. Rates
are given here, so the expected seconds follow from the model's own counts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hipdnn_trace.backends.reference import cost
from hipdnn_trace.bench import estimate
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings
from hipdnn_trace.bench.loop import LoopSettings, side_iterations
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.sources import expand
from hipdnn_trace.graph.write import graph_to_json
from hipdnn_trace.runs.estimates import estimate_note

RATES = cost.Rates(gemm=1e10, passes=1e9, transcendental=1e8, call_s=1e-6, small_gemm=1e9)
REFERENCE = [Config("reference", "reference")]


def _graph(m: int = 512):
    b = GraphBuilder(f"mm{m}", io="half")
    b.matmul(b.tensor("a", [1, m, m]), b.tensor("b", [1, m, m]), out="c")
    return b.build()


def _settings(warmup: int = 2, iters: int = 5, **kw) -> RunSettings:
    return RunSettings(loop=LoopSettings(warmup=warmup, iters=iters, min_time_ms=kw.pop("min_time_ms", 0.0)), **kw)


def test_the_reference_backend_evaluates_warmup_plus_iters_times_and_is_its_own_oracle() -> None:
    g = _graph()
    one = estimate.reference_pass_s(g, RATES)
    est = estimate.estimate_graph(g, REFERENCE, _settings(), RATES)
    assert est.stages["reference"] == 0.0   # no second evaluation to validate against
    assert est.stages["warmup"] == pytest.approx(2 * one) and est.stages["timed"] == pytest.approx(5 * one)
    assert est.rows == 7
    assert est.seconds == pytest.approx(sum(est.stages.values()))


def test_a_gpu_configuration_is_validated_against_one_cpu_evaluation() -> None:
    g = _graph()
    est = estimate.estimate_graph(g, [Config("cudnn", "cudnn")], _settings(), RATES)
    assert est.stages["reference"] == pytest.approx(estimate.reference_pass_s(g, RATES))
    device = estimate.device_pass_s(g)
    assert est.stages["timed"] == pytest.approx((5 + 2 * side_iterations(5)) * device)
    assert est.stages["init"] == estimate.GPU_INIT_S
    unvalidated = estimate.estimate_graph(g, [Config("cudnn", "cudnn")], _settings(validate="none"), RATES)
    assert unvalidated.stages["reference"] == unvalidated.stages["validate"] == 0.0


def test_min_time_asks_for_more_timed_iterations() -> None:
    g = _graph()
    one = estimate.reference_pass_s(g, RATES)
    est = estimate.estimate_graph(g, REFERENCE, _settings(warmup=0, iters=1, min_time_ms=one * 1e3 * 10), RATES)
    assert est.rows == 10


def test_inputs_of_an_attention_backward_include_the_forward_they_come_from() -> None:
    b = GraphBuilder("bwd", io="half")
    q, k, v, o, do = (b.tensor(n, [1, 2, 64, 32]) for n in ("q", "k", "v", "o", "do"))
    b.sdpa_backward(q, k, v, o, do, b.tensor("stats", [1, 2, 64, 1], dtype="float"))
    g = b.build()
    plain = RATES.seconds(cost.Work(passes=estimate.INPUT_PASSES * sum(t.numel for t in g.input_tensors)))
    assert estimate.inputs_s(g, RATES) > plain


def _suite(tmp_path: Path, sizes: list[int]):
    for m in sizes:
        (tmp_path / f"mm{m}.json").write_text(json.dumps(graph_to_json(_graph(m))))
    return expand([str(tmp_path)])


def test_a_suite_adds_the_rows_written_before_each_graph_and_one_child_start(tmp_path: Path) -> None:
    sources = _suite(tmp_path, [64, 128, 256])
    alone = [estimate.estimate_graph(_graph(m), REFERENCE, _settings(), RATES) for m in (128, 256, 64)]
    suite = estimate.estimate_suite(sources, REFERENCE, _settings(), rates=RATES, isolation="resident")
    assert [Path(e.source).stem for e in suite] == ["mm128", "mm256", "mm64"]   # suite order (sorted names)
    assert suite[0].stages["process start"] == estimate.CHILD_START_S
    assert "process start" not in suite[1].stages
    assert suite[2].stages["write"] == pytest.approx(alone[2].stages["write"] + estimate.WRITE_EARLIER_ROW_S * 14)
    fresh = estimate.estimate_suite(sources, REFERENCE, _settings(), rates=RATES, isolation="fresh")
    assert all("process start" in e.stages for e in fresh)


def test_an_unreadable_graph_costs_its_fixed_part(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{")
    [est] = estimate.estimate_suite(expand([str(tmp_path)]), REFERENCE, _settings(), rates=RATES)
    assert est.seconds == pytest.approx(estimate.GRAPH_FIXED_S + estimate.WRITE_FIXED_S)


def test_a_short_suite_is_priced_at_the_default_rates_without_measuring(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(cost, "measured_rates", lambda: pytest.fail("measured for a short suite"))
    est = estimate.estimate_suite(_suite(tmp_path, [16]), REFERENCE, _settings())
    assert est[0].seconds < estimate.CALIBRATE_ABOVE_S


def test_the_note_names_the_total_and_the_longest_graph_only_when_long() -> None:
    short = [estimate.GraphEstimate("a.json", {"timed": 1.0})]
    assert estimate_note(short) is None
    long = [estimate.GraphEstimate("g/a.json", {"timed": 50.0}), estimate.GraphEstimate("g/b.json", {"timed": 250.0})]
    note = estimate_note(long)
    assert note is not None and note.startswith("estimate: about 5m00s for 2 graph(s)")
    assert "longest b about 4m10s" in note


@pytest.mark.parametrize("backend", ["reference", "faulty"])
def test_a_graph_run_refuses_up_front_costs_only_its_load_and_row(backend, tmp_path: Path, monkeypatch) -> None:
    """Issue 33's conv (66 TFLOP, fp32): refused for the float64 reference's time (as the backend, or as
    the CPU oracle of a GPU-like backend), so the estimate is not its hours ("about 25h20m" before)."""
    from hipdnn_trace.backends.reference import rate

    monkeypatch.setenv(rate.RATE_ENV, "100")   # 66 TFLOP at 100 GFLOP/s: 11 min, over 600 s
    rate.float64_rate.cache_clear()
    b = GraphBuilder("conv_hours", io="float")
    b.conv_fwd(b.tensor("x", [512, 256, 32, 32]), b.tensor("w", [256, 256, 31, 31]), pad=15, out="y")
    (tmp_path / "conv_hours.json").write_text(json.dumps(graph_to_json(b.build())))
    sources = expand([str(tmp_path)])
    configs = [Config(backend, backend)]
    try:
        [refused] = estimate.estimate_suite(sources, configs, _settings(0, 1, reference_device="cpu"), rates=RATES)
        [hours] = estimate.estimate_suite(sources, configs, _settings(0, 1, reference_device="cpu",
                                                                      max_reference_s=0), rates=RATES)
    finally:
        rate.float64_rate.cache_clear()
    assert refused.seconds == pytest.approx(estimate.GRAPH_FIXED_S + estimate.WRITE_FIXED_S)
    assert hours.seconds > 3600

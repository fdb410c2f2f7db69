"""``compare --why``: the kernel-level changes behind a time difference (compare/why.py). On the real
H200 run of cuDNN's LN-backward oracle pair (tests/data/ncu/why_ln_oracle_run: heuristic eng1 2.40 ms,
autotuned eng5 0.41 ms), it names the two grid-starved kernels as most of the regret."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
from repo_paths import TEST_DATA

from hipdnn_trace.cli import main
from hipdnn_trace.compare.why import explain, summary
from hipdnn_trace.compare.why_sections import two_runs

RUN = TEST_DATA / "ncu" / "why_ln_oracle_run"
LN = "35ff2b3905203f5a"


def _side(config: str) -> pl.DataFrame:
    k = pl.read_csv(RUN / "kernel_metrics.csv", infer_schema_length=None)
    return k.filter((pl.col("graph_id") == LN) & (pl.col("config") == config))


def test_the_ln_backward_regret_is_the_two_grid_starved_kernels() -> None:
    e = explain(_side("cudnn#ootb"), _side("cudnn#tuned"), graph="ln", label_a="ootb", label_b="tuned")
    text = summary(e)
    assert "ootb is slower" in text
    assert "with grids of 64 and 32 blocks on 132 SMs" in text and "limiter parallelism" in text
    assert "LayerNormGradBetaGammaInToTemp, LayerNormGradBetaGammaTempToOut" in text
    starved = [c for c in e.changes if c.kernel.startswith("LayerNormGradBetaGamma")]
    assert sum(c.contribution_ns for c in starved) / e.delta_ns > 0.9   # most of the regret
    # contributions add up to the difference of the profiled kernel times
    assert sum(c.contribution_ns for c in e.changes) == pytest.approx(e.delta_ns)
    assert e.profiled_a_ns > 5 * e.profiled_b_ns


def test_compare_one_oracle_run_with_why_prints_the_explanation(tmp_path: Path, capsys) -> None:
    run = shutil.copytree(RUN, tmp_path / "why_ln")
    assert main(["compare", str(run), "--why"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("why:\nllm_layernorm_backward_8x2048x4096_bf16: cudnn#ootb is slower by")
    assert "grid 64x128, 0.03 waves; occupancy 6.2/100.0%" in out


def test_a_run_without_kernel_metrics_says_how_to_get_them(tmp_path: Path, capsys) -> None:
    run = shutil.copytree(RUN, tmp_path / "why_ln")
    (run / "kernel_metrics.csv").unlink()
    assert main(["compare", str(run), "--why"]) == 0
    assert "no kernel_metrics, so no kernel-level explanation; profile the run with --profile ncu" in \
        capsys.readouterr().out


def test_two_runs_explain_only_slower_and_faster_rows(tmp_path: Path) -> None:
    """The comparison table is a stand-in (two CPU runs cannot differ on purpose); the kernel rows are real."""
    class Side:
        def __init__(self, path: Path) -> None:
            self.path = path

    a, b = shutil.copytree(RUN, tmp_path / "a"), shutil.copytree(RUN, tmp_path / "b")
    table = pl.DataFrame({"graph": ["ln", "ln"], "graph_id": [LN, LN], "config_a": ["cudnn#ootb"] * 2,
                          "config_b": ["cudnn#tuned", "cudnn#ootb"], "median_a": [2.4, 2.4],
                          "median_b": [0.41, 2.4], "verdict": ["FASTER", "SAME"]})

    class Comparison:
        pass

    c = Comparison()
    c.table = table
    text = two_runs(c, Side(a), Side(b))
    assert text.count("is slower by") == 1 and "A (cudnn#ootb) is slower" in text


def test_run_oracle_under_a_counter_profiler_prints_the_explanation(tmp_path: Path, capsys) -> None:
    """The end of ``run --oracle --profile ncu`` (runs/measure.py), on the real run folder."""
    from hipdnn_trace.runs.measure import _explain_pairs
    from hipdnn_trace.runs.request import RunRequest

    run = shutil.copytree(RUN, tmp_path / "why_ln")
    _explain_pairs(RunRequest(oracle=True), run)
    assert "LayerNormGradBetaGammaInToTemp, LayerNormGradBetaGammaTempToOut" in capsys.readouterr().out
    _explain_pairs(RunRequest(oracle=True, quiet=True), run)
    assert capsys.readouterr().out == ""


def test_the_report_has_the_why_section_with_bars_roofline_and_explanation(tmp_path: Path) -> None:
    from hipdnn_trace.compare.report_model import Image, Table, build_report
    from hipdnn_trace.results.rundir import load_run

    run = load_run(shutil.copytree(RUN, tmp_path / "why_ln"))
    why = next(s for s in build_report([run], None).sections if s.id == "why")
    assert sum(isinstance(b, Image) for b in why.blocks) == 2   # limiter bars, roofline
    assert any("LayerNormGradBetaGammaInToTemp, LayerNormGradBetaGammaTempToOut" in p for p in why.paragraphs)
    assert "why:" not in why.paragraphs
    table = next(b for b in why.blocks if isinstance(b, Table) and "kernels by contribution" in b.caption)
    assert [r[0] for r in table.rows[:3]] == ["LayerNormGradBetaGammaInToTemp",
                                             "cudnn_generated_layer_norm_bwd_1_1_2_4_0", "LayerNormGradBlockSMemImpl"]
    assert table.rows[0][4] == "103" and table.rows[1][2] == "0.4106 ms" and table.rows[1][1] == "-"


def test_table_rows_share_adds_to_the_whole_difference() -> None:
    """Hand-built sides (contract columns): a kernel on A only, one on both, one on B only."""
    from hipdnn_trace.compare.why import TABLE_COLUMNS, table_rows

    a = pl.DataFrame({"kernel": ["starved", "shared"], "iteration": [0, 0], "duration_ns": [3.0e6, 1.0e6],
                      "grid_size": [64, 1024], "block_size": [128, 256], "waves_per_sm": [0.03, 4.0],
                      "limiter": ["parallelism", "memory dram"]})
    b = pl.DataFrame({"kernel": ["shared", "fused"], "iteration": [0, 0], "duration_ns": [1.5e6, 0.5e6],
                      "grid_size": [1024, 132], "block_size": [256, 64], "waves_per_sm": [4.0, 0.25],
                      "limiter": ["memory dram", "latency"]})
    rows = table_rows(explain(a, b, graph="g", label_a="a", label_b="b"))
    assert all(len(r) == len(TABLE_COLUMNS) for r in rows)
    assert [(r[0], r[3], r[4]) for r in rows] == [("starved", "3 ms", "150"), ("shared", "-0.5 ms", "-25"),
                                                  ("fused", "-0.5 ms", "-25")]
    assert rows[0][5] == "grid 64x128, 0.03 waves; parallelism" and rows[0][6] == "-"


def test_roofline_points_and_ceilings_per_level() -> None:
    """Intensity = FLOPs / bytes at the level, TFLOP/s = FLOPs / duration, ceiling = bytes per cycle x cycles/s."""
    from hipdnn_trace.compare.why_report import roofline_points

    frame = pl.DataFrame({"kernel": ["k"], "flops": [2.0e9], "duration_ns": [1.0e6], "dram__bytes.sum": [1.0e8],
                          "dram__bytes.sum.peak_sustained": [512.0], "dram__cycles_elapsed.avg.per_second": [2.6e9],
                          "lts__t_bytes.sum": [4.0e8]})
    points, peaks = roofline_points(frame)
    assert points["DRAM"] == [(20.0, 2.0, "k")] and points["L2"] == [(5.0, 2.0, "k")] and "L1" not in points
    assert peaks == {"DRAM": pytest.approx(512 * 2.6)}   # GB/s; L2 has no peak metrics here


def test_the_markdown_report_carries_the_explanation_table(tmp_path: Path) -> None:
    run = shutil.copytree(RUN, tmp_path / "why_ln")
    assert main(["report", str(run), "-o", str(tmp_path / "r.html")]) == 0
    md = (tmp_path / "r.md").read_text()
    assert "| kernel | A | B | A-B | share % |" in md
    assert "| LayerNormGradBetaGammaInToTemp | 2.07 ms | - | 2.07 ms | 103 | grid 64x128, 0.03 waves;" in md
    assert md.index("limiters by kernel time") < md.index("kernels by contribution")


def test_the_dram_ceiling_falls_back_to_the_peak_table() -> None:
    """No ncu peak metrics (an older set, AMD): the DRAM roof is the peak table's hbm_tbs, and the caption says so;
    with ncu's own peak metrics the table is not used."""
    from hipdnn_trace.compare.why_report import roofline_png

    bare = pl.DataFrame({"kernel": ["k"], "flops": [2.0e9], "duration_ns": [1.0e6], "dram__bytes.sum": [1.0e8]})
    image, caption = roofline_png(bare, 989.0, hbm_tbs=4.8)
    assert image and "DRAM's from the peak table (hbm_tbs)" in caption and "no L1, L2 bytes" in caption
    _, caption = roofline_png(bare, 989.0)
    assert "peak table" not in caption
    own = bare.with_columns(pl.lit(512.0).alias("dram__bytes.sum.peak_sustained"),
                            pl.lit(2.6e9).alias("dram__cycles_elapsed.avg.per_second"))
    assert "peak table" not in roofline_png(own, 989.0, hbm_tbs=4.8)[1]


def test_the_raw_ncu_exports_of_the_pair_explain_the_same() -> None:
    """The lead's standalone `ncu --set full` raw pages of the two plans (tests/data/ncu/ln_bwd_*_full_raw.csv),
    read as `ingest` reads them, give the same verdict as the run folder: the explanation does not depend on
    where kernel_metrics came from."""
    from hipdnn_trace.profilers.ncu_why import ingest_frames

    a, b = (ingest_frames(TEST_DATA / "ncu" / f"ln_bwd_{side}_full_raw.csv")["why"] for side in ("ootb", "tuned"))
    e = explain(a, b, graph="ln", label_a="eng1", label_b="eng5")
    assert [c.kernel for c in e.changes[:2]] == ["LayerNormGradBetaGammaInToTemp",
                                                 "cudnn_generated_layer_norm_bwd_1_1_2_4_0"]
    text = summary(e)
    assert "2 kernel(s) of eng1 with grids of 64 and 32 blocks on 132 SMs (0.03 and 0.015 waves), limiter " \
           "parallelism" in text
    starved = sum(c.contribution_ns for c in e.changes if c.a.get("limiter") == "parallelism")
    assert 0.9 < starved / e.delta_ns < 1.1 and e.delta_ns == pytest.approx(1.993e6, rel=1e-3)


def test_an_interleaved_ab_pair_that_differs_is_explained(tmp_path: Path) -> None:
    """``run --a X --b Y`` writes ab.csv; a SLOWER/FASTER pair there is explained like an oracle pair (the
    kernel rows are the real LN-backward ones; the ab.csv row is written here, as such a run would)."""
    from hipdnn_trace.compare.why_sections import one_run
    from hipdnn_trace.results import schemas
    from hipdnn_trace.results.rundir import load_run

    run = shutil.copytree(RUN, tmp_path / "ab")
    (run / "oracle.csv").unlink()
    row = {"run_id": "why_ln", "graph": "llm_layernorm_backward_8x2048x4096_bf16", "graph_id": LN,
           "config": "cudnn#ootb", "config_b": "cudnn#tuned", "ratio": 0.171, "ci_low": 0.170, "ci_high": 0.172,
           "confidence": 0.95, "verdict": "FASTER", "band": 0.02, "rounds": 8, "blocks": 32, "block_iters": 10,
           "recreated": 8, "stop": "decided", "method": "interleaved"}
    schemas.conform(pl.DataFrame([row]), schemas.AB).write_csv(run / "ab.csv")
    text, found = one_run(load_run(run), 0.05)
    assert len(found) == 1 and "cudnn#ootb is slower" in text
    assert "LayerNormGradBetaGammaInToTemp, LayerNormGradBetaGammaTempToOut" in text

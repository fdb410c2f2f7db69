"""The why columns from ncu's raw page equal ncu's own details page of the same report.

Real `ncu --set full` reports of an H200 (tests/data/ncu/SOURCES.md): cuDNN's heuristic and
autotuned LayerNorm-backward plans and a 4096^3 bf16 GEMM. The details page is the truth:
each column is compared with the row ncu prints (Section Name / Metric Name / Metric Value)
for every kernel, within 1 point.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from repo_paths import TEST_DATA

from hipdnn_trace.profilers import ncu_csv, ncu_why
from hipdnn_trace.profilers.ncu_csv import number, unit_scale

DATA = TEST_DATA / "ncu"
REPORTS = ("ln_bwd_ootb", "ln_bwd_tuned", "gemm_bf16")
#: columns the acceptance check names, compared with ncu's details rows
COMPARED = ("sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "l1_throughput_pct",
            "l2_throughput_pct", "achieved_occupancy_pct", "theoretical_occupancy_pct", "waves_per_sm",
            "issue_active_pct", "grid_size", "block_size", "registers_per_thread", "sm_count", "duration_ns")


def details(path: Path) -> dict[int, dict[tuple[str, str], float]]:
    """ID -> (section, metric) -> value in base units, from ncu's details page."""
    out: dict[int, dict[tuple[str, str], float]] = {}
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            value = number(row["Metric Value"])
            if value is None or not row["Metric Name"]:
                continue
            factor = unit_scale(row["Metric Unit"])[0]
            out.setdefault(int(row["ID"]), {})[(row["Section Name"], row["Metric Name"])] = value * factor
    return out


def frame(report: str):
    return ncu_why.kernel_metrics(ncu_csv.read_raw_csv(DATA / f"{report}_full_raw.csv"))[0]


@pytest.mark.parametrize("report", REPORTS)
def test_why_columns_equal_ncu_details_page_for_every_kernel(report: str) -> None:
    truth = details(DATA / f"{report}_full_details.csv")
    km = frame(report)
    assert sorted(km["ncu_id"].to_list()) == sorted(truth)
    for row in km.iter_rows(named=True):
        page = truth[row["ncu_id"]]
        for col in COMPARED:
            _, section, name = ncu_why.SOL[col]
            expected = page[(section, name)]
            tolerance = 0.01 * expected if col == "duration_ns" else 1.0   # the page prints 3 digits
            assert row[col] == pytest.approx(expected, abs=tolerance), (report, row["kernel"], col)


@pytest.mark.parametrize("report", REPORTS)
def test_occupancy_limiter_is_the_least_block_limit_on_the_page(report: str) -> None:
    truth = details(DATA / f"{report}_full_details.csv")
    names = {"registers": "Block Limit Registers", "shared_memory": "Block Limit Shared Mem",
             "warps": "Block Limit Warps", "blocks": "Block Limit SM", "barriers": "Block Limit Barriers"}
    for row in frame(report).iter_rows(named=True):
        limits = {k: truth[row["ncu_id"]][("Occupancy", v)] for k, v in names.items()}
        least = min(limits.values())
        assert row["occupancy_limiter"].split(",") == [k for k, v in limits.items() if v == least]


def test_grid_starved_layernorm_backward_kernels_are_parallelism() -> None:
    km = frame("ln_bwd_ootb")
    by = {k: (lim, why) for k, lim, why in km.select("kernel", "limiter", "why").iter_rows()}
    for kernel, grid in (("LayerNormGradBetaGammaInToTemp", 64), ("LayerNormGradBetaGammaTempToOut", 32)):
        limiter, why = by[kernel]
        assert limiter == "parallelism"
        assert f"grid {grid} blocks" in why and "132 SMs" in why and "estimate" in why
    # the third kernel keeps the ALU pipe busy: ncu's HighPipeUtilization says "ALU ... 78.4%"
    assert by["LayerNormGradBlockSMemImpl"][0] == "compute alu"
    gains = dict(km.select("kernel", "est_speedup_pct").iter_rows())
    # ncu's LaunchConfiguration rule on the details page: 51.52% and 75.76%
    assert gains["LayerNormGradBetaGammaInToTemp"] == pytest.approx(51.52, abs=0.01)
    assert gains["LayerNormGradBetaGammaTempToOut"] == pytest.approx(75.76, abs=0.01)
    assert gains["LayerNormGradBlockSMemImpl"] is None


def test_large_gemm_is_compute_on_the_tensor_pipe() -> None:
    row = frame("gemm_bf16").row(0, named=True)
    assert row["limiter"] == "compute tensor"
    assert "SM throughput 90.1%" in row["why"]
    assert row["tensor_pipe_pct"] == pytest.approx(90.09, abs=0.01)


def test_top_stalls_name_the_reasons_ncu_reports() -> None:
    row = frame("ln_bwd_ootb").row(0, named=True)
    # WarpStateStats CPIStall on the page: 20.3 of 22.3 cycles stalled on long_scoreboard
    assert row["top_stalls"].startswith("long_scoreboard 91%")


def test_harness_kernels_of_a_whole_run_are_not_the_graphs() -> None:
    table = ncu_csv.read_raw_csv(DATA / "whole_run_no_nvtx_raw_base_units.csv")
    km, dropped = ncu_why.kernel_metrics(table)
    assert set(km["kernel"]) == {"ln_tma_fwd_kernel"}      # warmup + 2 iterations of the graph
    assert km.height == 3 and dropped == 158


def test_why_preset_lists_exactly_the_metrics_the_columns_read() -> None:
    from hipdnn_trace.profilers.profiles import profile_for_arch

    for arch in ("sm_90", "sm_80"):
        preset = profile_for_arch(arch).preset("why").counters
        assert set(ncu_why.metrics(arch)) <= set(preset)


def test_ingest_of_the_raw_page_gives_the_same_why_columns(tmp_path: Path) -> None:
    import polars as pl

    from hipdnn_trace.cli import main

    out = tmp_path / "k"
    assert main(["ingest", str(DATA / "ln_bwd_ootb_full_raw.csv"), "--out", str(out), "--no-trace", "-q"]) == 0
    ingested = pl.read_parquet(out / "kernel_metrics.parquet").sort("ncu_id")
    direct = frame("ln_bwd_ootb").sort("ncu_id")
    for col in (*COMPARED, "occupancy_limiter", "top_stalls", "limiter", "why", "est_speedup_pct"):
        assert ingested[col].to_list() == direct[col].to_list(), col
    limiters = pl.read_csv(out / "graph_limiters.csv")
    top = limiters.sort("share_pct", descending=True).row(0, named=True)
    assert top["limiter"] == "parallelism" and top["dominant_kernel"] == "LayerNormGradBetaGammaInToTemp"
    assert limiters["share_pct"].sum() == pytest.approx(100.0)


def rules(report: str, name: str) -> dict[int, list[dict[str, str]]]:
    """ID -> the rows of one of ncu's guided-analysis rules on the details page."""
    out: dict[int, list[dict[str, str]]] = {}
    with (DATA / f"{report}_full_details.csv").open(newline="") as fh:
        for row in csv.DictReader(fh):
            if row["Rule Name"] == name:
                out.setdefault(int(row["ID"]), []).append(row)
    return out


@pytest.mark.parametrize("report", REPORTS)
def test_busiest_pipe_is_the_one_ncus_high_pipe_utilization_rule_names(report: str) -> None:
    import re

    said = rules(report, "HighPipeUtilization")
    checked = 0
    for row in frame(report).iter_rows(named=True):
        for rule in said.get(row["ncu_id"], []):
            m = re.match(r"(\w+) is the highest-utilized pipeline \(([\d.]+)%\)", rule["Rule Description"])
            if m:
                assert (row["top_pipe"], round(row["top_pipe_pct"], 1)) == (m.group(1).lower(), float(m.group(2)))
                checked += 1
    assert checked or report == "ln_bwd_tuned"   # its kernels are "all under-utilized": no pipe named


@pytest.mark.parametrize("report", REPORTS)
def test_estimated_speedup_is_ncus_launch_configuration_estimate(report: str) -> None:
    said = rules(report, "LaunchConfiguration")
    for row in frame(report).iter_rows(named=True):
        page = [float(r["Estimated Speedup"]) for r in said.get(row["ncu_id"], [])
                if r["Estimated Speedup"] and "less than the GPU's" in r["Rule Description"]]
        if page:
            assert row["est_speedup_pct"] == pytest.approx(page[0], abs=0.01)
        elif row["limiter"] != "parallelism":
            assert row["est_speedup_pct"] is None


@pytest.mark.parametrize("report", REPORTS)
def test_parallelism_where_ncus_sol_rule_says_the_grid_is_too_small(report: str) -> None:
    said = rules(report, "SOLBottleneck")
    for row in frame(report).iter_rows(named=True):
        small = any("grid is too small" in r["Rule Description"] for r in said.get(row["ncu_id"], []))
        assert (row["limiter"] == "parallelism") == small, row["kernel"]


def test_ingest_of_an_ncu_report_exports_it_through_stand_in_ncu(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import polars as pl

    from hipdnn_trace.cli import main

    exe = tmp_path / "ncu"    # prints the real report's raw page, as `ncu --import R --csv --page raw` does
    exe.write_text(f"#!/bin/sh\ncat '{DATA / 'ln_bwd_ootb_full_raw.csv'}'\n")
    exe.chmod(0o755)
    monkeypatch.setenv("HIPDNN_TRACE_NCU", str(exe))
    report = tmp_path / "R.ncu-rep"
    report.write_bytes(b"\x00binary")
    assert main(["ingest", str(report), "--out", str(tmp_path / "k"), "--no-trace", "-q"]) == 0
    got = pl.read_parquet(tmp_path / "k" / "kernel_metrics.parquet").sort("ncu_id")
    assert got["limiter"].to_list() == frame("ln_bwd_ootb").sort("ncu_id")["limiter"].to_list()


def test_ingest_of_an_ncu_report_without_ncu_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture) -> None:
    from hipdnn_trace.cli import main

    monkeypatch.setenv("HIPDNN_TRACE_NCU", str(tmp_path / "nope"))
    monkeypatch.setenv("PATH", str(tmp_path))
    report = tmp_path / "R.ncu-rep"
    report.write_bytes(b"\x00binary")
    assert main(["ingest", str(report), "--out", str(tmp_path / "k"), "-q"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ncu" in err[0]


def test_ingest_leaves_the_harness_kernels_out_of_every_frame() -> None:
    from hipdnn_trace.profilers.ingest import ingest

    result = ingest([DATA / "whole_run_no_nvtx_raw_base_units.csv"])
    assert set(result.kernels["name"]) == {"ln_tma_fwd_kernel"} and result.kernels.height == 3
    assert set(result.counters["kernel"]) == {"ln_tma_fwd_kernel"}
    assert set(result.kernel_metrics["kernel"]) == {"ln_tma_fwd_kernel"}
    assert any("158 harness kernel dispatches" in n for n in result.notes)


def test_kernel_metrics_has_every_column_of_the_why_contract() -> None:
    contract = {"graph_id", "config", "iteration", "device", "dispatch_id", "kernel", "duration_ns",
                "sm_throughput_pct", "memory_throughput_pct", "dram_throughput_pct", "l1_throughput_pct",
                "lds_throughput_pct", "l2_throughput_pct", "tensor_pipe_pct", "issue_active_pct",
                "achieved_occupancy_pct", "theoretical_occupancy_pct", "occupancy_limiter", "grid_size", "block_size",
                "waves_per_sm", "sm_count", "registers_per_thread", "shared_memory_per_block", "top_stalls", "limiter",
                "why", "est_speedup_pct"}
    km = frame("gemm_bf16")
    assert contract <= set(km.columns)
    assert km["shared_memory_per_block"][0] > 1024 and km["lds_throughput_pct"].is_null().all()

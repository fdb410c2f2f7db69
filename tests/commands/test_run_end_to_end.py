"""`hipdnn-trace run` on the CPU reference: every file, schemas, stats, trace, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import graph_dicts as hg
import numpy as np
import polars as pl
import pytest

from hipdnn_trace.cli import main
from hipdnn_trace.results import schemas
from hipdnn_trace.results.rundir import load_run
from hipdnn_trace.trace.reader import read_trace


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("suite")
    hg.write(root / "graphs", [hg.matmul(), hg.add_relu(), hg.conv()])
    code = main(["run", str(root / "graphs"), "--out", str(root / "runs"), "--run-id", "r1",
                 "-w", "3", "-i", "25", "--format", "csv,json,parquet", "--quiet"])
    return root / "runs" / "r1", code


def test_every_file_is_written(suite: tuple[Path, int]) -> None:
    folder, code = suite
    assert code == 0
    for name in ("run.json", "summary.csv", "summary.json", "validation.csv", "mismatches.csv",
                 "iterations.parquet", "iterations.csv", "iterations.json", "trace.pftrace"):
        assert (folder / name).is_file(), name


def test_columns_match_the_documented_schemas(suite: tuple[Path, int]) -> None:
    folder, _ = suite
    summary = pl.read_csv(folder / "summary.csv")
    assert summary.columns == list(schemas.SUMMARY)
    iterations = pl.read_parquet(folder / "iterations.parquet")
    assert iterations.columns[: len(schemas.ITERATIONS)] == list(schemas.ITERATIONS)
    validation = pl.read_csv(folder / "validation.csv")
    assert validation.columns == list(schemas.VALIDATION)
    assert set(pl.read_json(folder / "summary.json").columns) == set(schemas.SUMMARY)


def test_summary_statistics_equal_numpy_on_the_raw_samples(suite: tuple[Path, int]) -> None:
    run = load_run(suite[0])
    assert run.summary.height == 3
    for row in run.summary.iter_rows(named=True):
        samples = run.iterations.filter(
            (pl.col("graph_id") == row["graph_id"]) & (pl.col("config") == row["config"])
            & (pl.col("phase") == "timed"))["kernel_ms"].to_numpy()
        assert row["n"] == len(samples) == 25
        assert row["median"] == pytest.approx(np.median(samples), rel=1e-12)
        assert row["mean"] == pytest.approx(np.mean(samples), rel=1e-12)
        assert row["std"] == pytest.approx(np.std(samples, ddof=1), rel=1e-9)
        for key, q in (("p5", 5), ("p25", 25), ("p75", 75), ("p95", 95), ("p99", 99)):
            assert row[key] == pytest.approx(np.percentile(samples, q), rel=1e-12), key
        assert row["iqr"] == pytest.approx(np.percentile(samples, 75) - np.percentile(samples, 25), rel=1e-9)
        assert row["min"] == samples.min() and row["max"] == samples.max()
        assert row["median_ci_low"] <= row["median"] <= row["median_ci_high"]
        warm = run.iterations.filter((pl.col("graph_id") == row["graph_id"]) & (pl.col("phase") == "warmup"))
        assert warm.height == 3
        assert row["status"] == "ok" and row["validation"] == "passed"
        assert row["init_ms"] > 0 and row["e2e_ms"] >= row["init_ms"]


def test_throughput_uses_the_analytical_flops(suite: tuple[Path, int]) -> None:
    run = load_run(suite[0])
    mm = run.summary.filter(pl.col("graph") == "mm_small").row(0, named=True)
    assert mm["flops"] == 2 * 8 * 16 * 4
    assert mm["tflops"] == pytest.approx(mm["flops"] / (mm["median"] * 1e-3) / 1e12)
    conv = run.summary.filter(pl.col("graph") == "conv_small").row(0, named=True)
    assert conv["flops"] == 2 * (2 * 8 * 6 * 6) * (4 * 3 * 3)


def test_run_json_records_the_method(suite: tuple[Path, int]) -> None:
    meta = json.loads((suite[0] / "run.json").read_text())
    assert meta["status"] == "complete"
    assert meta["timing"]["timer"] == "host" and meta["timing"]["iters"] == 25
    assert meta["timing"]["trace_clock"] in ("CLOCK_BOOTTIME", "CLOCK_MONOTONIC")
    assert meta["seed"] == 0 and meta["configs"][0]["backend"] == "reference"
    assert "numpy" in meta["versions"] and meta["machine"]["cpu"]


def test_trace_nests_iterations_inside_execute(suite: tuple[Path, int]) -> None:
    contents = read_trace(suite[0] / "trace.pftrace")
    assert not contents.truncated
    slices = contents.slices
    executes = slices.filter(pl.col("name") == "execute")
    iters = slices.filter(pl.col("name") == "iter")
    assert executes.height == 3 and iters.height == 75
    for ex in executes.iter_rows(named=True):
        inside = iters.filter((pl.col("ts_ns") >= ex["ts_ns"])
                              & (pl.col("ts_ns") + pl.col("dur_ns") <= ex["ts_ns"] + ex["dur_ns"]))
        assert inside.height == 25
        assert (inside["depth"] == ex["depth"] + 1).all()
    assert (iters["ts_ns"].diff().drop_nulls() > 0).sum() >= 72   # ordered in time within graphs
    counter_tracks = contents.counters["track_name"].unique().to_list()
    assert "reference iteration ms" in counter_tracks and "reference TFLOPS" in counter_tracks


def test_validation_rows_name_every_output(suite: tuple[Path, int]) -> None:
    run = load_run(suite[0])
    assert run.validation.height == 3            # one output per graph, against the reference
    assert run.validation["passed"].all()
    assert set(run.validation["against"]) == {"reference"}


@pytest.mark.parametrize("mode", ["log", "LOG", "Sqrt", "RSQRT"])
def test_domain_of_a_pointwise_input_ignores_the_mode_case(mode: str) -> None:
    """hipDNN accepts modes in any case, so log/sqrt inputs stay positive whatever the spelling
    (negative inputs would make the reference NaN and the run fail validation)."""
    from hipdnn_trace.bench.config import Config
    from hipdnn_trace.bench.graph_run import RunSettings, run_graph
    from hipdnn_trace.bench.inputs import make_inputs
    from hipdnn_trace.bench.loop import LoopSettings
    from hipdnn_trace.graph.build import GraphBuilder
    from hipdnn_trace.graph.sources import GraphSource
    from hipdnn_trace.graph.write import dumps
    from hipdnn_trace.markers import Markers

    b = GraphBuilder(f"pw_{mode}")
    x = b.tensor("x", [2, 3, 4, 5])
    b.pointwise(mode, x, out="y")
    graph = b.build()
    assert (make_inputs(graph, 0)[x.uid] > 0).all()
    data = dumps(graph).encode()
    run = run_graph(GraphSource(f"{mode}.json", lambda: data), [Config("reference", "reference")],
                    RunSettings(loop=LoopSettings(warmup=0, iters=1)), Markers())
    assert [c.validation for c in run.configs] == ["passed"]


def test_reference_runs_skip_perf_folders_and_say_how_many(tmp_path: Path, capsys) -> None:
    hg.write(tmp_path / "graphs", [hg.matmul()])
    hg.write(tmp_path / "graphs" / "perf", [hg.conv(), hg.add_relu()])
    argv = ["run", str(tmp_path / "graphs"), "--out", str(tmp_path / "runs"), "-w", "0", "-i", "2"]
    assert main([*argv, "--run-id", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "note: skipped 2 graph(s) in folders named 'perf'" in out
    assert load_run(tmp_path / "runs" / "cpu").summary["graph"].to_list() == ["mm_small"]
    assert main([*argv, "--run-id", "all", "--include-perf"]) == 0
    assert "skipped" not in capsys.readouterr().out
    assert load_run(tmp_path / "runs" / "all").summary.height == 3


def test_library_run_takes_the_cli_options_as_keywords(tmp_path: Path) -> None:
    import hipdnn_trace

    path = hg.write(tmp_path / "g", [hg.matmul()])[0]
    run = hipdnn_trace.run(path, out=tmp_path / "runs", warmup=0, iters=2, a="reference", b="reference",
                           isolate=False, format=["csv"])
    assert run.meta["exit_code"] == 0
    assert run.summary["config"].to_list() == ["reference#A", "reference#B"]
    assert run.meta["isolation"]["enabled"] is False and (run.path / "iterations.csv").is_file()

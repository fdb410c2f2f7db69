"""run --format dnnbench writes ROCm dnn-benchmarking's result file (docs/results-schema.md, version 2):
every documented key present, strict JSON, its graph_id formula and upper-median definition."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl

from hipdnn_trace.cli import main
from hipdnn_trace.results.dnnbench import kernel_stats

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"

#: the keys docs/results-schema.md lists, per object ("Every key in this page is always present")
TOP = {"schema_version", "tool", "run", "environment", "summary", "graphs"}
RUN = {"started_at", "finished_at", "complete", "argv", "config"}
CONFIG = {"backend", "engine_filter", "plugin_paths", "warmup_iters", "iters", "min_time_ms", "cache_mode",
          "timing_block", "seed", "validate", "rtol", "atol", "oracle_mode", "autotune", "cache_dir",
          "pytorch_sdpa_backend", "pytorch_rocm_fa_library", "metrics_tier", "profiling"}
SUMMARY = {"graphs", "rows", "passed", "unchecked", "failed", "skipped", "errors", "graph_errors",
           "no_engine_graphs"}
GRAPH = {"graph_id", "graph_name", "graph_path", "status", "error", "message", "results"}
ROW = {"provider", "role", "engine", "status", "verdict", "message", "started_at", "elapsed_s", "build_ms",
       "timing", "kernel", "host", "metrics", "correctness", "warnings", "oracle", "extra_metrics"}
STATS = {"n", "mean_ms", "std_ms", "cv", "min_ms", "p25_ms", "median_ms", "p75_ms", "p95_ms", "max_ms", "iqr_ms"}
METRICS = {"flops", "flops_partial", "io_bytes", "tflops", "gbps", "workspace_bytes", "vram_mb", "clocks_before",
           "clocks_after"}
CORRECTNESS = {"match", "rtol", "atol", "max_abs_diff", "max_rel_diff", "n_mismatch", "n_total",
               "worst_output_uid", "message"}


def _strict(text: str) -> dict:
    def refuse(name: str) -> None:
        raise AssertionError(f"{name} is not strict JSON")
    return json.loads(text, parse_constant=refuse)


def test_results_file_has_every_documented_key(tmp_path: Path) -> None:
    graphs = [GRAPHS / "pool" / "maxpool_2d_index_fp32.json", GRAPHS / "moe" / "moe_grouped_matmul_none_bf16.json"]
    assert main(["run", *map(str, graphs), "--format", "dnnbench", "--out", str(tmp_path), "--run-id", "d",
                 "-w", "1", "-i", "25", "-q", "--no-trace"]) == 0
    data = _strict((tmp_path / "d" / "results.dnnbench.json").read_text())
    assert set(data) == TOP and data["schema_version"] == 2 and set(data["run"]) == RUN
    assert set(data["run"]["config"]) == CONFIG and set(data["summary"]) == SUMMARY
    assert data["run"]["complete"] is True and data["summary"]["rows"] == data["summary"]["passed"] == 2
    for graph, path in zip(data["graphs"], graphs):
        assert set(graph) == GRAPH
        canonical = json.dumps(json.loads(path.read_bytes()), sort_keys=True, separators=(",", ":"))
        assert graph["graph_id"] == hashlib.sha256(canonical.encode()).hexdigest()[:12]
        (row,) = graph["results"]
        assert set(row) == ROW and set(row["kernel"]) == STATS and set(row["metrics"]) == METRICS
        assert set(row["correctness"]) == CORRECTNESS and row["verdict"] == "passed"
        samples = pl.read_parquet(tmp_path / "d" / "iterations.parquet").filter(
            (pl.col("graph") == graph["graph_name"]) & (pl.col("phase") == "timed"))["kernel_ms"].sort()
        assert row["kernel"]["n"] == 25 and row["kernel"]["median_ms"] == samples[25 // 2]   # upper median


def test_stats_follow_the_schema_definitions() -> None:
    st = kernel_stats([4.0, 1.0, 3.0, 2.0])
    assert st["median_ms"] == 3.0 and st["p95_ms"] is None and st["n"] == 4   # sorted(samples)[n // 2]
    assert st["iqr_ms"] == st["p75_ms"] - st["p25_ms"] and abs(st["cv"] - st["std_ms"] / st["mean_ms"]) < 1e-15


def _run_with_dnnbench(tmp_path: Path) -> Path:
    graphs = [GRAPHS / "pool" / "maxpool_2d_index_fp32.json", GRAPHS / "pool" / "avgpool_include_padding_2d_fp32.json"]
    assert main(["run", *map(str, graphs), "--format", "dnnbench", "--out", str(tmp_path), "--run-id", "a",
                 "-w", "2", "-i", "30", "-q", "--no-trace"]) == 0
    return tmp_path / "a"


def _scaled(path: Path, factor: float, out: Path) -> Path:
    data = json.loads(path.read_text())
    for graph in data["graphs"]:
        for row in graph["results"]:
            for key in ("median_ms", "p25_ms", "p75_ms"):
                row["kernel"][key] *= factor
    out.write_text(json.dumps(data))
    return out


def test_compare_reads_a_dnnbench_file_on_either_side(tmp_path: Path, capsys) -> None:
    run = _run_with_dnnbench(tmp_path)
    capsys.readouterr()   # the run's own output
    own = run / "results.dnnbench.json"
    # the same numbers: ratio 1 exactly; SAME once the band is wider than the notch (a busy machine's
    # 30 samples can have quartiles wider than the default 5% band)
    assert main(["compare", str(run), str(own), "-t", "1.0"]) == 0
    out = capsys.readouterr().out
    assert "2 SAME" in out and "statistics-only comparison" in out
    main(["compare", str(run), str(own), "--format", "json"])
    assert all(r["ratio"] == 1.0 for r in json.loads(capsys.readouterr().out)["rows"])
    slow = _scaled(own, 1.5, tmp_path / "slow.json")
    assert main(["compare", str(run), str(slow), "--format", "json"]) == 3
    result = json.loads(capsys.readouterr().out)
    assert [r["verdict"] for r in result["rows"]] == ["SLOWER", "SLOWER"]
    assert all(abs(r["ratio"] - 1.5) < 1e-9 and r["ci_low"] > 1.05 for r in result["rows"])
    assert main(["compare", str(slow), str(run)]) == 0   # B faster: no regression
    assert "2 FASTER" in capsys.readouterr().out


def test_dnnbench_rows_without_enough_samples_are_inconclusive(tmp_path: Path, capsys) -> None:
    run = _run_with_dnnbench(tmp_path)
    capsys.readouterr()
    data = json.loads((run / "results.dnnbench.json").read_text())
    for graph in data["graphs"]:
        graph["results"][0]["kernel"]["n"] = 3
    few = tmp_path / "few.json"
    few.write_text(json.dumps(data))
    main(["compare", str(run), str(few), "--format", "json"])
    result = json.loads(capsys.readouterr().out)
    assert {r["verdict"] for r in result["rows"]} == {"INCONCLUSIVE"}

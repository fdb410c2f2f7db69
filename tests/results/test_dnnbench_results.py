"""run --format dnnbench writes ROCm dnn-benchmarking's result file in its newest schema-v2 layout
(ROCm/dnn-benchmarking @ 03382e30, src/dnn_benchmarking/reporting/suite_results.py): every key present,
strict JSON rounded to 6 significant digits, its graph_id formula and upper-median definition, the CSV
twin with its ROW_COLUMNS, and no FLOP count for a graph with a node that has no formula."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from pathlib import Path

import polars as pl
import pytest

from hipdnn_trace.cli import main
from hipdnn_trace.results import schemas
from hipdnn_trace.results.dnnbench import ROW_COLUMNS, kernel_stats, to_csv, to_dnnbench
from hipdnn_trace.results.metadata import cpu_model

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"

#: the keys suite_results.py @ 03382e30 writes, per object (every key always present)
TOP = {"schema_version", "tool", "run", "environment", "summary", "graphs"}
RUN = {"started_at", "finished_at", "complete", "argv", "config"}
CONFIG = {"runtime", "engine_filter", "plugin_paths", "warmup_iters", "iters", "min_time_ms", "cache_mode",
          "timing_block", "seed", "validate", "rtol", "atol", "oracle", "autotune", "hipdnn_cache_dir",
          "pytorch_sdpa_backend", "pytorch_rocm_fa_library", "metrics", "profiling"}
PROFILING = {"pmc", "trace", "perf", "roofline"}
ENVIRONMENT = {"hostname", "cpu_model", "cpu_count", "numa_nodes", "total_ram_gb", "kernel_version", "gpu_model",
               "gpu_arch", "gpu_compute_units", "gpu_hbm_gb", "gpu_pcie_link", "amdgpu_driver_version",
               "gpu_power_cap_w", "gpu_max_sclk_mhz", "gpu_compute_partition", "rocm_version", "cuda_version",
               "cudnn_version", "hipdnn_version", "python_version", "torch_version", "amdsmi_available",
               "selection_env"}
SUMMARY = {"graphs", "rows", "passed", "unchecked", "failed", "skipped", "errors", "graph_errors",
           "no_engine_graphs"}
GRAPH = {"graph_id", "graph_name", "graph_path", "status", "error", "message", "results"}
ROW = {"runtime", "role", "engine", "status", "verdict", "message", "started_at", "elapsed_s", "metrics", "ootb",
       "oracle", "oracle_error", "warnings", "extra_metrics"}
ENGINE = {"id", "name", "version"}
METRICS = {"flops", "io_bytes", "clocks_after"}
PLAN = {"build_ms", "timing", "kernel", "host", "workspace_bytes", "tflops", "gbps", "correctness"}
TIMING = {"mode", "timer", "warmup_iters", "first_call_ms", "capped", "fallback_reason", "samples"}
STATS = {"n", "mean_ms", "std_ms", "min_ms", "p25_ms", "median_ms", "p75_ms", "p95_ms", "max_ms"}
CORRECTNESS = {"match", "rtol", "atol", "max_abs_diff", "max_rel_diff", "n_mismatch", "n_total",
               "worst_output_uid", "message"}


def _floats(value: object) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [f for v in value.values() for f in _floats(v)]
    if isinstance(value, list):
        return [f for v in value for f in _floats(v)]
    return []


def _strict(text: str) -> dict:
    def refuse(name: str) -> None:
        raise AssertionError(f"{name} is not strict JSON")
    return json.loads(text, parse_constant=refuse)


def test_results_file_has_every_key_of_the_newest_layout(tmp_path: Path) -> None:
    graphs = [GRAPHS / "pool" / "maxpool_2d_index_fp32.json", GRAPHS / "moe" / "moe_grouped_matmul_none_bf16.json"]
    assert main(["run", *map(str, graphs), "--format", "dnnbench", "--out", str(tmp_path), "--run-id", "d",
                 "-w", "1", "-i", "25", "-q", "--no-trace"]) == 0
    data = _strict((tmp_path / "d" / "results.dnnbench.json").read_text())
    assert set(data) == TOP and data["schema_version"] == 2 and set(data["run"]) == RUN
    config = data["run"]["config"]
    assert set(config) == CONFIG and set(config["profiling"]) == PROFILING and config["runtime"] == "reference"
    assert set(data["environment"]) == ENVIRONMENT and set(data["summary"]) == SUMMARY
    assert data["environment"]["cpu_model"] == cpu_model()   # /proc/cpuinfo "model name", not null
    assert data["run"]["complete"] is True and data["summary"]["rows"] == data["summary"]["passed"] == 2
    assert all(float(f"{f:.6g}") == f for f in _floats(data))   # 6 significant digits, as upstream
    for graph, path in zip(data["graphs"], graphs):
        assert set(graph) == GRAPH
        canonical = json.dumps(json.loads(path.read_bytes()), sort_keys=True, separators=(",", ":"))
        assert graph["graph_id"] == hashlib.sha256(canonical.encode()).hexdigest()[:12]
        (row,) = graph["results"]
        assert set(row) == ROW and set(row["engine"]) == ENGINE and set(row["metrics"]) == METRICS
        assert (row["runtime"], row["role"], row["verdict"]) == ("reference", "engine", "passed")
        plan = row["ootb"]
        assert set(plan) == PLAN and set(plan["timing"]) == TIMING and plan["timing"]["timer"] == "host"
        assert set(plan["kernel"]) == STATS == set(plan["host"]) and set(plan["correctness"]) == CORRECTNESS
        samples = pl.read_parquet(tmp_path / "d" / "iterations.parquet").filter(
            (pl.col("graph") == graph["graph_name"]) & (pl.col("phase") == "timed"))["kernel_ms"].sort()
        assert plan["kernel"]["n"] == plan["timing"]["samples"] == 25
        assert plan["kernel"]["median_ms"] == float(f"{samples[25 // 2]:.6g}")   # upper median, rounded
    lines = list(csv.DictReader(io.StringIO((tmp_path / "d" / "results.dnnbench.csv").read_text())))
    assert tuple(lines[0]) == ROW_COLUMNS and len(lines) == 2
    for line, graph in zip(lines, data["graphs"]):
        kernel = graph["results"][0]["ootb"]["kernel"]
        assert (line["graph_name"], line["runtime"], line["samples"]) == (graph["graph_name"], "reference", "25")
        assert float(line["kernel_median_ms"]) == kernel["median_ms"]
        iqr_pct = (kernel["p75_ms"] - kernel["p25_ms"]) / kernel["median_ms"] * 100
        assert math.isclose(float(line["kernel_iqr_pct"]), iqr_pct, rel_tol=1e-5)


def test_stats_follow_the_schema_definitions() -> None:
    st = kernel_stats([4.0, 1.0, 3.0, 2.0])
    assert st is not None and set(st) == STATS   # no cv, no iqr_ms in the newest layout
    assert st["median_ms"] == 3.0 and st["p95_ms"] is None and st["n"] == 4   # sorted(samples)[n // 2]


def _one_graph_run(tmp_path: Path, nodes: list[dict], status: str = "ok") -> dict:
    source = tmp_path / "g.json"
    source.write_text(json.dumps({"name": "g", "tensors": [], "nodes": nodes}))
    summary = schemas.frame([{"run_id": "r", "graph": "g", "graph_id": "id-g", "config": "cpu", "source": str(source),
                              "backend": "reference", "engine": "default", "n": 2, "median": 2.0, "flops": 4e9,
                              "bytes": 1e6, "status": status, "validation": "passed"}], schemas.SUMMARY)
    iterations = schemas.frame([{"run_id": "r", "graph": "g", "graph_id": "id-g", "config": "cpu", "iteration": i,
                                 "phase": "timed", "kernel_ms": v, "host_ms": v} for i, v in enumerate((1.0, 2.0))],
                               schemas.ITERATIONS)
    meta = {"status": "complete", "timing": {"timer": "host", "warmup": 1}, "machine": {"cpu": "Test CPU"}}
    return to_dnnbench(meta, summary, iterations, schemas.frame([], schemas.VALIDATION))


def test_no_flop_count_when_a_node_has_no_formula(tmp_path: Path) -> None:
    counted = _one_graph_run(tmp_path, [{"type": "PointwiseAttributes"}])["graphs"][0]["results"][0]
    assert counted["metrics"]["flops"] == 4_000_000_000 and counted["ootb"]["tflops"] == 2.0   # 4e9 / 2 ms
    partial = _one_graph_run(tmp_path, [{"type": "PointwiseAttributes"}, {"type": "CustomOpAttributes"}])
    row = partial["graphs"][0]["results"][0]
    assert row["metrics"]["flops"] is None and row["ootb"]["tflops"] is None   # never a partial count
    assert row["metrics"]["io_bytes"] == 1_000_000 and row["ootb"]["gbps"] == 0.5


def test_rows_that_did_not_run_have_no_plan_and_csv_keeps_them(tmp_path: Path) -> None:
    doc = _one_graph_run(tmp_path, [{"type": "PointwiseAttributes"}], status="unsupported")
    row = doc["graphs"][0]["results"][0]
    assert (row["status"], row["verdict"], row["ootb"]) == ("skipped", "skipped", None)
    assert doc["environment"]["cpu_model"] == "Test CPU"   # the run's machine, from run.json
    (line,) = csv.DictReader(io.StringIO(to_csv(doc)))
    assert (line["status"], line["kernel_median_ms"], line["samples"]) == ("skipped", "", "")


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
                row["ootb"]["kernel"][key] *= factor
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
    assert out.startswith("A = a   B = a ")   # the file is named by its run's id, not "results.dnnbench"
    main(["compare", str(run), str(own), "--format", "json"])
    # 1 to the file's precision: upstream writes 6 significant digits, and a sample of 1 ms or more (a busy
    # machine's) has 7 in ns steps, so a median can move by up to 5e-6 of itself
    assert all(r["ratio"] == pytest.approx(1.0, rel=1e-5) for r in json.loads(capsys.readouterr().out)["rows"])
    slow = _scaled(own, 1.5, tmp_path / "slow.json")
    assert main(["compare", str(run), str(slow), "--format", "json"]) == 3
    result = json.loads(capsys.readouterr().out)
    assert [r["verdict"] for r in result["rows"]] == ["SLOWER", "SLOWER"]
    assert all(r["ratio"] == pytest.approx(1.5, rel=1e-5) and r["ci_low"] > 1.05 for r in result["rows"])
    assert main(["compare", str(slow), str(run)]) == 0   # B faster: no regression
    assert "2 FASTER" in capsys.readouterr().out


def test_dnnbench_rows_without_enough_samples_are_inconclusive(tmp_path: Path, capsys) -> None:
    run = _run_with_dnnbench(tmp_path)
    capsys.readouterr()
    data = json.loads((run / "results.dnnbench.json").read_text())
    for graph in data["graphs"]:
        graph["results"][0]["ootb"]["kernel"]["n"] = 3
    few = tmp_path / "few.json"
    few.write_text(json.dumps(data))
    main(["compare", str(run), str(few), "--format", "json"])
    result = json.loads(capsys.readouterr().out)
    assert {r["verdict"] for r in result["rows"]} == {"INCONCLUSIVE"}

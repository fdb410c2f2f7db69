"""``hipdnn-trace ingest`` end to end through ``hipdnn_trace.cli.main`` (exit codes, files, trace)."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest
from amd_fixtures import make_rocpd

from hipdnn_trace.cli import main
from hipdnn_trace.profilers.ingest import ingest
from hipdnn_trace.results.schemas import COUNTERS, KERNELS
from hipdnn_trace.trace.reader import read_trace


def run(*argv: str) -> int:
    return main(["ingest", *map(str, argv)])


def test_harness_capture_directory(data, tmp_path, capsys):
    out = tmp_path / "out"
    assert run(data / "v7_harness", "--out", out) == 0
    for name in ("kernels", "counters", "counters_wide", "kernel_metrics", "agents"):
        assert (out / f"{name}.csv").is_file() and (out / f"{name}.parquet").is_file(), name
    kernels = pl.read_parquet(out / "kernels.parquet")
    assert list(kernels.columns[: len(KERNELS)]) == list(KERNELS)
    assert kernels["run_id"].is_null().all() and kernels["graph"].is_null().all()
    eighth = kernels.filter(pl.col("dispatch_id") == 8)
    assert eighth.select("graph_id", "config", "phase", "iteration", "join").rows() == [
        ("3f9a2c", "conv fwd fp16", "timed", 2, "api")]
    counters = pl.read_csv(out / "counters.csv")
    assert list(counters.columns[: len(COUNTERS)]) == list(COUNTERS)
    assert sorted(set(counters.select("dispatch_id", "iteration").rows())) == [(3, 0), (4, 0), (5, 1)]
    metrics = pl.read_csv(out / "kernel_metrics.csv")
    assert metrics["waves_per_cu"].to_list()[0] == pytest.approx(1024 / 304)  # $cu_count from agent_info
    trace = read_trace(out / "trace.pftrace")
    assert not trace.truncated
    assert set(trace.slices["name"].to_list()) >= {"gemm_kernel", "hipdnn_trace:iter 2", "hipdnn_trace:execute"}
    assert set(trace.counters["track_name"].to_list()) == {"SQ_WAVES", "GRBM_GUI_ACTIVE"}
    gemm = trace.slices.filter(pl.col("name") == "gemm_kernel").sort("ts_ns")
    assert gemm["ts_ns"].to_list() == [7000, 21000, 32000, 42000]  # CLOCK_BOOTTIME ns, unchanged
    manifest = json.loads((out / "ingest.json").read_text())
    assert {f["kind"] for f in manifest["files"]} == {"kernel_trace", "api_trace", "counter_collection", "agent_info"}
    printed = capsys.readouterr().out
    # init_fill (set-up phase) and cleanup (outside the loops) are the harness's: left out
    assert "8 kernels" in printed and "joined to harness iterations" in printed


def test_counter_passes_merge_and_give_verdicts(data, tmp_path):
    out = tmp_path / "out"
    assert run(data / "v3_passes", "--out", out, "--no-trace", "--quiet") == 0
    wide = pl.read_csv(out / "counters_wide.csv")
    assert wide.select("dispatch_id", "kernel", "passes").sort("dispatch_id").rows() == [
        (1, "gemm_kernel", 2), (2, "copy_kernel", 2)]
    assert wide["capture"].unique().to_list() == ["node01"]  # pmc_1 / pmc_2 folded into one capture
    m = pl.read_csv(out / "kernel_metrics.csv").sort("dispatch_id")
    gemm, copy = m.row(0, named=True), m.row(1, named=True)
    assert gemm["tflops"] == pytest.approx(1.024e12 / 1e6 / 1e3)
    assert gemm["verdict"] == "compute-bound" and gemm["pct_peak_compute"] == pytest.approx(100 * 1024 / 1307.4)
    assert copy["dram_gbps"] == pytest.approx((64 * 4e5 + 64 * 4e5) / 1e4)
    assert copy["verdict"] == "memory-bound"
    graphs = pl.read_csv(out / "graphs.csv")
    assert graphs["graph_id"].to_list() == ["3f9a2c"] and graphs["config"].to_list() == ["fp16"]
    assert not (out / "trace.pftrace").exists()


def test_loose_files_and_rocpd_database(data, tmp_path, capsys):
    db = make_rocpd(tmp_path / "run_results.db")
    out = tmp_path / "out"
    assert run(db, data / "v64" / "counter_collection.csv", "--out", out, "--quiet") == 0
    kernels = pl.read_csv(out / "kernels.csv")
    assert kernels.select("name", "source", "iteration").rows() == [("gemm", "rocpd", 0)]
    capsys.readouterr()
    assert run(db, "--out", tmp_path / "again") == 0
    assert capsys.readouterr().out.splitlines()[0] == "read 1 file(s): rocpd"   # not "rocpd rocpd"


def test_legacy_results_set(data, tmp_path):
    out = tmp_path / "out"
    assert run(data / "rocprof_v1", "--out", out, "--quiet", "--format", "rocprof") == 0
    assert pl.read_csv(out / "kernels.csv")["source"].unique().to_list() == ["rocprof"]
    stats = pl.read_csv(out / "stats.csv")
    assert stats["calls"].to_list() == [1, 1]


def test_arch_flag_enables_metrics_for_files_without_agent_info(data, tmp_path):
    out = tmp_path / "out"
    assert run(data / "v64" / "counter_collection.csv", "--out", out, "--quiet",
               "--arch", "gfx942", "--gpu", "MI300X") == 0
    metrics = pl.read_csv(out / "kernel_metrics.csv")
    assert metrics["gpu"].to_list() == ["MI300X", "MI300X"]


def test_malformed_input_exits_1_with_one_line_naming_the_file(data, tmp_path, capsys):
    bad = data / "malformed" / "kernel_trace.csv"
    assert run(bad, "--out", tmp_path / "out") == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(bad) in err and err.startswith("hipdnn-trace ingest: error:")
    assert not (tmp_path / "out").exists()  # nothing written on failure


@pytest.mark.parametrize("args, message", [
    (("nope.csv",), "no such file or directory"),
    (("--format", "rocprofv2"), "--format rocprofv2 given"),
])
def test_bad_invocations(data, tmp_path, capsys, args, message):
    argv = [*args, "--out", tmp_path / "o"] if args[0] == "nope.csv" else [data / "v62" / "kernel_trace.csv", *args,
                                                                          "--out", tmp_path / "o"]
    assert run(*argv) == 1
    assert message in capsys.readouterr().err


def test_unknown_explicit_file_is_an_error_but_skipped_in_a_directory(tmp_path, data, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("just text\n")
    assert run(notes, "--out", tmp_path / "o") == 1
    folder = tmp_path / "capture"
    shutil.copytree(data / "v62", folder)
    (folder / "README.txt").write_text("how this was recorded\n")
    assert run(folder, "--out", tmp_path / "o2", "--quiet") == 0


def test_missing_out_is_an_argparse_error(data, capsys):
    assert main(["ingest", str(data / "v62")]) == 1
    assert "--out" in capsys.readouterr().err


def test_upstream_directories_ingest(upstream, tmp_path):
    """Real captures of every generation go through the whole pipeline."""
    for rel in ("sdk-docs_v1.0.0_rocm7.0", "sdk-docs_rocm6.2.0", "rocpd_batched_gemm_MI300X", "rocprof-v1_kokkos_2021",
                "rocprof-compute_vcopy_MI300X_A1_rocpd", "rocprofv2_goldentraces"):
        result = ingest([upstream / rel])
        assert result.kernels.height or result.counters.height, rel


def test_rocprof_compute_workload_gets_verdicts(upstream, tmp_path):
    out = tmp_path / "bmm"
    assert main(["ingest", str(upstream / "rocprof-compute3.3_bmm1_MI300X"), "--out", str(out),
                 "--quiet", "--no-trace"]) == 0
    metrics = pl.read_parquet(out / "kernel_metrics.parquet")
    gemm = metrics.filter(pl.col("kernel").str.contains("batched_matrix_multiplication")).row(0, named=True)
    # the limiter replaces the FLOP/DRAM verdict (docs/nvidia.md "Why"): 2048 workgroups fill 0.84 of a wave
    assert gemm["gpu"] == "MI300X" and gemm["peak_class"] == "bf16_matrix" and gemm["limiter"] == "parallelism"
    assert "verdict" not in metrics.columns and "0.84 waves" in gemm["why"]
    assert 0 < gemm["tflops"] < 1307.4 and 0 < gemm["dram_gbps"] < 5300


def test_csv_and_rocpd_of_one_run_are_read_once(data, tmp_path):
    capture = tmp_path / "capture"
    shutil.copytree(data / "v7_harness", capture)
    make_rocpd(capture / "hipdnn_trace_results.db")
    result = ingest([capture])
    assert result.kernels.height == 8 and result.kernels["source"].unique().to_list() == ["rocprofv3"]
    assert any("database used for markers only" in n for n in result.notes)


def test_a_malformed_file_in_a_folder_is_listed_and_the_rest_ingested(data, tmp_path, capsys):
    folder = tmp_path / "capture"
    shutil.copytree(data / "v62", folder)
    shutil.copy(data / "malformed" / "kernel_trace.csv", folder / "extra_kernel_trace.csv")
    assert run(folder, "--out", tmp_path / "o") == 0
    assert "skipped malformed file:" in capsys.readouterr().err
    manifest = json.loads((tmp_path / "o" / "ingest.json").read_text())
    assert len(manifest["skipped_malformed"]) == 1 and "extra_kernel_trace.csv" in manifest["skipped_malformed"][0]
    assert manifest["rows"]["kernels"] > 0


def test_frames_without_rows_still_have_a_header(data, tmp_path):
    assert run(data / "v62" / "kernel_trace.csv", "--out", tmp_path / "o", "--quiet") == 0
    wide = pl.read_csv(tmp_path / "o" / "counters_wide.csv")
    assert wide.height == 0 and {"capture", "dispatch_id", "kernel"} <= set(wide.columns)


MEMORY_COPY_CSV = (  # rocprofv3 memory_copy_trace.csv layout (rocprofiler-sdk docs); values our own
    '"Kind","Direction","Stream_Id","Source_Agent_Id","Destination_Agent_Id","Correlation_Id",'
    '"Start_Timestamp","End_Timestamp"\n'
    '"MEMORY_COPY","MEMORY_COPY_HOST_TO_DEVICE",0,"Agent 0","Agent 2",1,1000,5000\n'
    '"MEMORY_COPY","MEMORY_COPY_DEVICE_TO_HOST",0,"Agent 2","Agent 0",2,9000,9500\n')


def test_a_memory_copy_only_capture_is_ingested(tmp_path, capsys):
    capture = tmp_path / "capture"
    capture.mkdir()
    (capture / "memory_copy_trace.csv").write_text(MEMORY_COPY_CSV)
    assert run(capture, "--out", tmp_path / "o") == 0
    assert "2 memory events (2 copies, 0 allocation/scratch)" in capsys.readouterr().out
    memory = pl.read_csv(tmp_path / "o" / "memory.csv")
    assert memory["duration_ns"].to_list() == [4000, 500]
    assert memory["src_agent"].to_list() == [0, 2] and memory["dst_agent"].to_list() == [2, 0]
    assert json.loads((tmp_path / "o" / "ingest.json").read_text())["rows"]["memory"] == 2
    trace = read_trace(tmp_path / "o" / "trace.pftrace")
    copies = trace.slices.sort("ts_ns")
    assert copies["name"].to_list() == ["HOST_TO_DEVICE", "DEVICE_TO_HOST"]
    assert copies["dur_ns"].to_list() == [4000, 500]
    assert "memory copy" in trace.tracks["name"].to_list()


def test_upstream_memory_traces_ingest(upstream, tmp_path):
    folder = upstream / "sdk-docs_v1.0.0_2025-04"
    files = [folder / "memory_copy_trace.csv", folder / "memory_allocation_trace.csv"]
    if not all(f.exists() for f in files):
        pytest.skip("rocprofiler-sdk memory traces not in the shared fixtures")
    result = ingest(files)
    assert result.memory.height > 0 and set(result.memory["kind"]) == {"MEMORY_COPY", "MEMORY_ALLOCATION"}
    assert (result.memory["duration_ns"] >= 0).all()

"""``run --profile ncu``'s collect step on a real H200 report, with a stand-in ncu (no GPU here).

The stand-in prints the raw page of the real `ncu --set full` report of cuDNN's heuristic
LayerNorm-backward plan (tests/data/ncu/ln_bwd_ootb_full_raw.csv), as `ncu --import R --csv
--page raw` would; the run folder is laid out as the child run writes it.
"""

from __future__ import annotations

import argparse
import json
import stat
from pathlib import Path

import polars as pl
import pytest
from repo_paths import TEST_DATA

from hipdnn_trace.profilers.ncu import NcuProfiler

RAW = TEST_DATA / "ncu" / "ln_bwd_ootb_full_raw.csv"
GRAPH_ID, CONFIG = "35ff2b3905203f5a", "cudnn:eng1"


def _stand_in_ncu(tmp_path: Path) -> Path:
    exe = tmp_path / "ncu"
    exe.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && echo 'Version 2025.3.1.0' && exit 0\ncat '{RAW}'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


def _run_folder(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "run.json").write_text(json.dumps({"run_id": "r1", "gpu": {"name": "NVIDIA H200"}}))
    pl.DataFrame({"run_id": ["r1"], "graph": ["ln_bwd"], "graph_id": [GRAPH_ID], "config": [CONFIG],
                  "status": ["ok"], "flops": [1.0e9]}).write_csv(root / "summary.csv")
    return root


def test_collect_writes_why_columns_limiters_and_bottleneck_with_stand_in_ncu(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch,
                                                                               capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("HIPDNN_TRACE_NCU", str(_stand_in_ncu(tmp_path)))
    monkeypatch.setenv("HIPDNN_TRACE_GPU_ARCH", "sm_90")
    folder = _run_folder(tmp_path / "runs" / "r1")
    pass_dir = folder / "passes" / "pass1"
    pass_dir.mkdir(parents=True)
    (pass_dir.parent / "ncu_pass1.ncu-rep").write_bytes(b"report")
    iterations = pl.DataFrame({"run_id": ["r1"], "graph": ["ln_bwd"], "graph_id": [GRAPH_ID], "config": [CONFIG],
                               "phase": ["timed"], "iteration": [0]})
    prof = NcuProfiler()
    args = argparse.Namespace(profile_set=None, device=0, format=["parquet"], graphs=(), oracle=False, a=None)
    assert prof.passes(args) == 2
    assert "replay passes per kernel" in capsys.readouterr().err     # said before anything runs
    prof.check_tool()
    got = prof.collect(folder, [pass_dir], iterations, args)
    km = pl.read_parquet(folder / "kernel_metrics.parquet")
    assert km.height == 3 and set(km["graph_id"]) == {GRAPH_ID}
    assert km.sort("ncu_id")["limiter"].to_list() == ["parallelism", "parallelism", "compute alu"]
    assert "verdict" not in km.columns and {"why", "top_stalls", "waves_per_sm"} <= set(km.columns)
    limiters = pl.read_csv(folder / "graph_limiters.csv")
    assert limiters.sort("share_pct", descending=True)["limiter"].to_list() == ["parallelism", "compute alu"]
    verdicts = got.meta["verdicts"]   # metrics.csv: per graph, the verdict is the dominant limiter
    assert verdicts.select("graph_id", "config", "bottleneck", "verdict").rows() == [
        (GRAPH_ID, CONFIG, "parallelism", "parallelism")]
    assert "parallelism 85%" in verdicts["kernel_verdicts"][0] and "flops_ratio" in verdicts.columns
    assert got.meta["replay_passes_per_kernel"] == 38          # --set full on the H200


def test_a_set_without_the_why_metrics_keeps_the_flop_verdict_with_stand_in_ncu(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch
                                                                                  ) -> None:
    from hipdnn_trace.profilers import ncu_csv

    raw = TEST_DATA / "ncu" / "conv_cudnn_raw_base_units.csv"    # an older set: no memory SOL, no launch limits
    exe = tmp_path / "ncu"
    exe.write_text(f"#!/bin/sh\ncat '{raw}'\n")
    exe.chmod(0o755)
    monkeypatch.setenv("HIPDNN_TRACE_NCU", str(exe))
    monkeypatch.setenv("HIPDNN_TRACE_GPU_ARCH", "sm_90")
    folder = _run_folder(tmp_path / "runs" / "r1")
    (folder / "passes").mkdir()
    (folder / "passes" / "ncu_pass1.ncu-rep").write_bytes(b"report")
    kernels, _ = ncu_csv.frames(ncu_csv.read_raw_csv(raw))
    graph_id, config = kernels.row(0, named=True)["graph_id"], kernels.row(0, named=True)["config"]
    iterations = pl.DataFrame({"run_id": ["r1"], "graph": ["conv"], "graph_id": [graph_id], "config": [config]})
    args = argparse.Namespace(profile_set="roofline", device=0, format=["parquet"], graphs=(), oracle=False, a=None)
    got = NcuProfiler().collect(folder, [folder / "passes" / "pass1"], iterations, args)
    km = pl.read_parquet(folder / "kernel_metrics.parquet")
    assert km.height == 2 and km["limiter"].is_null().all()
    assert km["why"].str.contains("use --profile-set why").all()
    assert pl.read_csv(folder / "graph_limiters.csv")["limiter"].to_list() == ["unclassified"]
    # no kernel has a limiter: summary's bottleneck stays the FLOP/DRAM verdict, never "unclassified"
    assert got.meta["verdicts"]["bottleneck"].to_list() == got.meta["verdicts"]["verdict"].to_list()
    # (that verdict is null here: the capture has ffma but not fadd/fmul, so no FLOP class is computable)
    assert got.meta["verdicts"]["bottleneck"].to_list() == [None]


def test_why_columns_become_counter_tracks_in_the_trace(tmp_path: Path) -> None:
    """The why columns of the real LN-backward oracle run (tests/data/ncu/why_ln_oracle_run) drawn as
    per-kernel counter tracks on traced kernels (times here are stand-ins: the run folder kept no trace)."""
    from hipdnn_trace.profilers.ncu import WHY_TRACKS, why_counters
    from hipdnn_trace.results import schemas
    from hipdnn_trace.results.timeline import add_counters
    from hipdnn_trace.trace import read_trace
    from hipdnn_trace.trace.writer import TraceWriter

    metrics = pl.read_csv(TEST_DATA / "ncu" / "why_ln_oracle_run" / "kernel_metrics.csv", infer_schema_length=None)
    long = why_counters(metrics, schemas.empty(schemas.COUNTERS))
    assert set(long["counter"]) == {f"why {c}" for c in WHY_TRACKS if metrics[c].drop_nulls().len()}
    kernels = metrics.select("run_id", "graph", "graph_id", "config", "iteration", pl.col("kernel").alias("name"),
                             pl.col("dispatch_id").cast(pl.Int64).alias("correlation_id"),
                             pl.col("device").cast(pl.Int64)).with_columns(
        (pl.int_range(pl.len()) * 10_000).alias("start_ns"), (pl.int_range(pl.len()) * 10_000 + 5_000).alias("end_ns"),
        pl.lit("ncu").alias("source"))
    path = tmp_path / "trace.pftrace"
    with TraceWriter(path) as writer:
        placed = add_counters(writer, long, kernels)
    assert placed == long.height
    contents = read_trace(path)
    assert "why sm_throughput_pct" in set(contents.tracks["name"])
    sm = contents.counters.filter(pl.col("track_name") == "why sm_throughput_pct")
    assert sm.height == 2 * metrics["sm_throughput_pct"].drop_nulls().len()   # its value at the start, 0 at the end
    assert sm["value"].max() == pytest.approx(metrics["sm_throughput_pct"].max())

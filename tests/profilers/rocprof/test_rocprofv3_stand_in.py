"""``hipdnn-trace run --profile rocprofv3`` end to end with a stand-in rocprofv3.

No ROCm here. ``tests/support/stand_ins/rocprofv3_stand_in.py`` goes on PATH as ``rocprofv3``: it really
runs the harness child (CPU reference backend) with the stand-in Python ``roctx`` module,
and writes rocprofv3-format CSVs from the marker calls it saw, inventing one kernel per
timed iteration and per init phase. The test checks the whole chain around it: command
lines, counter passes, roctx ranges from the real marker code, parsing, the join of
kernels to iterations, counters, verdicts in summary, tracks in the trace.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from amd_helpers import REPO, STAND_INS, matmul, write_graphs

from hipdnn_trace.results.rundir import load_run


def _tool_env(tmp_path: Path, with_tool: bool = True) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if with_tool:
        tool = bin_dir / "rocprofv3"
        tool.write_text(f"#!{sys.executable}\n" + (STAND_INS / "rocprofv3_stand_in.py").read_text())
        tool.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HIPDNN_TRACE_", "STAND_IN_"))}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}" if with_tool else str(bin_dir)
    env["PYTHONPATH"] = os.pathsep.join([str(STAND_INS), str(REPO)])   # the stand-in roctx module
    env["HIPDNN_TRACE_GPU_ARCH"] = "gfx942"
    return env


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hipdnn_trace", "run", *args], env=env, capture_output=True,
                          text=True, timeout=600)


def _profile(tmp: Path, *extra: str, graphs: int = 2) -> tuple[Path, subprocess.CompletedProcess]:
    graphs = write_graphs(tmp / "graphs", [matmul("mm_a"), matmul("mm_b")][:graphs])
    proc = _run(_tool_env(tmp), *map(str, graphs), "--profile", "rocprofv3", *extra, "-w", "2", "-i", "5",
                "--out", str(tmp / "runs"), "--run-id", "prof", "--format", "csv,parquet")
    return tmp / "runs" / "prof", proc


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """Kernel + marker trace only (no --profile-set): one child run under the tool."""
    return _profile(tmp_path_factory.mktemp("rocprofv3_trace"))


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """--profile-set roofline: pass 0 traces, passes 1..3 collect the counter groups."""
    return _profile(tmp_path_factory.mktemp("rocprofv3_counters"), "--profile-set", "roofline", graphs=1)


def test_traced_run_succeeds_with_stand_in_rocprofv3(traced) -> None:
    folder, proc = traced
    assert proc.returncode == 0, proc.stderr[-2000:]
    for name in ("run.json", "kernels.parquet", "summary.csv", "trace.pftrace"):
        assert (folder / name).is_file(), name
    meta = json.loads((folder / "run.json").read_text())
    (command,) = meta["profile"]["commands"]
    tool, child = command.split(" -- ", 1)
    assert "--kernel-trace --marker-trace" in tool and " -i " not in tool and "--output-format csv" in tool
    assert child.startswith(sys.executable) and "--profile-child rocprofv3 --markers roctx" in child
    assert meta["timing"]["profiler"] == "rocprofv3"


def test_kernels_land_in_their_iterations_with_stand_in_rocprofv3(traced) -> None:
    folder, _ = traced
    run = load_run(folder)
    kernels = pl.read_parquet(folder / "kernels.parquet")
    timed = kernels.filter(pl.col("phase") == "timed")
    iterations = run.iterations.filter(pl.col("phase") == "timed")
    # exactly one stand-in kernel per timed iteration, under the right graph and config
    got = sorted(timed.select("graph_id", "config", "iteration").iter_rows())
    want = sorted(iterations.select("graph_id", "config", "iteration").iter_rows())
    assert got == want and len(want) == 2 * 5
    assert set(timed["run_id"]) == {run.meta["run_id"]} and set(timed["graph"]) == {"mm_a", "mm_b"}
    # the init-phase kernel of each graph (inputs, set-up) is the harness's: left out
    # (profilers/harness_kernels.py)
    assert kernels.filter(pl.col("phase") == "init").height == 0
    # one clock (CLOCK_BOOTTIME): per graph, kernels come in the order of their iterations'
    # host start times, and within the host span of the timed loop
    for graph_id in iterations["graph_id"].unique():
        k = timed.filter(pl.col("graph_id") == graph_id).sort("start_ns")
        h = iterations.filter(pl.col("graph_id") == graph_id).sort("start_ns")
        assert k["iteration"].to_list() == h["iteration"].to_list()
        loop_end = (h["start_ns"] + (h["host_ms"] * 1e6).cast(pl.Int64)).max()
        assert h["start_ns"].min() - 10**8 < k["start_ns"].min() and k["end_ns"].max() < loop_end + 10**8


def test_counter_pass_command_lines_with_stand_in_rocprofv3(counted) -> None:
    folder, proc = counted
    assert proc.returncode == 0, proc.stderr[-2000:]
    meta = json.loads((folder / "run.json").read_text())
    commands = meta["profile"]["commands"]
    assert len(commands) == 1 + len(meta["profile"]["passes"]) == 4     # roofline on gfx942: 3 counter passes
    tools = [c.split(" -- ", 1)[0] for c in commands]
    assert " -i " not in tools[0] and "--selected-regions" not in tools[0]     # pass 0 traces every phase
    for tool in tools[1:]:
        assert " -i " in tool and "_counters.txt" in tool and "--selected-regions" in tool
    for n in (1, 2, 3):
        assert (folder / "passes" / f"pass{n}" / "run.json").is_file(), f"counter pass {n} did not run"


def test_counters_and_verdicts_are_folded_in_with_stand_in_rocprofv3(counted) -> None:
    folder, _ = counted
    counters = pl.read_parquet(folder / "counters.parquet")
    assert counters.height and counters["iteration"].drop_nulls().n_unique() == 5
    assert {"SQ_INSTS_VALU_FMA_F32", "TCC_EA0_RDREQ_sum"} <= set(counters["counter"])
    assert set(counters["graph"].drop_nulls()) == {"mm_a"}
    # --selected-regions passes: only the timed loop was collected, and its dispatches still
    # name their graph (the roctx markers re-open the graph range inside the region)
    assert set(counters["phase"]) == {"timed"} and counters["graph_id"].is_not_null().all()
    summary = pl.read_csv(folder / "summary.csv")
    assert summary["bottleneck"].is_in(["compute-bound", "memory-bound", "latency-bound"]).all()
    assert (folder / "metrics.csv").is_file()


@pytest.mark.parametrize("help_lists_it", [True, False])
def test_counter_passes_are_scoped_when_the_tool_can_with_stand_in_rocprofv3(tmp_path, monkeypatch,
                                                                              help_lists_it: bool) -> None:
    import argparse

    from hipdnn_trace.markers_roctx import REGIONS_ENV
    from hipdnn_trace.profilers.rocprof.runner import Rocprofv3Profiler

    env = _tool_env(tmp_path)
    if not help_lists_it:    # an older rocprofv3 (SDK <= 0.5 has no --selected-regions)
        tool = tmp_path / "bin" / "rocprofv3"
        tool.write_text(tool.read_text().replace("--pmc  --selected-regions", "--pmc"))
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("HIPDNN_TRACE_GPU_ARCH", "gfx942")
    profiler = Rocprofv3Profiler()
    profiler.check_tool()
    args = argparse.Namespace(profile_set="basic", device=0, format=["parquet"])
    child = [sys.executable, "-m", "hipdnn_trace", "run", "g.json"]
    trace = profiler.command(child, tmp_path / "r", 0, args)
    counted_pass = profiler.command(child, tmp_path / "p1", 1, args)
    assert "--selected-regions" not in trace and profiler.env(0) == {}
    if help_lists_it:
        assert counted_pass[counted_pass.index("--") - 1] == "--selected-regions"
        assert profiler.env(1) == {REGIONS_ENV: "1"}
    else:
        assert "--selected-regions" not in counted_pass and profiler.env(1) == {}


def test_missing_rocprofv3_is_one_line_error(tmp_path) -> None:
    graphs = write_graphs(tmp_path / "graphs", [matmul()])
    proc = _run(_tool_env(tmp_path, with_tool=False), str(graphs[0]), "--profile", "rocprofv3",
                "--out", str(tmp_path / "runs"))
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "rocprofv3 not found" in lines[0]

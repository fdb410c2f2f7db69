"""``run --profile rocprofv3/rocprof`` profiler objects, driven the way profilers/external.py drives them.

No AMD GPU or ROCm here: the tool is a stand-in script and the profiler output is our own
fixture capture laid out as the child runs would have written it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
from pathlib import Path

import polars as pl
import pytest

from hipdnn_trace.errors import ToolMissingError, UserError
from hipdnn_trace.profilers.base import load
from hipdnn_trace.profilers.profiles import profile_for_arch
from hipdnn_trace.profilers.rocprof.runner import (
    RocprofLegacyProfiler,
    Rocprofv3Profiler,
    markers_from_iterations,
    requested_counters,
)

CHILD = ["python", "-m", "hipdnn_trace", "run", "g.json", "--profile-child", "rocprofv3", "--markers", "roctx"]


@pytest.fixture
def gfx942(monkeypatch):
    monkeypatch.setenv("HIPDNN_TRACE_GPU_ARCH", "gfx942")


def args(profile_set=None):
    return argparse.Namespace(profile_set=profile_set, device=0, format=["parquet"])


def test_registry_loads_both_amd_profilers():
    assert isinstance(load("rocprofv3")[0], Rocprofv3Profiler)
    assert isinstance(load("rocprof")[0], RocprofLegacyProfiler)


def test_missing_rocprofv3_is_one_line(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ToolMissingError) as info:
        Rocprofv3Profiler().check_tool()
    assert "\n" not in str(info.value)


def test_check_tool_reads_the_version_with_stand_in_rocprofv3(tmp_path, monkeypatch):
    tool = tmp_path / "rocprofv3"
    tool.write_text("#!/bin/sh\necho '    version: 1.0.0'\necho '    rocm_version: 7.0.0'\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    prof = Rocprofv3Profiler()
    prof.check_tool()
    argv = prof.command(CHILD, tmp_path / "run", 0, args())
    assert argv[:6] == [str(tool), "--kernel-trace", "--marker-trace", "--output-format", "csv", "rocpd"]


def test_passes_and_commands_with_stand_in_gpu_arch(gfx942, tmp_path):
    prof = Rocprofv3Profiler()
    a = args("roofline")
    assert prof.passes(a) == 4 and prof.passes(args()) == 1
    main = prof.command(CHILD, tmp_path / "r1", 0, a)
    assert main == ["rocprofv3", "--kernel-trace", "--marker-trace", "--output-format", "csv",
                    "-d", str(tmp_path / "r1" / "rocprofv3"), "-o", "hipdnn_trace", "--", *CHILD]
    second = prof.command(CHILD, tmp_path / "p2", 2, a)
    counters_file = tmp_path / "p2" / "rocprofv3" / "hipdnn_trace_counters.txt"
    assert second[3:5] == ["-i", str(counters_file)]
    pmc = [ln for ln in counters_file.read_text().splitlines() if ln.startswith("pmc:")]
    assert pmc == ["pmc: " + " ".join(prof.plan(a)[1])]
    assert prof.timing_meta(a)["counter_passes"] == 3


def test_profile_set_mixes_presets_and_counters():
    p = profile_for_arch("gfx942")
    got = requested_counters(p, "basic, TCC_HIT_sum")
    assert got[-1] == "TCC_HIT_sum" and set(p.preset("basic").counters) <= set(got)
    with pytest.raises(UserError, match="neither a preset"):
        requested_counters(p, "fastest")


def test_unknown_arch_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("HIPDNN_TRACE_GPU_ARCH", "gfx1201")
    with pytest.raises(UserError, match="no counter profile for gfx1201"):
        Rocprofv3Profiler().passes(args("basic"))


def _iterations(run_id: str, start_shift: int = 0) -> pl.DataFrame:
    return pl.DataFrame({"run_id": [run_id], "graph": ["gemm_graph"], "graph_id": ["3f9a2c"], "config": ["fp16"],
                         "phase": ["timed"], "iteration": [0], "start_ns": [20100 + start_shift], "host_ms": [1.7799]})


def _run_dir(root: Path, run_id: str, flops: float | None = None) -> Path:
    root.mkdir(parents=True)
    (root / "run.json").write_text(json.dumps({"run_id": run_id}))
    if flops is not None:
        pl.DataFrame({"run_id": [run_id], "graph": ["g"], "graph_id": ["3f9a2c"], "config": ["fp16"], "status": ["ok"],
                      "flops": [flops]}).write_csv(
            root / "summary.csv")
    return root


def test_collect_maps_counter_passes_onto_the_measured_run_with_stand_in_output(gfx942, data, tmp_path):
    """pass 0 = the timed run (kernel trace only); passes 1, 2 = the two counter groups."""
    src = data / "v3_passes"
    folder = _run_dir(tmp_path / "runs" / "r1", "r1", flops=1.024e12)
    main = folder / "rocprofv3"
    main.mkdir()
    for f in (src / "pmc_1" / "node01").iterdir():
        if "counter_collection" not in f.name:
            shutil.copy(f, main / f.name)
    pass_dirs = []
    for n in (1, 2):
        pdir = _run_dir(folder / "passes" / f"pass{n}", f"pass{n}")
        shutil.copytree(src / f"pmc_{n}", pdir / "rocprofv3" / "pmc_1")
        pass_dirs.append(pdir)
    prof = Rocprofv3Profiler()
    got = prof.collect(folder, pass_dirs, _iterations("r1"), args())
    k = got.kernels
    assert k.select("dispatch_id", "graph", "graph_id", "config", "phase", "iteration", "run_id", "pass").rows() == [
        (1, "gemm_graph", "3f9a2c", "fp16", "timed", 0, "r1", 0),
        (2, "gemm_graph", "3f9a2c", "fp16", "timed", 0, "r1", 0)]
    c = got.counters
    assert sorted(set(c.select("dispatch_id", "pass").rows())) == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert set(c["correlation_id"].to_list()) == {9, 10}  # pass 0's ids: counters join to kernels
    assert set(c.select("dispatch_id", "start_ns").rows()) == {(1, 21000), (2, 1030000)}  # pass 0's timeline
    verdicts = got.meta["verdicts"]
    assert verdicts.select("graph_id", "config", "bottleneck").rows() == [("3f9a2c", "fp16", "compute-bound")]
    assert verdicts["flops_ratio"].to_list() == [pytest.approx(1.0)]
    assert got.meta["gpu"] == "MI300X" and "data sheet" in got.meta["peaks_source"]
    assert (folder / "kernel_metrics.csv").is_file() and (folder / "counters_wide.parquet").is_file()
    json.dumps({k: v for k, v in got.meta.items() if k != "verdicts"})  # the rest goes to run.json


def test_collect_without_markers_uses_iteration_timestamps_with_stand_in_output(gfx942, data, tmp_path):
    folder = _run_dir(tmp_path / "r2", "r2")
    out = folder / "rocprof"
    out.mkdir()
    shutil.copy(data / "v62" / "kernel_trace.csv", out / "kernel_trace.csv")  # no marker file at all
    its = pl.DataFrame({"run_id": ["r2", "r2"], "graph": ["g", "g"], "graph_id": ["3f9a2c"] * 2, "config": ["a b"] * 2,
                        "phase": ["timed", "timed"], "iteration": [0, 1], "start_ns": [20100, 40000],
                        "host_ms": [0.0099, 0.02]})
    got = RocprofLegacyProfiler().collect(folder, [], its, args())
    assert got.kernels.select("config", "phase", "iteration", "join").rows() == [
        ("a b", "timed", 0, "time"), ("a b", "timed", 1, "time")]


def test_markers_from_iterations():
    m = markers_from_iterations(_iterations("r1"))
    assert m.select("name", "start_ns", "end_ns").rows() == [
        ("hipdnn_trace:graph 3f9a2c fp16", 20100, 1800000), ("hipdnn_trace:execute", 20100, 1800000),
        ("hipdnn_trace:iter 0", 20100, 1800000)]


def test_collect_complains_when_the_tool_wrote_nothing(gfx942, tmp_path):
    folder = _run_dir(tmp_path / "r3", "r3")
    with pytest.raises(UserError, match="wrote no profile"):
        Rocprofv3Profiler().collect(folder, [], _iterations("r3"), args())

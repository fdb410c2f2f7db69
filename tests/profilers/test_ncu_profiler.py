"""ncu profiler: command lines, pass planning, mapping counters onto the traced kernels."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from hipdnn_trace.errors import ToolMissingError
from hipdnn_trace.profilers import ncu


def test_counter_pass_command_scopes_to_timed_iterations() -> None:
    child = ["python", "-m", "hipdnn_trace", "run", "g.json", "--profile-child", "ncu", "--markers", "nvtx"]
    cmd = ncu.ncu_command("/opt/ncu", child, Path("/r/passes/ncu_pass1"), ["gpu__time_duration.sum",
                                                                          "dram__bytes.sum"], "none", 3)
    assert cmd[:3] == ["/opt/ncu", "--nvtx", "--nvtx-include"]
    assert cmd[3] == "regex:hipdnn_trace@execute/iter [0-9]+/"
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--metrics") + 1] == "gpu__time_duration.sum,dram__bytes.sum"
    assert cmd[cmd.index("--export") + 1] == "/r/passes/ncu_pass1"
    tail = cmd[cmd.index("--target-processes") + 2:]
    assert tail[:len(child)] == child
    # argparse keeps the last occurrence: the pass runs 3 timed iterations after 1 warmup, event timed
    assert tail[len(child):] == ["--warmup", "1", "--iters", "3", "--max-iters", "3", "--min-time-ms", "0",
                                 "--no-trace", "--timing", "events"]


def test_timing_pass_traces_kernels_in_process() -> None:
    child = ["run", "g.json", "--profile-child", "ncu", "--markers", "nvtx"]
    assert ncu.timing_child(child, "cupti") == ["run", "g.json", "--profile-child", "cupti", "--markers", "nvtx"]
    assert ncu.timing_child(child, None) == ["run", "g.json", "--markers", "nvtx"]


def test_export_command_is_raw_csv_in_base_units_with_mangled_names() -> None:
    cmd = ncu.export_command("ncu", Path("rep.ncu-rep"))
    assert cmd == ["ncu", "--import", "rep.ncu-rep", "--csv", "--page", "raw", "--print-units", "base",
                   "--print-kernel-base", "mangled"]


def test_missing_ncu_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HIPDNN_TRACE_NCU", str(tmp_path / "nope"))
    monkeypatch.setattr(ncu.os.path, "isfile", lambda p: False)
    with pytest.raises(ToolMissingError, match="ncu.*not found"):
        ncu.find_ncu()


def test_clock_control_and_iterations_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    p = ncu.NcuProfiler()
    assert p.clock_control() == "none" and p.iterations() == 3
    monkeypatch.setenv("HIPDNN_TRACE_NCU_CLOCK_CONTROL", "base")
    monkeypatch.setenv("HIPDNN_TRACE_NCU_ITERS", "5")
    assert p.clock_control() == "base" and p.iterations() == 5
    monkeypatch.setenv("HIPDNN_TRACE_NCU_CLOCK_CONTROL", "fast")
    with pytest.raises(ncu.UserError, match="expected none or base"):
        p.clock_control()


def test_counters_map_to_the_same_kernel_of_the_traced_run() -> None:
    ncu_kernels = pl.DataFrame({"graph_id": ["g"] * 4, "config": ["cudnn:eng0_k2=1"] * 4,
                                "iteration": [0, 0, 1, 1], "name": ["a", "b", "a", "b"],
                                "correlation_id": [10, 11, 12, 13]})
    counters = pl.DataFrame({"graph_id": ["g"] * 4, "config": ["cudnn:eng0_k2=1"] * 4,
                             "iteration": [0, 0, 1, 1], "kernel": ["a", "b", "a", "b"],
                             "correlation_id": [10, 11, 12, 13], "counter": ["x"] * 4, "value": [1.0, 2, 3, 4]})
    traced = pl.DataFrame({"graph_id": ["g"] * 6, "config": ["cudnn:eng0_k2=1"] * 6,
                           "iteration": [0, 0, 1, 1, 2, 2], "name": ["a", "b", "a", "c", "a", "b"],
                           "correlation_id": [100, 101, 102, 103, 104, 105],
                           "start_ns": [1, 5, 10, 15, 20, 25], "end_ns": [4, 9, 14, 19, 24, 29]})
    out, lost = ncu.map_to_trace(ncu_kernels, counters, traced)
    got = dict(zip(out["ncu_id"].to_list(), out["correlation_id"].to_list()))
    assert got == {10: 100, 11: 101, 12: 102, 13: -14}   # iteration 1's 2nd kernel differs by name
    assert lost == 1
    assert out.filter(pl.col("ncu_id") == 11)["start_ns"].item() == 5


def test_relabel_restores_real_config_names() -> None:
    frame = pl.DataFrame({"graph_id": ["g"], "config": ["cudnn_x"]})
    iterations = pl.DataFrame({"graph_id": ["g"], "config": ["cudnn x"], "graph": ["conv"], "run_id": ["r"]})
    out = ncu.relabel(frame, iterations)
    assert out.row(0, named=True) == {"graph_id": "g", "config": "cudnn x", "graph": "conv", "run_id": "r"}

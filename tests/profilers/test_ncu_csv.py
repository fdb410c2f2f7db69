"""ncu ``--csv --page raw`` parsing on files captured on an H200 (tests/data/ncu/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from hipdnn_trace.errors import UserError
from hipdnn_trace.profilers import ncu_csv

DATA = Path(__file__).resolve().parents[1] / "data" / "ncu"
CONV_BASE = DATA / "conv_cudnn_raw_base_units.csv"
CONV_AUTO = DATA / "conv_cudnn_raw_auto_units.csv"
TORCH = DATA / "matmul_bias_gelu_torch_raw_base_units.csv"


def test_header_units_row_and_rows_are_read() -> None:
    table = ncu_csv.read_raw_csv(CONV_BASE)
    assert table.columns[:4] == ["ID", "Process ID", "Process Name", "Host Name"]
    assert table.units["dram__bytes.sum"] == "byte" and table.units["gpu__time_duration.sum"] == "ns"
    assert "ID" not in table.units           # identity columns have no unit
    assert len(table.rows) == 2              # the units row is not a kernel


def test_thousands_separators_and_missing_values() -> None:
    assert ncu_csv.number("4,456,704") == 4456704.0
    assert ncu_csv.number("1,093.33") == pytest.approx(1093.33)
    assert ncu_csv.number("n/a") is None and ncu_csv.number("") is None


@pytest.mark.parametrize("unit,factor,base", [("byte", 1, "byte"), ("Kbyte", 1e3, "byte"), ("Mbyte", 1e6, "byte"),
                                              ("ns", 1, "ns"), ("us", 1e3, "ns"), ("msecond", 1e6, "ns"),
                                              ("Gbyte/second", 1e9, "byte/s"), ("%", 1, "%"), ("", 1, "")])
def test_unit_scaling(unit: str, factor: float, base: str) -> None:
    assert ncu_csv.unit_scale(unit) == (pytest.approx(factor), base)


def test_base_and_automatic_units_give_the_same_values() -> None:
    _, base = ncu_csv.frames(ncu_csv.read_raw_csv(CONV_BASE))
    _, auto = ncu_csv.frames(ncu_csv.read_raw_csv(CONV_AUTO))
    key = ["correlation_id", "counter"]
    joined = base.select(*key, "value", "unit").join(auto.select(*key, pl.col("value").alias("auto"),
                                                                 pl.col("unit").alias("auto_unit")), on=key)
    assert joined.height == base.height
    assert (joined["unit"] == joined["auto_unit"]).all()
    rel = ((joined["value"] - joined["auto"]).abs() / joined["value"].abs().clip(lower_bound=1e-30))
    assert rel.max() < 1e-3     # automatic units print 2 to 6 decimals


def test_nvtx_stack_gives_graph_config_and_iteration() -> None:
    kernels, counters = ncu_csv.frames(ncu_csv.read_raw_csv(CONV_BASE))
    assert kernels["graph_id"].to_list() == ["15e43276107871de"] * 2
    assert kernels["config"].to_list() == ["cudnn"] * 2
    assert kernels["iteration"].to_list() == [0, 1]
    assert kernels["phase"].to_list() == ["timed"] * 2
    assert kernels["duration_ns"].to_list() == [19072, 19488]
    assert kernels.select("grid_x", "grid_y", "block_x").row(0) == (98, 1, 384)
    dram = counters.filter(pl.col("counter") == "dram__bytes.sum")
    assert dram["value"].to_list() == [4456704.0, 4456704.0] and dram["unit"].to_list() == ["byte", "byte"]
    assert not counters["counter"].str.starts_with("device__attribute").any()
    assert not counters["counter"].str.starts_with("launch__").any()


def test_nvtx_cell_with_colons_in_the_range_name() -> None:
    cell = ('12  "hipdnn_trace:graph ab cudnn:eng0_k2=3:none:none:RGB:0xff:REGISTERED:graph ab cudnn:eng0_k2=3"'
            '  "hipdnn_trace:execute:none:none:RGB:0xff:REGISTERED:execute"'
            '  "hipdnn_trace:iter 7:none:none:RGB:0xff:REGISTERED:iter 7" ')
    stack = ncu_csv.nvtx_stack(cell)
    assert stack == [("hipdnn_trace", "graph ab cudnn:eng0_k2=3"), ("hipdnn_trace", "execute"),
                     ("hipdnn_trace", "iter 7")]
    assert ncu_csv.harness_labels(stack) == {"graph_id": "ab", "config": "cudnn:eng0_k2=3", "phase": "timed",
                                             "iteration": 7}


def test_kernels_outside_execute_have_no_iteration() -> None:
    stack = [("hipdnn_trace", "graph ab cudnn"), ("hipdnn_trace", "warmup")]
    assert ncu_csv.harness_labels(stack)["iteration"] is None
    assert ncu_csv.harness_labels([("other", "iter 3")])["iteration"] is None


def test_multi_kernel_iterations_from_two_graphs() -> None:
    kernels, _ = ncu_csv.frames(ncu_csv.read_raw_csv(TORCH))
    per = kernels.group_by("graph_id", "iteration").len().sort("graph_id", "iteration")
    assert per.height == 4                     # two graphs x two timed iterations
    assert set(kernels["config"].to_list()) == {"torch"}
    assert kernels["name"].str.starts_with("_ZN").any()   # mangled names (--print-kernel-base mangled)


def test_requested_metrics_only_and_missing_ones_noted() -> None:
    table = ncu_csv.read_raw_csv(CONV_BASE)
    _, counters = ncu_csv.frames(table, ["dram__bytes.sum", "sm__no_such_metric.sum"])
    assert set(counters["counter"].to_list()) == {"dram__bytes.sum"}
    assert any("sm__no_such_metric.sum" in n for n in table.notes)


def test_profiler_lines_around_the_table_are_skipped() -> None:
    text = "==PROF== Connected to process 1\n" + CONV_BASE.read_text() + "==PROF== Disconnected\n"
    table = ncu_csv.read_raw_csv("stdout", text)
    assert len(table.rows) == 2


def test_not_an_ncu_file_is_a_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "other.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(UserError, match="other.csv: no ncu raw CSV header"):
        ncu_csv.read_raw_csv(bad)
    assert ncu_csv.looks_like_ncu_raw(CONV_BASE.read_text()[:4000])
    assert not ncu_csv.looks_like_ncu_raw("a,b\n1,2\n")


def test_last_loop_keeps_the_measured_loop_after_autotune_candidates() -> None:
    frame = pl.DataFrame({"graph_id": ["g"] * 7, "config": ["c"] * 7,
                          "iteration": [0, 1, 0, 1, 0, 1, 2], "correlation_id": list(range(7))})
    kept = ncu_csv.last_loop(frame)
    assert kept["correlation_id"].to_list() == [4, 5, 6]

"""Parsers on fixtures written here from the documented formats (run without ../shared)."""

from __future__ import annotations

import sqlite3

import pytest
from amd_fixtures import make_rocpd

from hipdnn_trace.errors import UserError
from hipdnn_trace.profilers.rocprof import legacy, rocprofv2, rocprofv3_csv as v3
from hipdnn_trace.profilers.rocprof.detect import check_format, detect
from hipdnn_trace.profilers.rocprof.rocpd_sqlite import read_rocpd
from hipdnn_trace.profilers.rocprof.table import parse_int
from hipdnn_trace.results.schemas import COUNTERS, KERNELS


def test_rocm7_kernel_trace_columns_by_name(data):
    k = v3.read_kernel_trace(data / "v7_harness" / "hipdnn_trace_kernel_trace.csv")
    assert list(k.columns[: len(KERNELS)]) == list(KERNELS)  # schema first, extras after
    row = k.filter(k["dispatch_id"] == 3).row(0, named=True)
    assert row == {**row, "name": "gemm_kernel", "start_ns": 21000, "end_ns": 25000, "duration_ns": 4000,
                   "device": 1, "agent": "Agent 1", "thread_id": 100, "correlation_id": 9, "stream": 1,
                   "grid_x": 65536, "block_x": 256, "source": "rocprofv3", "run_id": None, "iteration": None}


def test_rocm_6_2_0_kernel_trace_without_thread_and_dispatch(data):
    k = v3.read_kernel_trace(data / "v62" / "kernel_trace.csv")
    assert k["thread_id"].is_null().all() and k["dispatch_id"].is_null().all()
    assert k["device"].to_list() == [4, 4] and k["stream"].to_list()[0] == 139690710949888


def test_rocm_6_4_counter_values_fixed_and_exponent(data):
    c = v3.read_counter_collection(data / "v64" / "counter_collection.csv")
    assert c["value"].to_list() == [16384.0, pytest.approx(4.34259040e-02)]
    assert c["device"].to_list() == [4, 4] and c["start_ns"].to_list()[0] == 317095766765717
    assert list(c.columns[: len(COUNTERS)]) == list(COUNTERS)


def test_rocpd_converted_csv(data):
    path = data / "rocpd_csv" / "out_kernel_trace.csv"
    found = detect(path)
    assert (found.kind, found.format) == ("kernel_trace", "rocpd")
    k = v3.read_kernel_trace(path)
    assert k.row(0, named=True)["source"] == "rocpd" and k.row(0, named=True)["name"] == "norm_kernel"


def test_legacy_results_names_lose_code_object_suffixes(data):
    k, c = legacy.read_v1_results(data / "rocprof_v1" / "results.csv")
    assert k["name"].to_list() == ["__amd_rocclr_copyBuffer", "gemm(float*, float*)"]
    assert k["duration_ns"].to_list() == [500, 2000] and c.height == 0
    assert k["source"].unique().to_list() == ["rocprof"]


def test_legacy_stats_rejoin_unquoted_names(data):
    s = v3.read_stats(data / "rocprof_v1" / "results.stats.csv")
    assert s["name"].to_list() == ["void run<Kokkos::RangePolicy<int, long>, 2u>(int, long)",
                                   "__amd_rocclr_copyBuffer.kd"]
    assert s["calls"].to_list() == [1, 1] and s["domain"].to_list() == ["kernel", "kernel"]


def test_legacy_counter_results_with_timestamps(data):
    k, c = legacy.read_v1_results(data / "rocprof_v1_counters" / "results.csv")
    assert k["start_ns"].to_list() == [200]
    assert sorted(zip(c["counter"].to_list(), c["value"].to_list())) == [("GRBM_COUNT", 20000.0), ("SQ_WAVES", 15625.0)]
    assert c["start_ns"].to_list() == [200, 200]


def test_rocprofv2_records_ranges_and_counters(data):
    d = rocprofv2.read_rocprofv2(data / "rocprofv2" / "counters.txt")
    assert d["kernels"].row(0, named=True)["name"] == "vadd(float*, int)"
    assert d["counters"].row(0, named=True)["counter"] == "GRBM_COUNT"
    m = d["markers"].sort("start_ns")
    assert m.select("name", "start_ns", "end_ns").rows() == [("outer", 900, 4000), ("tick", 950, 950)]


def test_parse_record_nested_parentheses_and_quotes():
    rec = rocprofv2.parse_record('Kernel_Name("f(int, (x))"), Begin_Timestamp(5)')
    assert rec == {"Kernel_Name": "f(int, (x))", "Begin_Timestamp": "5"}
    assert rocprofv2.parse_record("Enabling Counter Collection") is None


def test_wide_per_dispatch_file_with_per_channel_counters(data):
    k, c = legacy.read_wide(data / "compute_wide" / "pmc_perf.csv")
    assert sorted(c["counter"].to_list()) == ["SQ_WAVES", "TCC_HIT[0]", "TCC_HIT[1]"]
    assert k.row(0, named=True)["name"] == "vecCopy(double*, double*, double*, int, int)"
    assert k.row(0, named=True)["start_ns"] == 1000 and k.row(0, named=True)["end_ns"] == 21000


def test_malformed_csv_is_one_line_error_naming_file_and_line(data):
    path = data / "malformed" / "kernel_trace.csv"
    with pytest.raises(UserError) as info:
        detect(path)
    assert str(path) in str(info.value) and "line 3" in str(info.value) and "\n" not in str(info.value)


def test_header_split_over_two_lines_is_rejected(tmp_path):
    bad = tmp_path / "kernel_trace.csv"
    bad.write_text('"Kind","Kernel_Name","Workgroup\n_Size_X","Start_Timestamp","End_Timestamp"\n"KERNEL_DISPATCH","k",1,2,3\n')
    with pytest.raises(UserError, match="spans two lines"):
        detect(bad)


def test_bad_number_names_file_line_and_column(tmp_path):
    bad = tmp_path / "kernel_trace.csv"
    bad.write_text('"Kind","Kernel_Name","Start_Timestamp","End_Timestamp"\n"KERNEL_DISPATCH","k",abc,3\n')
    with pytest.raises(UserError, match=r"line 2: column 'Start_Timestamp': not an integer: 'abc'"):
        v3.read_kernel_trace(bad)


def test_missing_required_column(tmp_path):
    bad = tmp_path / "kernel_trace.csv"
    bad.write_text('"Kind","Kernel_Name","Start_Timestamp"\n"KERNEL_DISPATCH","k",1\n')
    with pytest.raises(UserError, match="missing column 'End_Timestamp'"):
        v3.read_kernel_trace(bad)


@pytest.mark.parametrize("text, value", [("12", 12), ("Agent 4", 4), ("GPU 3", 3), ("8.1097E+14", 810970000000000),
                                         ("1248227792617386.5", 1248227792617386), ("", None), ("0x1f", 31)])
def test_parse_int_forms(text, value):
    assert parse_int(text) == value


def test_format_override_rejects_a_file_of_another_kind(data):
    found = detect(data / "rocprof_v1" / "results.csv")
    check_format(found, "rocprof")
    with pytest.raises(UserError, match="--format rocprofv3 given but the file is a rocprof v1 results"):
        check_format(found, "rocprofv3")


def test_rocpd_sqlite_own(tmp_path):
    db = make_rocpd(tmp_path / "run_results.db")
    assert detect(db).kind == "rocpd"
    d = read_rocpd(db)
    assert d["kernels"].select("name", "correlation_id", "dispatch_id", "device", "thread_id").rows() == [
        ("gemm", 9, 3, 1, 100)]
    assert d["markers"]["name"].to_list() == ["hipdnn_trace:iter 0"]
    assert d["api"]["function"].to_list() == ["hipLaunchKernel"]
    assert d["counters"].select("counter", "value", "dispatch_id").rows() == [("SQ_WAVES", 1024.0, 3)]
    assert d["agents"].filter(d["agents"]["type"] == "GPU")["num_xcc"].to_list() == [8]


def test_rocpd_file_is_never_modified(tmp_path):
    db = make_rocpd(tmp_path / "run_results.db")
    before = db.read_bytes()
    read_rocpd(db)
    assert db.read_bytes() == before


def test_sqlite_that_is_not_a_profile(tmp_path):
    db = tmp_path / "other.db"
    con = sqlite3.connect(db)
    con.execute("create table t (x)")
    con.close()
    assert detect(db).kind == "unknown"

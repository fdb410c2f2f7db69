"""Every header generation in ../shared/fixtures/rocprof parses (real files, read in place).

MANIFEST.md there names each file's rocprofiler-sdk / ROCm version; the expectations
below are what that version's generateCSV.cpp (or rocpd, rocprof v1, rocprofv2,
rocprof-compute) writes.
"""

from __future__ import annotations

import pytest
from amd_fixtures import upstream_file

from hipdnn_trace.errors import UserError
from hipdnn_trace.profilers.rocprof import legacy, rocprofv2, rocprofv3_csv as v3
from hipdnn_trace.profilers.rocprof.detect import detect
from hipdnn_trace.profilers.rocprof.rocpd_sqlite import read_rocpd


def test_kernel_trace_rocm_6_2_0_has_no_thread_or_dispatch_and_a_raw_queue_handle(upstream):
    k = v3.read_kernel_trace(upstream_file(upstream, "sdk-docs_rocm6.2.0/kernel_trace.csv"))
    row = k.row(0, named=True)
    assert k.height == 1
    assert row["name"] == "matrixTranspose(float*, float*, int)"
    assert row["thread_id"] is None and row["dispatch_id"] is None
    assert row["stream"] == 139690710949888  # Queue_Id stands in for the missing Stream_Id
    assert row["duration_ns"] == 671599825328 - 671599758568
    assert (row["grid_x"], row["grid_y"], row["block_x"], row["block_y"]) == (1024, 1024, 4, 4)
    assert row["source"] == "rocprofv3"


def test_kernel_trace_rocm_6_2_4_adds_thread_and_dispatch_ids(upstream):
    k = v3.read_kernel_trace(upstream_file(upstream, "sdk-docs_rocm6.2.4/kernel_trace.csv"))
    assert k.height == 7
    assert k["thread_id"].to_list() == [69] * 7
    assert k["dispatch_id"].to_list()[:3] == [1, 5, 2]
    assert k["correlation_id"].to_list()[:3] == [1451, 1484, 1459]
    assert k["device"].to_list() == [1] * 7


def test_kernel_trace_sdk_0_7_adds_stream_id(upstream):
    k = v3.read_kernel_trace(upstream_file(upstream, "sdk-docs_v0.7.0_2025-03/kernel_trace.csv"))
    assert k.height == 8 and k["stream"].to_list()[0] == 1 and k["device"].to_list()[0] == 2


@pytest.mark.parametrize(
    "rel, device, agent",
    [
        ("sdk-docs_v1.0.0_2025-04/kernel_trace.csv", 4, "Agent 4"),      # transitional: Private/Group_Segment_Size
        ("sdk-docs_v1.0.0_rocm7.0/kernel_trace.csv", 4, "Agent 4"),      # 7.0: LDS/VGPR/SGPR columns
        ("sdk-docs_v1.0.0_rocm7.0/kernel_trace_truncated.csv", 4, "Agent 4"),
        ("sdk-howto-using-rocprofv3_v1.0.0/kernel_trace_agent-index-relative.csv", 7, "Agent 7"),
        ("sdk-howto-using-rocprofv3_v1.0.0/kernel_trace_agent-index-type-relative.csv", 3, "GPU 3"),
        ("learn_HIP_R9700_gfx1201/38816_kernel_trace.csv", 1, "Agent 1"),
    ],
)
def test_kernel_trace_rocm_7_agent_labels(upstream, rel, device, agent):
    k = v3.read_kernel_trace(upstream_file(upstream, rel))
    assert k["device"].to_list()[0] == device
    assert k["agent"].to_list()[0] == agent
    assert (k["end_ns"] >= k["start_ns"]).all()


def test_kernel_trace_mangled_names_are_kept_verbatim(upstream):
    k = v3.read_kernel_trace(upstream_file(upstream, "sdk-howto-using-rocprofv3_v1.0.0/123_kernel_trace_mangled.csv"))
    assert k["name"].to_list()[0] == "_Z15addition_kernelIfEvPT_PKfS3_ii.kd"


def test_rocm_6_2_1_openmp_kernel_trace_head(upstream):
    k = v3.read_kernel_trace(upstream_file(upstream, "hpctrain_rocprofv3_openmp_MI300A/omp_kernel_trace.csv"))
    assert k.height == 9 and set(k["device"].to_list()) == {4}


def test_rocpd_converted_csv_leading_guid_and_other_capitalisation(upstream):
    path = upstream_file(upstream, "hpctrain_rocpd_openmp_MI300A/out_kernel_trace.csv")
    assert detect(path).format == "rocpd"
    k = v3.read_kernel_trace(path)
    row = k.row(0, named=True)
    assert row["source"] == "rocpd"
    assert row["name"] == "__omp_offloading_30_57b9f__QMnorm_modPnorm_l23"
    assert row["block_x"] == 256 and row["grid_x"] == 233472 and row["stream"] == 0 and row["dispatch_id"] == 1


@pytest.mark.parametrize(
    "rel, rows, has_times, first_value",
    [
        ("sdk-docs_rocm6.2.0/counter_collection.csv", 1, False, 65536.0),
        ("sdk-docs_rocm6.2.4/counter_collection.csv", 7, False, 16384.0),
        ("sdk-docs_v0.5.0_rocm6.3/counter_collection.csv", 7, True, 16384.0),
        ("sdk-docs_v0.7.0_2025-03/counter_collection.csv", 4, True, 16384.0),
        ("sdk-docs_v1.0.0_rocm7.0/counter_collection.csv", 4, True, 16384.0),
        ("sdk-howto-using-rocprofv3_v1.0.0/312_counter_collection.csv", 4, True, 16384.0),
        ("hpctrain_shallow-water_MI300A/shallow_counter_collection_OccupancyPercent.csv", 8, True, 13.271172),
    ],
)
def test_counter_collection_generations(upstream, rel, rows, has_times, first_value):
    c = v3.read_counter_collection(upstream_file(upstream, rel))
    assert c.height == rows
    assert c["value"].to_list()[0] == pytest.approx(first_value)
    assert c["start_ns"].is_not_null().all() == has_times
    assert c["dispatch_id"].is_not_null().all()


def test_counter_values_in_exponent_notation(upstream):
    c = v3.read_counter_collection(
        upstream_file(upstream, "hpctrain_shallow-water_MI300A/shallow_counter_collection_VALUBusy.csv"))
    assert c["value"].to_list()[1] == pytest.approx(2.48342814e-02)
    assert c["device"].to_list()[0] == 1  # "Agent 1"


@pytest.mark.parametrize("rel", ["sdk-docs_rocm6.2.0/marker_api_trace.csv",
                                 "sdk-docs_v1.0.0_rocm7.0/marker_api_trace.csv"])
def test_marker_trace_ranges_and_marks(upstream, rel):
    m = v3.read_marker_trace(upstream_file(upstream, rel))
    names = m["name"].to_list()
    assert "hipLaunchKernel" in names and "before hipLaunchKernel" in names
    mark = m.filter(m["name"] == "before hipLaunchKernel").row(0, named=True)
    assert mark["start_ns"] == mark["end_ns"]


def test_marker_trace_names_with_commas_and_control_rows(upstream):
    howto = "sdk-howto-using-rocprofv3_v1.0.0"
    k = v3.read_marker_trace(upstream_file(upstream, f"{howto}/210_marker_api_trace_kokkos.csv"))
    assert any("Kokkos::RangePolicy<Kokkos::Serial>, CountFunctor" in n for n in k["name"].to_list())
    c = v3.read_marker_trace(upstream_file(upstream, f"{howto}/210_marker_api_trace_roctx-control.csv"))
    assert "roctxProfilerPause" not in c["name"].to_list()  # MARKER_CONTROL_API rows are not ranges
    assert "HIP_Kernel-1" in c["name"].to_list()


@pytest.mark.parametrize(
    "rel, calls",
    [
        ("hpctrain_jacobi_frontier_MI250X/kernel_stats.csv", 1000),
        ("hpctrain_rocprofv3_openmp_MI300A/omp_kernel_stats.csv", 1001),
        ("sdk-docs_v1.0.0_rocm7.0/hip_api_stats.csv", None),
    ],
)
def test_rocprofv3_stats(upstream, rel, calls):
    s = v3.read_stats(upstream_file(upstream, rel))
    assert s.height > 0 and s["min_ns"].is_not_null().all()
    if calls is not None:
        assert s["calls"].to_list()[0] == calls


def test_agent_info_mi300a(upstream):
    a = v3.read_agent_info(upstream_file(upstream, "hpctrain_rocprofv3_openmp_MI300A/omp_agent_info.csv"))
    gpus = a.filter(a["type"] == "GPU")
    assert gpus.height == 4 and set(gpus["arch"].to_list()) == {"gfx942"}
    assert gpus["num_xcc"].to_list()[0] == 6  # MI300A: 6 XCDs per APU in SPX mode


def test_rocpd_database_kernels_link_to_their_launch_calls(upstream):
    d = read_rocpd(upstream_file(upstream, "rocpd_batched_gemm_MI300X/21_results.db"))
    k, api = d["kernels"], d["api"]
    assert k.height == 301 and k["source"].unique().to_list() == ["rocpd"]
    assert set(k["device"].to_list()) == {2}
    # rocpd keeps the internal correlation id in stack_id: every kernel finds its HIP call
    launches = dict(zip(api["correlation_id"].to_list(), api["function"].to_list()))
    assert all(launches.get(c) in ("hipLaunchKernel", "hipMemset") for c in k["correlation_id"].to_list())
    gpu = d["agents"].filter(d["agents"]["type"] == "GPU").row(0, named=True)
    assert (gpu["arch"], gpu["product"], gpu["num_xcc"], gpu["cu_count"]) == ("gfx942", "AMD Instinct MI300X", 8, 304)


def test_legacy_v1_kernel_trace_results_csv(upstream):
    k, c = legacy.read_v1_results(upstream_file(upstream, "rocprof-v1_gunrock_MI300/results.csv"))
    assert k.height == 56 and c.height == 0
    assert k["name"].to_list()[0] == "__amd_rocclr_copyBuffer"
    assert k["duration_ns"].to_list()[0] == 5573


def test_legacy_v1_counter_results(upstream):
    k, c = legacy.read_v1_results(upstream_file(upstream, "rocprof-v1_HIP_Programming_MI300A/output_vec_add_gpu.csv"))
    assert k.height == 0
    assert dict(zip(c["counter"].to_list(), c["value"].to_list())) == {"GPUBusy": 100.0, "Wavefronts": 15625000.0}
    assert c["kernel"].to_list()[0] == "vector_add(float*, float*, float*, int)"


def test_legacy_stats_with_unquoted_commas(upstream):
    s = v3.read_stats(upstream_file(upstream, "rocprof-v1_kokkos_2021/results.stats.csv"))
    assert s["calls"].is_not_null().all() and s["percentage"].is_not_null().all()
    assert any(n.startswith("void Kokkos::Experimental::Impl::hip_parallel_launch_local_memory<")
               for n in s["name"].to_list())
    assert "Unknown command type" in s["name"].to_list()


@pytest.mark.parametrize("rel, kernels", [
    ("rocprof-v1_gunrock_MI300/results.db", 56),
    ("rocprof-v1_batched_gemm_MI300X/results.db", 1),
    ("rocprof-v1_kokkos_2021/results.db", 12),
])
def test_legacy_results_db(upstream, rel, kernels):
    d = legacy.read_v1_db(upstream_file(upstream, rel))
    assert d["kernels"].height == kernels


def test_rocprofv2_text(upstream):
    d = rocprofv2.read_rocprofv2(upstream_file(upstream, "rocprofv2_goldentraces/hip_vectoradd_golden_traces.txt"))
    assert d["kernels"]["name"].to_list() == ["vectoradd_float"]
    assert d["counters"].row(0, named=True)["value"] == 40539.0
    m = rocprofv2.read_rocprofv2(upstream_file(upstream, "rocprofv2_goldentraces/matrix_transpose_golden_trace.txt"))
    assert m["markers"].height == 50


@pytest.mark.parametrize("rel, source", [
    ("rocprof-compute_vcopy_MI350/pmc_perf_0.csv", "rocprofv2"),
    ("rocprof-compute3.3_bmm1_MI300X/pmc_perf.csv", "rocprof-compute"),
    ("rocprof-compute_vcopy_MI300X_A1_rocprofv2/pmc_perf.csv", "rocprof-compute"),
    ("rocprof-compute_vcopy_MI200_rocprofv1/pmc_perf.csv", "rocprof-compute"),
    ("omniperf-1.0_Axes1_mi200/pmc_perf.csv", "rocprof"),
])
def test_rocprof_compute_wide_files(upstream, rel, source):
    path = upstream_file(upstream, rel)
    found = detect(path)
    k, c = (legacy.read_v1_results(path, found.table) if found.kind == "v1_results"
            else legacy.read_wide(path, found.table))
    assert c.height > 0 and c["source"].unique().to_list() == [source]
    assert not c["counter"].str.contains(r"^(Kernel_ID|Wave_Size|Correlation_ID|obj)(_\d+)?$").any()


def test_rocprof_compute_long_pmc_perf_from_rocpd(upstream):
    path = upstream_file(upstream, "rocprof-compute_vcopy_MI300X_A1_rocpd/pmc_perf.csv")
    assert detect(path).kind == "counter_collection"
    c = v3.read_counter_collection(path)
    assert c.height == 400 and c["device"].to_list()[0] == 2


@pytest.mark.parametrize("rel, where", [
    ("hpctrain_rocprofv3_hip_jacobi/kernel_trace_MALFORMED_excerpt.csv", "spans two lines"),
    ("hpctrain_rocprofv3_hip_jacobi_rocm6.2.1/hip_api_trace_excerpt.csv", "line 5"),
    ("hpctrain_rocprofv3_hip_jacobi_rocm6.2.1/hip_stats_excerpt.csv", "line 7"),
])
def test_malformed_excerpts_are_one_line_errors_naming_the_file(upstream, rel, where):
    path = upstream_file(upstream, rel)
    with pytest.raises(UserError) as info:
        detect(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and where in message


def test_every_upstream_file_is_classified(upstream):
    """No upstream file crashes detection: each is parsed, skipped with a reason, or a clear error."""
    kinds = {}
    for path in sorted(upstream.glob("*/*")):
        if path.name == "MANIFEST.md":
            continue
        try:
            found = detect(path)
        except UserError as exc:
            assert "MALFORMED" in path.name or "excerpt" in path.name, exc
            continue
        kinds[found.kind] = kinds.get(found.kind, 0) + 1
        assert found.kind != "unknown" or path.suffix != ".csv", path
    for kind in ("kernel_trace", "counter_collection", "api_trace", "stats", "agent_info", "rocpd", "v1_results",
                 "v1_db", "wide", "rocprofv2", "sysinfo"):
        assert kinds.get(kind), kind

"""Kernel names demangled on every path a name takes (ingest, a run folder, the trace, ncu's matching), the
mangled name kept; edge cases of names that are not mangled (results/kernel_names.py)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from hipdnn_trace.profilers import ncu
from hipdnn_trace.results.kernel_names import demangle, with_demangled as demangled
from hipdnn_trace.results.schemas import COUNTERS, KERNELS, frame
from hipdnn_trace.trace import read_trace

MANGLED = "mangled_name"
CONV = "_Z33convolve_common_engine_float_NHWCILi3ELi3EEvPKfS1_Pf"
CONV_TEXT = "void convolve_common_engine_float_NHWC<3, 3>(float const*, float const*, float*)"
FILL = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_"


@pytest.mark.parametrize(("raw", "text"), [
    (CONV, CONV_TEXT),
    (FILL, "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
           "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"),
    ("_ZN5cudnn3ops4gemmEv", "cudnn::ops::gemm()"),
])
def test_mangled_names_read_as_cxxfilt_prints_them(raw: str, text: str) -> None:
    assert demangle(raw) == text


@pytest.mark.parametrize("raw", ["main", "triton_poi_fused_add_0", "", "_Zgarbage", "_Z", "void f<int>(int)",
                                 "_Z3foo\nbar", "Cijk_Ailk_Bljk_SB_MT64x64"])
def test_names_that_are_not_mangled_or_do_not_demangle_stay_as_they_are(raw: str) -> None:
    assert demangle(raw) == raw


def test_a_frame_keeps_the_raw_name_and_demangling_twice_changes_nothing() -> None:
    df = frame([{"name": CONV, "start_ns": 1, "end_ns": 2}, {"name": "main"}, {"name": None}], KERNELS)
    once = demangled(df, "name")
    assert once["name"].to_list() == [CONV_TEXT, "main", None]
    assert once[MANGLED].to_list() == [CONV, "main", None]
    assert demangled(once, "name").equals(once)
    counters = demangled(frame([{"kernel": CONV, "counter": "x", "value": 1.0}], COUNTERS), "kernel")
    assert counters.row(0, named=True)["kernel"] == CONV_TEXT and counters.row(0, named=True)[MANGLED] == CONV


def test_ncu_still_matches_a_run_whose_kernels_frame_is_demangled() -> None:
    labels = {"graph_id": ["g"] * 2, "config": ["cudnn"] * 2, "iteration": [0, 0]}
    ncu_kernels = pl.DataFrame({**labels, "name": [CONV, "main"], "correlation_id": [10, 11]})
    counters = pl.DataFrame({**labels, "kernel": [CONV, "main"], "correlation_id": [10, 11], "counter": ["x"] * 2,
                             "value": [1.0, 2.0]})
    traced = demangled(pl.DataFrame({**labels, "name": [CONV, "main"], "correlation_id": [100, 101],
                                     "start_ns": [1, 5], "end_ns": [4, 9]}), "name")
    assert traced["name"].to_list() == [CONV_TEXT, "main"]
    out, lost = ncu.map_to_trace(ncu_kernels, counters, traced)
    assert dict(zip(out["ncu_id"].to_list(), out["correlation_id"].to_list())) == {10: 100, 11: 101}
    assert lost == 0


def test_ingest_writes_demangled_names_and_keeps_the_mangled_one(tmp_path: Path) -> None:
    from repo_paths import TEST_DATA

    from hipdnn_trace.cli import main

    capture = tmp_path / "capture"
    capture.mkdir()
    text = (TEST_DATA / "rocprof" / "v62" / "kernel_trace.csv").read_text()
    (capture / "kernel_trace.csv").write_text(text.replace('"matrixTranspose(float*, float*, int)"', f'"{CONV}"', 1))
    assert main(["ingest", str(capture), "--out", str(tmp_path / "out")]) == 0
    kernels = pl.read_csv(tmp_path / "out" / "kernels.csv")
    pairs = set(kernels.select("name", MANGLED).iter_rows())
    assert (CONV_TEXT, CONV) in pairs
    assert ("matrixTranspose(float*, float*, int)", "matrixTranspose(float*, float*, int)") in pairs
    names = set(read_trace(tmp_path / "out" / "trace.pftrace").slices["name"].to_list())
    assert CONV_TEXT in names and CONV not in names

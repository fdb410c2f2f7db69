"""Demangled kernel names in every frame, the profiler's spelling kept in ``mangled_name`` (issue 33 item 6:
CUPTI's frame and the trace showed ``_Z33convolve_common_engine_float_NHWC...``)."""

from __future__ import annotations

import polars as pl

from hipdnn_trace.results import schemas
from hipdnn_trace.results.kernel_names import demangle, with_demangled

CONV = "_Z33convolve_common_engine_float_NHWCILi3ELi3EEvPKfS1_Pf"
FILL = ("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_")


def test_itanium_names_are_demangled_and_others_kept() -> None:
    assert demangle(CONV) == "void convolve_common_engine_float_NHWC<3, 3>(float const*, float const*, float*)"
    assert demangle(FILL).startswith("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>")
    assert demangle("LayerNormGradBlockSMemImpl") == "LayerNormGradBlockSMemImpl"   # extern "C": as it is
    assert demangle("_Zbad") == "_Zbad"                                              # not a valid name: as it is


def test_a_kernels_frame_keeps_the_profilers_spelling_and_a_second_pass_changes_nothing() -> None:
    frame = schemas.conform(pl.DataFrame({"name": [CONV, "plain", None]}), schemas.KERNELS)
    once = with_demangled(frame)
    assert once["mangled_name"].to_list() == [CONV, "plain", None]
    assert once["name"].to_list() == [demangle(CONV), "plain", None]
    assert with_demangled(once).equals(once)


def test_cupti_and_ingest_frames_are_demangled(tmp_path) -> None:
    """The counter frames' ``kernel`` column too (rocprofv3 through ingest joins kernels and counters by it)."""
    counters = pl.DataFrame({"kernel": [FILL, FILL], "counter": ["SQ_WAVES", "GRBM_COUNT"], "value": [1.0, 2.0]})
    out = with_demangled(counters, "kernel")
    assert set(out["kernel"]) == {demangle(FILL)} and set(out["mangled_name"]) == {FILL}

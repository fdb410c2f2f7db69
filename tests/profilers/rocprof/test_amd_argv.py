"""rocprofv3 / rocprof command lines for every profile preset, and counter pass splitting."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from hipdnn_trace.errors import ToolMissingError, UserError
from hipdnn_trace.profilers.profiles import ProfileError, load_profiles, profile_for_arch
from hipdnn_trace.profilers.rocprof import argv as cmd

CHILD = ["python", "-m", "hipdnn_trace", "run", "g.json", "--profile-child", "rocprofv3"]
OUT = Path("/runs/r1/rocprofv3")
AMD = ["gfx90a", "gfx942", "gfx950"]


def blocks_used(counters, profile):
    used = Counter()
    for hw in {cmd.counter_cost(c, profile) for c in counters}:
        used[hw[0]] += 1
    return used


def test_trace_only_argv():
    c = cmd.rocprofv3_command(CHILD, OUT)
    assert c.argv == ["rocprofv3", "--kernel-trace", "--marker-trace", "--output-format", "csv",
                      "-d", "/runs/r1/rocprofv3", "-o", "hipdnn_trace", "--", *CHILD]
    assert c.files == {} and c.passes == []


def test_trace_argv_with_rocpd_and_api_trace():
    c = cmd.rocprofv3_command(CHILD, OUT, formats=("csv", "rocpd"), api_trace=True, exe="/opt/rocm/bin/rocprofv3")
    assert c.argv[:4] == ["/opt/rocm/bin/rocprofv3", "--kernel-trace", "--marker-trace", "--hip-runtime-trace"]
    assert c.argv[4:7] == ["--output-format", "csv", "rocpd"]


@pytest.mark.parametrize("arch", AMD)
@pytest.mark.parametrize("preset", ["basic", "memory", "compute", "roofline"])
def test_counter_argv_per_preset(arch, preset):
    profile = profile_for_arch(arch)
    counters = profile.preset(preset).counters
    c = cmd.rocprofv3_command(CHILD, OUT, counters=counters, profile=profile)
    input_file = OUT / "hipdnn_trace_counters.txt"
    assert c.argv == ["rocprofv3", "--kernel-trace", "--marker-trace", "-i", str(input_file), "--output-format", "csv",
                      "-d", str(OUT), "-o", "hipdnn_trace", "--", *CHILD]
    lines = [ln for ln in c.files[input_file].splitlines() if ln.startswith("pmc:")]
    assert [tuple(ln.removeprefix("pmc: ").split()) for ln in lines] == c.passes
    assert sorted(x for p in c.passes for x in p) == sorted(counters)
    for p in c.passes:
        for block, n in blocks_used(p, profile).items():
            assert n <= profile.limits[block], (preset, block, p)


def test_gfx942_pass_counts():
    p = profile_for_arch("gfx942")
    passes = [len(cmd.split_passes(p.preset(n).counters, p)) for n in ("basic", "memory", "compute", "roofline")]
    assert passes == [1, 2, 3, 3]


def test_exact_roofline_passes_gfx942():
    p = profile_for_arch("gfx942")
    passes = cmd.split_passes(p.preset("roofline").counters, p)
    assert passes[0] == ("SQ_INSTS_VALU_MFMA_MOPS_F16", "SQ_INSTS_VALU_MFMA_MOPS_BF16", "SQ_INSTS_VALU_MFMA_MOPS_F32",
                         "SQ_INSTS_VALU_MFMA_MOPS_F64", "SQ_INSTS_VALU_MFMA_MOPS_F8", "SQ_INSTS_VALU_ADD_F16",
                         "SQ_INSTS_VALU_MUL_F16", "SQ_INSTS_VALU_FMA_F16", "TCC_BUBBLE_sum", "TCC_EA0_RDREQ_sum",
                         "TCC_EA0_RDREQ_32B_sum", "TCC_EA0_WRREQ_sum")
    assert passes[2] == ("SQ_INSTS_VALU_TRANS_F64",)


def test_derived_counters_sharing_a_base_share_its_slot():
    p = profile_for_arch("gfx942")
    # four TCC counters fill the block; TCC_HIT and TCC_HIT_sum would cost one slot together
    import dataclasses

    from hipdnn_trace.profilers.profiles import CounterSpec
    counters = dict(p.counters, TCC_HIT=CounterSpec("TCC_HIT", "TCC", None))
    q = dataclasses.replace(p, counters=counters)
    names = ["TCC_HIT_sum", "TCC_HIT", "TCC_MISS_sum", "TCC_BUBBLE_sum", "TCC_EA0_RDREQ_sum"]
    assert cmd.split_passes(names, q) == [tuple(names)]


def test_unknown_counter_is_a_profile_error():
    with pytest.raises(ProfileError, match="'SQ_NOT_A_COUNTER' is not declared in gfx942.toml"):
        cmd.split_passes(["SQ_WAVES", "SQ_NOT_A_COUNTER"], profile_for_arch("gfx942"))


def test_ncu_profiles_need_one_pass():
    p = profile_for_arch("sm_90")
    assert cmd.split_passes(p.preset("roofline").counters, p) == [p.preset("roofline").counters]


@settings(max_examples=60, deadline=None)
@given(arch=st.sampled_from(AMD), data=st.data())
def test_pass_splitting_fits_limits_and_is_minimal_per_block(arch, data):
    profile = profile_for_arch(arch)
    names = sorted(profile.counters)
    chosen = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True))
    passes = cmd.split_passes(chosen, profile)
    assert sorted(c for p in passes for c in p) == sorted(chosen)
    for p in passes:
        for block, n in blocks_used(p, profile).items():
            assert n <= profile.limits[block]
    need = max(math.ceil(n / profile.limits[b]) for b, n in blocks_used(chosen, profile).items())
    assert len(passes) == need  # first-fit decreasing is optimal when blocks are independent


def test_rocprof_legacy_argv():
    p = profile_for_arch("gfx90a")
    trace = cmd.rocprof_command(["app", "--x"], Path("/r/rocprof"))
    assert trace.argv == ["rocprof", "--stats", "-d", "/r/rocprof/data", "-o", "/r/rocprof/results.csv", "app", "--x"]
    counters = cmd.rocprof_command(["app"], Path("/r/rocprof"), counters=["GRBM_COUNT", "SQ_WAVES"], profile=p)
    assert counters.argv == ["rocprof", "-i", "/r/rocprof/input.txt", "--timestamp", "on", "--stats",
                             "-d", "/r/rocprof/data", "-o", "/r/rocprof/results.csv", "app"]
    assert "pmc: GRBM_COUNT SQ_WAVES\n" in counters.files[Path("/r/rocprof/input.txt")]


def test_write_files(tmp_path):
    p = profile_for_arch("gfx942")
    c = cmd.rocprofv3_command(CHILD, tmp_path / "rocprofv3", counters=["SQ_WAVES"], profile=p)
    c.write_files()
    assert (tmp_path / "rocprofv3" / "hipdnn_trace_counters.txt").read_text().endswith("pmc: SQ_WAVES\n")


@pytest.mark.parametrize("bad", [dict(formats=("json",)), dict(formats=("csv", "xml")), dict(counters=["SQ_WAVES"])])
def test_bad_requests(bad):
    with pytest.raises(UserError):
        cmd.rocprofv3_command(CHILD, OUT, **bad)


def test_no_child():
    with pytest.raises(UserError, match="no command"):
        cmd.rocprofv3_command([], OUT)


def test_version_output_and_formats():
    text = "    version: 1.0.0\n    git_revision: abc\n    rocm_version: 7.0.0\n"
    info = cmd.parse_version(text)
    assert info["version"] == "1.0.0" and info["rocm_version"] == "7.0.0"
    assert cmd.default_formats("1.0.0") == ("csv", "rocpd")
    assert cmd.default_formats("0.6.0") == ("csv",)
    assert cmd.default_formats(None) == ("csv",)


def test_missing_tool_is_one_line(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ToolMissingError) as info:
        cmd.find_tool("rocprofv3")
    assert "\n" not in str(info.value) and "rocprofv3 not found" in str(info.value)


def test_every_profile_loads():
    assert set(load_profiles()) == {"gfx90a", "gfx942", "gfx950", "sm_80", "sm_90"}

"""Profile files load and are consistent; the formula language is safe and exact."""

from __future__ import annotations

import polars as pl
import pytest

from hipdnn_trace.profilers.expr import ExprError, parse
from hipdnn_trace.profilers.profiles import (
    ProfileError,
    load_peaks,
    load_profile,
    load_profiles,
    normalize_arch,
    profiles_dir,
    select_gpu,
)


def test_every_profile_names_gpus_of_its_arch_in_the_peak_table():
    peaks = load_peaks()
    for arch, profile in load_profiles().items():
        assert profile.gpus, arch
        for name in profile.gpus:
            assert peaks[name].arch == arch
            # every FLOP class the profile counts has a peak on its GPUs (else % of peak undercounts)
            assert set(profile.flops) <= set(peaks[name].tflops), (arch, name,
                                                                   set(profile.flops) - set(peaks[name].tflops))


def test_every_profile_has_the_four_presets_and_roofline_counts_flops_and_bytes():
    for arch, profile in load_profiles().items():
        assert {"basic", "memory", "compute", "roofline"} <= set(profile.presets) <= {
            "basic", "memory", "compute", "roofline", "why"}, arch
        if profile.vendor == "nvidia":   # docs/nvidia.md "Why": the limiter per kernel needs it
            assert "why" in profile.presets and set(profile.preset("roofline").counters) <= set(
                profile.preset("why").counters), arch
        roofline = set(profile.preset("roofline").counters)
        assert profile.flops and all(e.names <= roofline | {"duration_ns"} for e in profile.flops.values()), arch
        assert profile.bytes["dram"].names <= roofline, arch


def test_amd_metric_formulas_use_per_xcd_cycles():
    for arch in ("gfx90a", "gfx942", "gfx950"):
        p = load_profiles()[arch]
        for name in ("valu_util", "mfma_util"):
            assert "num_xcd" in p.metrics[name].expr.constants, (arch, name)


def test_peak_table_is_documented():
    for gpu in load_peaks().values():
        assert gpu.source and gpu.dram_gbps > 0 and gpu.tflops


def test_select_gpu():
    peaks = load_peaks()
    assert select_gpu(peaks, "gfx942", "AMD Instinct MI300X", 304).name == "MI300X"
    assert select_gpu(peaks, "gfx942", "AMD Instinct MI300A Accelerator").name == "MI300A"
    assert select_gpu(peaks, "gfx90a", "AMD Instinct MI250X/MI250", 110).name == "MI250X"
    assert select_gpu(peaks, "gfx90a", "AMD Instinct MI250X/MI250", 104).name == "MI250"
    assert select_gpu(peaks, "gfx950").name == "MI355X"  # the arch's only entry
    assert select_gpu(peaks, "sm_90", "NVIDIA H100 PCIe", 114) is None  # not in the table: no guess
    assert select_gpu(peaks, "gfx942", name="MI300A").name == "MI300A"
    with pytest.raises(ProfileError):
        select_gpu(peaks, "gfx942", name="MI999")


@pytest.mark.parametrize("raw, arch", [("gfx942:sramecc+:xnack-", "gfx942"), ("sm_90a", "sm_90"), ("9.0", "sm_90"),
                                       ("GFX90A", "gfx90a"), (None, None)])
def test_normalize_arch(raw, arch):
    assert normalize_arch(raw) == arch


PROFILE_HEAD = 'schema = 1\nvendor = "amd"\narch = "gfx999"\ntool = "rocprofv3"\n[limits]\nSQ = 8\n'


@pytest.mark.parametrize("body, message", [
    ('[counters]\nSQ_WAVES = "SQ"\n[presets.basic]\ncounters = ["SQ_WAVEZ"]\n',
     "not declared in \\[counters\\]: SQ_WAVEZ"),
    ('[counters]\nSQ_WAVES = "TCC"\n[presets.basic]\ncounters = ["SQ_WAVES"]\n',
     "block 'TCC' has no entry in \\[limits\\]"),
    ('[counters]\nSQ_WAVES = "SQ"\n[flops]\nx = "2 * SQ_CYCLES"\n[presets.basic]\ncounters = ["SQ_WAVES"]\n',
     "flops.x: formula reads undeclared counter\\(s\\) SQ_CYCLES"),
    ('[counters]\nSQ_WAVES = "SQ"\n[metrics.m]\nexpr = "SQ_WAVES / $cus"\n[presets.basic]\ncounters = ["SQ_WAVES"]\n',
     "unknown constant\\(s\\) \\$cus"),
    ('[counters]\nSQ_WAVES = "SQ"\n[metrics.m]\nexpr = "__import__(\'os\').system(\'true\')"\n'
     '[presets.b]\ncounters = []\n',
     "metrics.m.expr"),
    ('[counters\n', "invalid TOML"),
])
def test_profile_mistakes_are_one_line_errors_naming_the_key(tmp_path, body, message):
    path = tmp_path / "gfx999.toml"
    path.write_text(PROFILE_HEAD + body)
    with pytest.raises(ProfileError, match=message) as info:
        load_profile(path)
    assert "\n" not in str(info.value) and "gfx999.toml" in str(info.value)


def test_profiles_dir_override(tmp_path, monkeypatch):
    monkeypatch.setenv("HIPDNN_TRACE_PROFILES", str(tmp_path))
    assert profiles_dir() == tmp_path


@pytest.mark.parametrize("text, value", [
    ("1 + 2 * 3", 7.0), ("(1 + 2) * 3", 9.0), ("-2 * -3", 6.0), ("8 / 4 / 2", 1.0), ("10 - 4 - 3", 3.0),
    ("2e3 + .5", 2000.5), ("min(3, 1, 2)", 1.0), ("max(3, A)", 5.0), ("abs(-A)", 5.0), ("A / 0", None),
    ("A * B", None), ("dram__bytes.sum / 2", 50.0), ("A * $n", 40.0),
])
def test_expression_values(text, value):
    expr = parse(text)
    values = {"A": 5.0, "B": None, "dram__bytes.sum": 100.0}
    assert expr.evaluate(values, {"n": 8}) == value
    frame = pl.DataFrame({"A": [5.0], "B": [None], "dram__bytes.sum": [100.0]}, schema={k: pl.Float64 for k in values})
    assert frame.select(expr.to_polars({"n": 8}).alias("v"))["v"][0] == value  # same in polars


@pytest.mark.parametrize("text", ["1 +", "(1", "1 2", "foo(1)", "max(1)", "a ** 2", "x; y", "__import__('os')", "",
                                  "A[0]"])
def test_expression_errors(text):
    with pytest.raises(ExprError):
        parse(text)


def test_expression_reports_its_inputs():
    e = parse("100 * GRBM_GUI_ACTIVE / ($num_xcd * GRBM_COUNT)")
    assert e.names == {"GRBM_GUI_ACTIVE", "GRBM_COUNT"} and e.constants == {"num_xcd"}
    with pytest.raises(ExprError, match=r"constant \$num_xcd is not known"):
        e.evaluate({"GRBM_GUI_ACTIVE": 1, "GRBM_COUNT": 1})


def test_amd_why_preset_collects_every_speed_of_light_formula():
    for arch in ("gfx942", "gfx950"):
        p = load_profiles()[arch]
        why = set(p.preset("why").counters) | {"duration_ns"}
        sol = {n: m for n, m in p.metrics.items() if n.startswith(("sol_", "spi_"))}
        assert len(sol) == 27, arch
        for name, metric in sol.items():
            assert metric.expr.names <= why, (arch, name, metric.expr.names - why)

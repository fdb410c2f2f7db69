"""Hostile peaks (issue 33 item 7): a peak of ``inf`` or ``1e400`` (TOML reads both as inf) gave a
speed of light of 0 ms, silently. Every reader of peaks now refuses a non-finite or non-positive
peak with one line naming the file and key: device/peaks.toml and ``--peaks FILE`` (device/peaks.py),
profiles/peaks.toml (profilers/profiles.py); run.json's recorded peaks (results/speed_of_light.py)
read as none."""

from __future__ import annotations

from pathlib import Path

import pytest
from one_line import one_line_error
from repo_paths import GRAPHS, REPO

from hipdnn_trace.cli import main
from hipdnn_trace.device.peaks import load
from hipdnn_trace.errors import UserError
from hipdnn_trace.profilers.profiles import load_peaks
from hipdnn_trace.results.speed_of_light import peaks_of

GEMM = GRAPHS / "perf" / "matmul" / "gemm_4096x4096x4096_fp16.json"
BAD = ["inf", "1e400", "-inf", "nan", "0", "-989.4", "true", '"989"']


def _device_table(tmp_path: Path, line: str, value: str) -> Path:
    text = (REPO / "hipdnn_trace" / "device" / "peaks.toml").read_text()
    assert line in text
    out = tmp_path / "peaks.toml"
    out.write_text(text.replace(line, line.split("=")[0] + f"= {value}", 1))
    return out


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize(("line", "key"), [("fp16 = 989.4", "gpus.h100-sxm.tflops.fp16"),
                                           ("hbm_tbs = 3.35", "gpus.h100-sxm.hbm_tbs")])
def test_peaks_file_of_inspect_refuses_a_peak_that_is_not_finite_and_positive(tmp_path: Path, capsys, value,
                                                                               line, key) -> None:
    bad = _device_table(tmp_path, line, value)
    assert main(["inspect", "--json", "--peaks", str(bad), str(GEMM)]) == 1
    one_line_error(capsys, str(bad), key, "must be a positive finite number")


def test_the_unedited_table_still_reads(tmp_path: Path) -> None:
    good = _device_table(tmp_path, "fp16 = 989.4", "989.4")
    assert load(good)["h100-sxm"].tflops["fp16"] == 989.4


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize("key", ["dram_gbps", "tflops.fp16_matrix"])
def test_the_profiles_peak_table_refuses_a_peak_that_is_not_finite_and_positive(tmp_path: Path, value,
                                                                                key) -> None:
    field = key.split(".")[-1]
    lines = (REPO / "profiles" / "peaks.toml").read_text().splitlines()
    section = "[gpus.MI300X.tflops]" if key.startswith("tflops") else "[gpus.MI300X]"
    start = lines.index(section)
    at = next(i for i in range(start, len(lines)) if lines[i].split("=")[0].strip() == field)
    lines[at] = f"{field} = {value}"
    bad = tmp_path / "peaks.toml"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError, match=rf"^peaks\.toml: gpus\.MI300X\.{key} must be a positive finite"):
        load_peaks(bad)


@pytest.mark.parametrize("hbm", [float("inf"), -1.0, 0.0, float("nan")])
def test_run_json_peaks_that_are_not_finite_and_positive_read_as_none(hbm: float) -> None:
    rec = {"name": "h200", "tflops": {"fp16": 989.4}, "hbm_tbs": hbm, "source": "edited"}
    assert peaks_of({"speed_of_light": {"peaks": rec}}) is None
    rec["hbm_tbs"] = 4.8
    assert peaks_of({"speed_of_light": {"peaks": rec}}) is not None

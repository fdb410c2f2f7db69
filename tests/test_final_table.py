"""The suite's ending: an aligned table with adaptive units and the reason for every row that did not
pass (passed rows were printed as they finished), then the count line; -q prints the count line alone."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from repo_paths import GRAPHS

from hipdnn_trace.cli import main
from hipdnn_trace.console import si_rate, table


@pytest.mark.parametrize(("value", "unit", "text"), [
    (1.234e12, "FLOPS", "1.23 TFLOPS"), (4.56e10, "B/s", "45.6 GB/s"), (812e6, "FLOPS", "812 MFLOPS"),
    (3.0, "B/s", "3 B/s"), (0.0, "FLOPS", "0 FLOPS"), (2.5e15, "FLOPS", "2.5 PFLOPS")])
def test_rates_keep_three_significant_digits_with_an_si_prefix(value: float, unit: str, text: str) -> None:
    assert si_rate(value, unit) == text


def test_table_columns_are_aligned() -> None:
    lines = table([("a", "long value", "x"), ("longer name", "v", "y")], ("name", "value", "note"))
    starts = {line.index(cell) for line, cell in zip(lines, ("value", "long value", "v"))}
    assert len(starts) == 1


def _unsupported_graph(tmp_path: Path) -> Path:
    """An RMSNorm whose scale is per channel (spans no trailing dim): every backend refuses it."""
    import json

    raw = json.loads((GRAPHS / "norm" / "rmsnorm_fp32.json").read_text())
    scale = next(t for t in raw["tensors"] if t["name"] == "scale")
    x = next(t for t in raw["tensors"] if t["name"] == "x")
    scale["dims"] = [1] * (len(x["dims"]) - 1) + [1]
    scale["dims"][1] = x["dims"][1]
    scale["strides"] = [1] * len(scale["dims"])
    raw["name"] = "rmsnorm_per_channel"
    path = tmp_path / "suite" / "rmsnorm_per_channel.json"
    path.write_text(json.dumps(raw))
    return path


def test_final_table_lists_only_rows_not_passed_with_their_reason(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "suite").mkdir()
    shutil.copy(GRAPHS / "pool" / "maxpool_2d_index_fp32.json", tmp_path / "suite")
    _unsupported_graph(tmp_path)
    argv = ["run", str(tmp_path / "suite"), "-w", "0", "-i", "3", "--out", str(tmp_path / "runs"), "--no-trace"]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(out) if line.startswith("graph ") and "reason" in line)
    row = out[head + 1]
    assert row.startswith("rmsnorm_per_channel") and "unsupp" in row
    assert "does not span the normalized dims" in row, "the reason is in the table"
    assert out[head].index("status") == row.index("unsupp")
    assert out[head + 2:] == ["(1 passed row(s) not repeated here: see summary.csv)",
                              f"done in {out[-1].split('done in ', 1)[1]}"]
    assert out[-1].startswith("done in") and "1 passed, 0 failed validation, 1 unsupported" in out[-1]


def test_a_suite_that_all_passed_ends_with_the_count_line_alone(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", str(GRAPHS / "pointwise"), "-w", "0", "-i", "2", "--out", str(tmp_path), "--no-trace"]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2].startswith("[18/18] ok") and out[-1].startswith("done in") and "18 passed" in out[-1]


def test_quiet_prints_the_final_line_only(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Not the failures' table, nor the progress line a terminal would show without -q."""
    import sys

    (tmp_path / "suite").mkdir()
    shutil.copy(GRAPHS / "pool" / "maxpool_2d_index_fp32.json", tmp_path / "suite")
    _unsupported_graph(tmp_path)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)   # as on a terminal: progress is on by default
    argv = ["run", str(tmp_path / "suite"), "-w", "0", "-i", "3", "--out", str(tmp_path / "runs"), "--no-trace"]
    assert main([*argv, "--run-id", "loud"]) == 0
    assert "1/2" in capsys.readouterr().err   # the progress line
    assert main([*argv, "--run-id", "quiet", "-q"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    (line,) = captured.out.splitlines()
    assert line.startswith("done in") and "1 passed, 0 failed validation, 1 unsupported, 0 errored" in line


def test_mismatch_report_against_the_reference_has_one_reference_column(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # exact comparison: a float32 gelu cannot equal its float64 reference everywhere
    main(["run", str(GRAPHS / "pointwise" / "gelu_fp32.json"), "-w", "0", "-i", "2",
          "--out", str(tmp_path / "runs"), "--no-trace", "--rtol", "0", "--atol", "0"])
    out = capsys.readouterr().out.splitlines()
    header = next(line for line in out if line.strip().startswith("index") and "actual" in line)
    assert header.split() == ["index", "actual", "reference", "abs", "err", "rel", "err", "err/allowed"]

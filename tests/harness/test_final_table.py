"""The suite's ending: an aligned table with adaptive units and the reason for every row that did not
pass, shown even with -q, so a reason never scrolls away."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hipdnn_trace.cli import main
from hipdnn_trace.console import si_rate, table

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"


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


@pytest.mark.parametrize("quiet", [False, True])
def test_final_table_lists_every_row_and_the_reason_even_quiet(tmp_path: Path, quiet: bool,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "suite").mkdir()
    shutil.copy(GRAPHS / "pool" / "maxpool_2d_index_fp32.json", tmp_path / "suite")
    _unsupported_graph(tmp_path)
    argv = ["run", str(tmp_path / "suite"), "-w", "0", "-i", "3", "--out", str(tmp_path / "runs"), "--no-trace"]
    assert main(argv + (["-q"] if quiet else [])) == 0
    out = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(out) if line.startswith("graph ") and "reason" in line)
    rows = out[head + 1: head + 3]
    assert rows[0].startswith("maxpool_2d_index_fp32") and " ok " in rows[0] and "FLOPS" in rows[0]
    assert rows[1].startswith("rmsnorm_per_channel") and "unsupp" in rows[1]
    assert "does not span the normalized dims" in rows[1], "the reason is in the table"
    assert out[head].index("status") == rows[0].index("ok") == rows[1].index("unsupp")
    assert out[-1].startswith("done in")


def test_mismatch_report_against_the_reference_has_one_reference_column(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # exact comparison: a float32 gelu cannot equal its float64 reference everywhere
    main(["run", str(GRAPHS / "pointwise" / "gelu_fp32.json"), "-w", "0", "-i", "2",
          "--out", str(tmp_path / "runs"), "--no-trace", "--rtol", "0", "--atol", "0"])
    out = capsys.readouterr().out.splitlines()
    header = next(line for line in out if line.strip().startswith("index") and "actual" in line)
    assert header.split() == ["index", "actual", "reference", "abs", "err"]

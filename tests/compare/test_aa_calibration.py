"""benchmarks/aa_calibration.py, synthetic mode: the rule's A/A promise on a small suite."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "aa_calibration.py"


def _load():
    if not SCRIPT.exists():
        pytest.skip("benchmarks/ not in this checkout")
    spec = importlib.util.spec_from_file_location("aa_calibration", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_synthetic_aa_false_rate_is_within_five_percent(tmp_path: Path, capsys) -> None:
    out = tmp_path / "aa.json"
    code = _load().main(["--suites", "3", "--graphs", "20", "--iters", "50", "100",
                         "--drift", "0.02", "--json", str(out)])
    result = json.loads(out.read_text())
    assert code == 0
    assert result["aa"]["rows"] == 60
    assert result["aa"]["false_verdict_rate"] <= 0.05
    assert result["shift_10pct_n_ge_50"]["slower_rate"] > 0.2  # a true 10% change is found
    assert "false-verdict rate" in capsys.readouterr().out

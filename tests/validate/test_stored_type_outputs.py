"""Boolean, fp4 and fp6 outputs are judged in their own type, as hipDNN's ``allClose`` compares in the
output type after ``safeConvert`` (issue 25: a matmul of booleans or of fp4 tensors failed against its own
float64 reference, "actual 6, reference 109.5", "8192/8192 outside atol 0 rtol 0")."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from hipdnn_trace.cli import main
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.validate.compare import compare_tensor
from hipdnn_trace.validate.stored import allowed_range, judged_in_stored_type


def test_which_types_are_judged_in_their_own_type() -> None:
    assert all(judged_in_stored_type(t) for t in ("boolean", "fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "int8"))
    assert not any(judged_in_stored_type(t) for t in ("float", "half", "bfloat16", "fp8_e4m3", None))


def test_a_boolean_holds_whether_the_reference_is_non_zero() -> None:
    expected = np.array([27.0, 0.0, -3.0, 0.0])
    assert compare_tensor(expected != 0, expected, atol=0, rtol=0, dtype="boolean").passed
    wrong = compare_tensor(np.array([False, False, True, True]), expected, atol=0, rtol=0, dtype="boolean")
    assert not wrong.passed and wrong.mismatches == 2   # elements 0 and 3
    assert "2/4 elements that no boolean conversion of the reference gives" in wrong.message()
    low, high = allowed_range(np.array([0.05, np.nan]), "boolean", atol=0.1, rtol=0.0)
    assert (low[0], high[0]) == (0.0, 1.0) and low[1] > high[1]   # within tolerance of 0: either; NaN: none


def test_fp4_saturates_and_rounds_like_the_reference() -> None:
    fp4 = ml_dtypes.float4_e2m1fn
    expected = np.array([109.5, -109.5, 0.24, 2.6])
    stored = expected.astype(fp4)            # 6, -6, 0, 3: hipDNN's safeConvert (saturating, nearest even)
    result = compare_tensor(stored, expected, atol=0.0, rtol=0.0, dtype="fp4_e2m1")
    assert result.passed, result.message()
    assert "fp4_e2m1 conversion of the reference (rounded to nearest even, saturated" in result.message()
    wrong = np.array([4.0, -6.0, 0.0, 3.0]).astype(fp4)    # 4 is no conversion of anything near 109.5
    failed = compare_tensor(wrong, expected, atol=0.0, rtol=0.0, dtype="fp4_e2m1")
    assert not failed.passed and failed.mismatches == 1 and list(failed.worst_index) == [0]


def test_the_tolerance_widens_the_range_before_conversion() -> None:
    low, high = allowed_range(np.array([2.6]), "fp6_e2m3", atol=0.0, rtol=0.1)   # [2.34, 2.86]
    assert (float(low[0]), float(high[0])) == (2.25, 2.75)   # spacing 0.25 in [2, 4)


def test_boolean_outputs_on_a_torch_device_judge_alike() -> None:
    torch = pytest.importorskip("torch")
    expected = torch.tensor([27.0, 0.0, -3.0], dtype=torch.float64)
    assert compare_tensor(expected != 0, expected, atol=0, rtol=0, dtype="boolean").passed
    assert not compare_tensor(torch.tensor([True, True, True]), expected, atol=0, rtol=0, dtype="boolean").passed


@pytest.mark.parametrize("dtype", ["boolean", "fp4_e2m1", "fp6_e2m3"])
def test_a_matmul_inspect_says_can_run_passes_against_its_reference(dtype: str, tmp_path: Path, capsys) -> None:
    b = GraphBuilder(f"matmul_{dtype}", io=dtype)
    b.matmul(b.tensor("a", [1, 64, 128]), b.tensor("b", [1, 128, 64]), out="c")
    path = tmp_path / f"matmul_{dtype}.json"
    path.write_text(json.dumps(b.to_json()))
    assert main(["inspect", "--json", str(path)]) == 0
    [info] = json.loads(capsys.readouterr().out)
    assert next(v for v in info["backends"] if v["name"] == "reference")["supported"] is True
    assert main(["run", str(path), "--iters", "2", "--warmup", "1", "--out", str(tmp_path / "runs")]) == 0
    assert "1 passed" in capsys.readouterr().out

"""compare refuses (or, when allowed, flags) runs taken under different --clocks policies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hipdnn_trace.cli import main
from hipdnn_trace.compare import TimingMismatchError, compare_runs


def _with_clocks(run: Path, clocks: dict[str, Any] | None) -> Path:
    meta = json.loads((run / "run.json").read_text())
    if clocks is not None:
        meta["clocks"] = clocks
        meta["timing"]["clock_lock"] = clocks["policy"] if clocks["policy"] != "off" else None
    (run / "run.json").write_text(json.dumps(meta))
    return run


LOCKED = {"policy": "lock-max", "state": "locked", "requested": {"sm_mhz": 1980, "mem_mhz": 2619}}
OFF = {"policy": "off", "state": "off"}
REFUSED = {"policy": "lock-max", "state": "unlocked (permission denied: locking clocks needs root)"}


def _pair(make_run, timings, clocks_a, clocks_b) -> tuple[Path, Path]:
    a = _with_clocks(make_run("A", {"g": timings(1, 0.05, 20)}), clocks_a)
    b = _with_clocks(make_run("B", {"g": timings(1, 0.05, 20)}), clocks_b)
    return a, b


def test_different_clock_policies_are_refused_in_one_line(make_run, timings, capsys) -> None:
    a, b = _pair(make_run, timings, LOCKED, OFF)
    with pytest.raises(TimingMismatchError, match=r"clock policy: 'lock-max' vs 'off'.*--allow-clock-mismatch"):
        compare_runs(a, b)
    assert main(["compare", str(a), str(b)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--allow-clock-mismatch" in err[0]


def test_allowed_clock_mismatch_is_flagged_in_the_output(make_run, timings, capsys) -> None:
    a, b = _pair(make_run, timings, LOCKED, OFF)
    allowed = compare_runs(a, b, allow_clock_mismatch=True)
    assert "clock policy: 'lock-max' vs 'off'" in allowed.method_differences
    assert any(n.startswith("clocks differ (allowed)") for n in allowed.notes)
    assert main(["compare", str(a), str(b), "--allow-clock-mismatch"]) == 0
    assert "clocks differ (allowed)" in capsys.readouterr().out
    with pytest.raises(TimingMismatchError):   # --allow-mismatch is about other fields
        compare_runs(a, b, allow_mismatch=True)


def test_a_refused_lock_counts_as_unlocked_and_says_why(make_run, timings) -> None:
    a, b = _pair(make_run, timings, LOCKED, REFUSED)
    with pytest.raises(TimingMismatchError, match=r"'lock-max' vs 'off' \(B unlocked \(permission denied"):
        compare_runs(a, b)


@pytest.mark.parametrize("clocks_a, clocks_b", [(LOCKED, LOCKED), (OFF, REFUSED), (None, OFF)])
def test_same_effective_policies_compare(make_run, timings, clocks_a, clocks_b) -> None:
    a, b = _pair(make_run, timings, clocks_a, clocks_b)   # None: a run from before --clocks
    assert compare_runs(a, b).method_differences == []

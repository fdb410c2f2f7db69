"""The command's wall by phase (runs/phases.py, run.json ``phases_s``)."""

from __future__ import annotations

import json
from pathlib import Path

import hipdnn_trace
from hipdnn_trace.runs.phases import PhaseClock, process_age_s

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"


def test_phases_follow_each_other_and_never_go_back(monkeypatch):
    now = [100.0]
    monkeypatch.setattr("hipdnn_trace.runs.phases.time.monotonic", lambda: now[0])
    monkeypatch.setattr("hipdnn_trace.runs.phases.process_age_s", lambda: 2.5)
    clock = PhaseClock()            # the process started 2.5 s ago
    clock.mark("before_plan")
    now[0] = 100.25
    clock.mark("plan")
    clock.mark("set_up")            # nothing between: zero
    now[0] = 103.0
    clock.mark("set_up", at=101.0)  # the workers were set up at 101 (a later mark adds to the phase)
    clock.mark("graphs")
    clock.mark("close", at=99.0)    # a time before the last mark counts as nothing
    assert clock.seconds() == {"before_plan": 2.5, "plan": 0.25, "set_up": 0.75, "graphs": 2.0, "close": 0.0}


def test_this_process_has_an_age():
    age = process_age_s()
    assert age is None or 0.0 <= age < 24 * 3600


def test_a_run_records_its_phases(tmp_path):
    run = hipdnn_trace.run([str(GRAPHS / "pointwise" / "gelu_fp32.json")], out=tmp_path, iters=2, warmup=0)
    record = json.loads((run.path / "run.json").read_text())
    phases = record["phases_s"]
    assert list(phases) == ["before_plan", "plan", "set_up", "graphs", "close"]
    assert all(v >= 0 for v in phases.values())
    # elapsed_s starts after the run folder exists (inside set_up) and ends where close does
    assert phases["set_up"] + phases["graphs"] + phases["close"] >= record["elapsed_s"] - 0.003

"""A FAILED row blames the library only after another kernel of the same library passed on the same
inputs (bench/recheck.py). The library is a stand-in with two kernels (two_kernel_backend.py): no GPU
here. The torch rule (its math SDPA kernel) is tested in tests/gpu/test_cuda_backends.py on a GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reliability_helpers import graph_json
from two_kernel_backend import NAME, SPEC

import hipdnn_trace
from hipdnn_trace import backends


@pytest.fixture
def two_kernels(monkeypatch):
    monkeypatch.setitem(backends.REGISTRY, NAME, SPEC)


def _run(tmp_path: Path, mode: str) -> dict:
    path = tmp_path / f"{mode}.json"
    path.write_text(json.dumps(graph_json(f"{mode}__g")))
    run = hipdnn_trace.run(str(path), out=tmp_path / "runs", backend=NAME, iters=2, warmup=0, isolate=False)
    rows = run.summary.to_dicts()
    assert len(rows) == 1
    return rows[0]


def test_stand_in_first_kernel_wrong_second_right_blames_the_library(tmp_path, two_kernels):
    row = _run(tmp_path, "firstbad")
    assert row["status"] == "failed"
    assert "twokernel plan good passes on the same inputs" in row["error"]
    assert "the fault is this twokernel kernel's, not the harness's" in row["error"]


def test_stand_in_both_kernels_wrong_attributes_nothing(tmp_path, two_kernels):
    row = _run(tmp_path, "bothbad")
    assert row["status"] == "failed"
    assert "twokernel plan good fails too" in row["error"]
    assert "fault not attributed" in row["error"]
    assert "the fault is this" not in row["error"]


def test_stand_in_second_kernel_that_cannot_run_attributes_nothing(tmp_path, two_kernels):
    row = _run(tmp_path, "secondraises")
    assert row["status"] == "failed"
    assert "recheck on twokernel plan good could not run" in row["error"]
    assert "the second kernel refuses this graph" in row["error"]


def test_stand_in_library_with_one_kernel_is_not_rechecked(tmp_path, two_kernels):
    row = _run(tmp_path, "onlyone")
    assert row["status"] == "failed"
    assert "passes on the same inputs" not in row["error"] and "fault" not in row["error"]


def test_a_passing_row_is_never_rechecked(tmp_path, two_kernels, monkeypatch):
    from hipdnn_trace.bench import recheck

    asked = []
    monkeypatch.setattr(recheck, "second_opinion", lambda *a: asked.append(a))
    path = tmp_path / "fine.json"
    path.write_text(json.dumps(graph_json("fine__g")))
    run = hipdnn_trace.run(str(path), out=tmp_path / "runs", backend="reference", iters=2, warmup=0, isolate=False)
    assert run.summary["status"].to_list() == ["ok"]
    assert asked == []

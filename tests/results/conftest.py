"""Fixtures the results/ tests share."""

from __future__ import annotations

from pathlib import Path

import graph_dicts as hg
import pytest
from oracle_backends import TWO_SPEED_SPEC

from hipdnn_trace import backends
from hipdnn_trace.cli import main

SUPPORT = Path(__file__).resolve().parents[1] / "support"


@pytest.fixture
def oracle_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An --oracle run on the STAND-IN autotuning backend (tests/support/oracle_backends.py; no GPU here)."""
    monkeypatch.syspath_prepend(str(SUPPORT))
    monkeypatch.setitem(backends.REGISTRY, "twospeed", TWO_SPEED_SPEC)
    paths = hg.write(tmp_path / "g", [hg.matmul()])
    assert main(["run", *map(str, paths), "--backend", "twospeed", "--oracle", "-w", "0", "-i", "5", "-q",
                 "--out", str(tmp_path / "runs"), "--run-id", "O"]) == 0
    return tmp_path / "runs" / "O"

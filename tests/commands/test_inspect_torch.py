"""``inspect`` where torch is importable (issue 33: on every machine with torch, every graph showed
"torch cannot run: ImportError: cannot import name 'resolve_device'"). torch runs on the CPU here, so the
verdict path a GPU machine takes for the torch backend runs in CI."""

from __future__ import annotations

from pathlib import Path

import pytest

from hipdnn_trace.cli import main

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"


def test_inspect_says_torch_can_run_bundled_graphs_small_and_large(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")   # CI installs it (tests/test_ci_dependencies.py)
    # graphs/perf/matmul: large enough to pass the quick path to the reference-time verdict
    assert main(["inspect", str(GRAPHS / "attention"), str(GRAPHS / "perf" / "matmul")]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    torch_lines = [" ".join(words[1:]) for words in lines if words and words[0] == "torch"]
    assert torch_lines, "inspect printed no torch verdict"
    assert all(v == "can run" for v in torch_lines), sorted(set(torch_lines))
    assert not any("ImportError" in " ".join(words) for words in lines)

"""SIGTERM while the float64 reference multiplies a large matmul: the run stops within seconds
(bounded BLAS calls let the signal handler run), run.json says interrupted, and the graph
finished before is kept. A liveness check with a generous ceiling, not a performance test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from reliability_helpers import cli

from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.write import graph_to_json
from hipdnn_trace.results.rundir import load_run

CEILING_S = 15.0


def _matmul_graph(folder: Path, name: str, size: int) -> None:
    b = GraphBuilder(name, io="double")    # float64 inputs: no conversion copies, only the product
    b.matmul(b.tensor("a", [1, size, size]), b.tensor("b", [1, size, size]), out="c")
    (folder / f"{name}.json").write_text(json.dumps(graph_to_json(b.build())))


def _recorded(folder: Path) -> int:
    try:
        return load_run(folder).summary.height
    except Exception:   # not written yet
        return 0


def _worker_running(pid: int) -> bool:
    """A thread other than the main one is running: OpenBLAS's workers run only inside a BLAS call
    (they sleep while inputs are made, which takes seconds for this graph)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if task.name != str(pid) and state == "R":
            return True
    return False


@pytest.mark.skipif(not Path("/proc/self/task").is_dir() or (os.cpu_count() or 1) < 2,
                    reason="needs Linux /proc and a multi-threaded BLAS to see the product start")
def test_sigterm_inside_a_large_reference_matmul_stops_the_run_within_seconds(tmp_path):
    graphs = tmp_path / "g"
    graphs.mkdir()
    _matmul_graph(graphs, "a_small", 64)
    _matmul_graph(graphs, "b_big", 8192)    # 1.1 TFLOP: about 10-40 s here, in one BLAS call before
    folder = tmp_path / "r"
    proc = cli("run", str(graphs), "--backend", "reference", "--validate", "none", "-w", "0", "-i", "1",
               "--out", str(tmp_path), "--run-id", "r", "-q", cwd=tmp_path)
    try:
        end = time.monotonic() + 120
        while _recorded(folder) < 1:   # the small graph done
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < end, "the small graph was never recorded"
            time.sleep(0.05)
        running = 0
        while running < 5:                    # the product under way (5 polls in a row)
            assert proc.poll() is None, "the big graph finished before the signal: make it bigger"
            assert time.monotonic() < end, "the product never started"
            running = running + 1 if _worker_running(proc.pid) else 0
            time.sleep(0.1)
        assert proc.poll() is None, "the big graph finished before the signal: make it bigger"
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=CEILING_S)
        waited = time.monotonic() - sent
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"still running {CEILING_S:g} s after SIGTERM") from None
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert waited < CEILING_S
    assert "interrupted by SIGTERM" in err and "Traceback" not in err
    assert json.loads((folder / "run.json").read_text())["status"] == "interrupted"
    assert load_run(folder).summary.get_column("graph").to_list() == ["a_small"]

"""--max-reference-seconds: a graph whose float64 reference would take longer than the limit is one
error row, decided from its FLOPs before any input exists or anything is computed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from graph_dicts import write_built

from hipdnn_trace.backends.reference import budget, executor
from hipdnn_trace.bench import graph_run
from hipdnn_trace.cli import main as cli_main
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.ops import graph_flops
from hipdnn_trace.results.rundir import load_run


def _conv_66_tflop(folder: Path) -> Path:
    """The issue's graph: a 2048-channel 11x11 conv over 256x256, 66 TFLOP (never allocated here)."""
    b = GraphBuilder("conv_66tflop", io="half")
    x = b.tensor("x", [1, 2048, 256, 256])
    w = b.tensor("w", [2048, 2048, 11, 11])
    b.conv_fwd(x, w, pad=5, out="y")
    return _write(folder, b)


def _matmul(folder: Path, name: str, m: int, k: int, n: int) -> Path:
    b = GraphBuilder(name, io="float")
    b.matmul(b.tensor("a", [1, m, k]), b.tensor("b", [1, k, n]), out="c")
    return _write(folder, b)


_write = write_built


@pytest.fixture
def nothing_computed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any input generation or reference evaluation fails the test: a refusal must come first."""
    def forbidden(*args, **kwargs):
        raise AssertionError("computed something before refusing")
    monkeypatch.setattr(graph_run, "make_inputs", forbidden)
    monkeypatch.setattr(executor, "evaluate", forbidden)


def _one_row(folder: Path) -> dict:
    rows = load_run(folder).summary.to_dicts()
    assert len(rows) == 1
    return rows[0]


def test_a_66_tflop_conv_is_refused_before_anything_is_computed(tmp_path, nothing_computed, capsys):
    graph = _conv_66_tflop(tmp_path / "g")
    # a limit no CPU meets for 66 TFLOP (6.6e13 FLOP/s of float64): at the default 600 s a fast
    # many-core host may legitimately accept it, and this machine sits near the edge (~110 GFLOP/s)
    limit = ["--max-reference-seconds", "1"]
    assert cli_main(["inspect", "--json", *limit, str(graph)]) == 0
    [info] = json.loads(capsys.readouterr().out)
    reason = next(b for b in info["backends"] if b["name"] == "reference")["supported_reason"]
    code = cli_main(["run", str(graph), "--backend", "reference", "-w", "0", "-i", "1",
                     "--out", str(tmp_path), "--run-id", "r", *limit])
    assert code == 1
    row = _one_row(tmp_path / "r")
    error = row["error"]
    assert "\n" not in error
    # its float64 evaluation needs ~130 GiB: where that does not fit, inspect's first refusal is the
    # memory's and run's row is that one (unsupported); elsewhere the time's, an error naming the file
    if "host memory for the float64 evaluation" in reason:
        live = re.compile(r"[0-9.]+ GiB available")   # free memory moves between the two commands
        assert row["status"] == "unsupported" and live.sub("", error) == live.sub("", reason)
    else:
        assert row["status"] == "error" and error == f"{graph}: {reason}"
        assert "the float64 reference needs at least" in error and "(66.5 TFLOP at the" in error
        assert "over the --max-reference-seconds limit of 1 s; raise it (0 = no limit)" in error
    assert "--validate none" not in error   # no way out when the reference is the backend
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    assert meta["max_reference_seconds"] == 1


@pytest.mark.parametrize("backend", ["reference", "faulty"])
def test_a_low_limit_refuses_what_the_default_runs(tmp_path, nothing_computed, faulty, backend):
    graph = _matmul(tmp_path / "g", "mm_1k", 1024, 1024, 1024)   # 2.1 GFLOP: well under 600 s anywhere
    assert budget.time_refusal(graph_run.load_bytes(graph.read_bytes(), graph.name), 600, validating=True) is None
    code = cli_main(["run", str(graph), "--backend", backend, "--no-isolate", "-w", "0", "-i", "1",
                     "--out", str(tmp_path), "--run-id", "r", "--max-reference-seconds", "0.001",
                     "--reference-device", "cpu"])   # a GPU's float64 does these 2 GFLOP within 1 ms (H200)
    assert code == 1
    error = _one_row(tmp_path / "r")["error"]
    assert "over the --max-reference-seconds limit of 0.001 s" in error
    # validating a GPU-like backend: --validate none is the other way out
    assert ("or skip the reference with --validate none" in error) == (backend == "faulty")


def test_no_limit_and_validate_none_let_the_graph_through(tmp_path, faulty):
    graph_path = _matmul(tmp_path / "g", "mm_small_but_over", 64, 64, 64)
    graph = graph_run.load_bytes(graph_path.read_bytes(), graph_path.name)
    tiny = graph_flops(graph) / budget.float64_rate() / 10   # a limit 10x below the estimate
    assert budget.time_refusal(graph, tiny, validating=True) is not None
    assert budget.time_refusal(graph, 0, validating=True) is None
    base = ["run", str(graph_path), "-w", "0", "-i", "1", "--out", str(tmp_path), "-q"]
    assert cli_main([*base, "--backend", "reference", "--max-reference-seconds", "0", "--run-id", "a"]) == 0
    # a GPU-like backend without validation never computes the reference, so no limit applies
    assert cli_main([*base, "--backend", "faulty", "--no-isolate", "--validate", "none",
                     "--max-reference-seconds", f"{tiny:.3g}", "--run-id", "b"]) == 0
    assert _one_row(tmp_path / "b")["status"] == "ok"



def test_the_limit_uses_the_rate_where_the_reference_runs_gpu_rate_mocked(tmp_path, monkeypatch):
    """With --reference-device cuda the estimate uses the GPU's float64 rate (a stand-in rate and GPU
    here: no GPU; the kept rates go to a folder of the test's own): the 66 TFLOP conv that the CPU
    rate refuses fits in 60 s at 30 TFLOP/s."""
    from hipdnn_trace.backends.reference import rate

    graph = graph_run.load_bytes(_conv_66_tflop(tmp_path / "g").read_bytes(), "conv_66tflop.json")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(rate.RATE_ENV, "100")   # the CPU: 100 GFLOP/s, so 66 TFLOP takes 11 min
    monkeypatch.setattr(rate, "_cuda_float64_rate", lambda: 30e12)
    monkeypatch.setattr(rate, "_gpu_fingerprint", lambda: {"device": "cuda", "gpu": "stand-in"})
    rate.float64_rate.cache_clear()
    try:
        on_cpu = budget.time_refusal(graph, 60, validating=True)
        assert on_cpu is not None and "on this CPU" in on_cpu
        assert "at the 100 GFLOP/s float64 matmul rate set by HIPDNN_TRACE_FLOAT64_GFLOPS" in on_cpu
        assert budget.time_refusal(graph, 60, validating=True, device="cuda") is None
        refused = budget.time_refusal(graph, 1, validating=True, device="cuda")
        assert refused is not None and "on this GPU" in refused and "30 TFLOP/s" not in refused
        assert "3e+04 GFLOP/s float64 matmul rate measured here" in refused
    finally:
        rate.float64_rate.cache_clear()

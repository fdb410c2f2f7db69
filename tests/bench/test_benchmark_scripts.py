"""benchmarks/llm_sweep.py (the LLM layer sweep) and suite_throughput.py's like-with-like comparison."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.ops import graph_flops

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str):
    script = BENCHMARKS / f"{name}.py"
    if not script.exists():
        pytest.skip("benchmarks/ not in this checkout")
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_sweep_writes_every_layer_of_a_model_with_its_shapes(tmp_path: Path) -> None:
    sweep = _load("llm_sweep")
    written = sweep.write_sweep(tmp_path, [1024], ["bf16"], ["llama3.1_8b"])
    assert len(written) == 9
    graphs = {p.stem.removeprefix("llama3.1_8b_").removesuffix("_t1024_bf16"): load_bytes(p.read_bytes(), str(p))
              for p in written}
    m = sweep.MODELS["llama3.1_8b"]
    qkv = (m.heads + 2 * m.kv_heads) * m.head_dim   # 6144 for Llama 3.1 8B (32 query, 8 KV heads of 128)
    assert qkv == 6144
    assert graph_flops(graphs["qkv_proj"]) == 2 * 1024 * m.hidden * qkv
    assert graph_flops(graphs["mlp_down"]) == 2 * 1024 * m.mlp * m.hidden
    prefill = graphs["prefill_causal"]
    dims = {t.name: t.dims for t in prefill.tensors}
    assert dims["query"] == (1, 32, 1024, 128) and dims["key"] == (1, 8, 1024, 128)
    assert {t.data_type for t in graphs["rmsnorm"].tensors if t.name == "x"} == {"bfloat16"}


def test_halves_compare_medians_of_as_many_rounds() -> None:
    """Round k of the baseline and of the other setting; the A/A compares the baseline's odd rounds with
    its even rounds, the other setting's even rounds are compared with the same odd rounds."""
    tp = _load("suite_throughput")

    def row(gpus: str, walls: dict[str, float], wall_s: float) -> dict:
        return {"tree": "t", "gpus": gpus, "wall_s": wall_s, "graph_wall_ms": walls, "graph_own_ms": walls}

    base = [row("0", {"g": w}, 10.0 + i) for i, w in enumerate([100.0, 120.0, 104.0, 118.0])]
    many = [row("all", {"g": w}, 5.0 + i) for i, w in enumerate([101.0, 200.0, 103.0, 200.0])]
    report = tp.matched_halves({("t", "0"): base, ("t", "all"): many}, "0")
    aa, versus = report["t 0 A/A halves"], report["t all vs 0 halves"]
    assert aa["graph_ratio_median"] == pytest.approx(102.0 / 119.0)      # even rounds' median / odd rounds'
    assert versus["graph_ratio_median"] == pytest.approx(102.0 / 119.0)  # the other's even rounds alike
    assert tp.matched_halves({("t", "0"): base[:3], ("t", "all"): many[:3]}, "0") == {}   # needs 4 rounds


def test_a_throwaway_run_is_made_first_and_counted_nowhere(tmp_path: Path, monkeypatch, capsys) -> None:
    """Two real runs of a two-graph suite on the CPU reference, after one thrown away."""
    tp = _load("suite_throughput")
    repo = BENCHMARKS.parent
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("gelu_fp32.json", "swish_fp32.json"):
        (suite / name).write_bytes((repo / "graphs" / "pointwise" / name).read_bytes())
    monkeypatch.setattr(sys, "argv", ["suite_throughput.py", "--throwaway", "--repeat", "2",
                                      "--out", str(tmp_path / "tp"), "--tree", f"now={repo}@1",
                                      "--", str(suite), "-w", "0", "-i", "2"])
    assert tp.main() == 0
    report = json.loads((tmp_path / "tp" / "throughput.json").read_text())
    assert [(r["tree"], r["round"]) for r in report["runs"]] == [("now", 0), ("now", 1)]
    assert all(r["exit"] == 0 and r["graphs"] == 2 and set(r["phases_s"]) >= {"plan", "graphs"} for r in report["runs"])
    assert (tmp_path / "tp" / "runs" / "throwaway-now-gpus1").is_dir()
    assert "not counted" in capsys.readouterr().out


def test_reference_memory_finds_every_attention_graph_and_writes_the_paged_prefill(tmp_path: Path) -> None:
    """benchmarks/reference_memory.py (issue 33): the graphs it measures are graphs/perf's attention graphs,
    and the paged prefill it writes has the upstream vLLM graph's shape."""
    from hipdnn_trace.graph import attention
    from hipdnn_trace.graph.load import load_file

    bench = _load("reference_memory")
    perf = BENCHMARKS.parent / "graphs" / "perf"
    found = bench.attention_graphs([str(perf)])
    assert found and {p.parent.name for p in found} == {"attention"}
    assert len(found) == len(list((perf / "attention").glob("*.json")))
    path = tmp_path / "paged.json"
    bench.write_paged_prefill(path)
    graph = load_file(path)
    cfg = attention.config(graph.nodes[0], graph)
    assert (cfg.batch, cfg.heads_q, cfg.heads_kv, cfg.seq_q, cfg.seq_kv, cfg.d_qk) == (4, 32, 8, 4096, 4096, 128)
    assert cfg.paged and cfg.page_size == 16 and cfg.causal and graph.nodes[0].type == attention.SDPA

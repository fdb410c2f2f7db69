"""GPU proof for packed (ragged) attention rows (issue 35 item 4): ROCm/dnn-benchmarking's
graphs/sample_sdpa_paged.json and a builder-made packed paged graph (2 q rows of 2 sequences each)
validate on cudnn (ragged offset tensors on Q and O) and torch. Skipped without an NVIDIA GPU."""

from __future__ import annotations

import json

import pytest
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

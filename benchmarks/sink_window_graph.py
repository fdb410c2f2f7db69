"""Write the hipDNN graph of the upstream sink + sliding-window attention workload (bf16, GQA 4,
B 1, S 8192, window 4096, d 128, BSHD strides, a [32] bf16 sink) with this project's builder, so
``hipdnn-trace run`` can take it on a GPU machine that has no copy of the upstream file.

    python benchmarks/sink_window_graph.py OUT.json [SEQ WINDOW]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# E402 below: the package comes from the checkout put on sys.path above
from hipdnn_trace.graph.build import GraphBuilder  # noqa: E402
from hipdnn_trace.graph.write import dumps  # noqa: E402


def build(seq: int = 8192, window: int = 4096, heads: int = 32, kv_heads: int = 8, dim: int = 128) -> str:
    b = GraphBuilder(f"sink_streaming_sliding_bf16_b1_s{seq}_w{window}_d{dim}_gqa{heads // kv_heads}", io="bfloat16",
                     compute="float")

    def bshd(name: str, h: int):
        return b.tensor(name, [1, h, seq, dim], strides=[seq * h * dim, dim, h * dim, 1])

    q, k, v = bshd("query", heads), bshd("key", kv_heads), bshd("value", kv_heads)
    sink = b.tensor("sink_token", [heads])
    b.sdpa(q, k, v, causal=True, left_bound=window, right_bound=0, scale=dim ** -0.5, sink=sink)
    return dumps(b.build())


if __name__ == "__main__":
    seq, window = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) == 4 else (8192, 4096)
    Path(sys.argv[1]).write_text(build(seq, window))

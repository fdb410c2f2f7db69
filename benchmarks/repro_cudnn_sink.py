"""Standalone reproduction: cuDNN SDPA with an attention sink on a long sliding-window graph.

The upstream graph ``ckdsl_sdpa_extracted/common_llm_workloads/sink_streaming_sliding_bf16_b1_s8192_
w4096_d128_gqa4.json`` (bf16, GQA 4, B 1, S 8192, causal with a 4096-token window, a [32] bf16
sink) ERRORed at execute with cudaErrorMisalignedAddress on an H200 while torch passed it. This
script uses only torch and the cuDNN frontend (no hipdnn-trace code), so it can be attached to a
library bug as it is. It runs each variant in a fresh process (a CUDA error ends the context):
the sink declared in the graph's type (bfloat16) or in float (what the frontend documents for
``sink_token``: [1, H, 1, 1] float), with the upstream shape and a short one, and prints one line
per variant: built, executed, or the error.

    python benchmarks/repro_cudnn_sink.py            # all variants
    python benchmarks/repro_cudnn_sink.py bfloat16 8192 4096   # one variant, in this process
"""

from __future__ import annotations

import json
import subprocess
import sys


def run_variant(sink_type: str, seq: int, window: int, heads: int = 32, kv_heads: int = 8, dim: int = 128) -> dict:
    import cudnn
    import torch

    torch.manual_seed(0)
    dev = "cuda"

    def bshd(h: int) -> torch.Tensor:   # the upstream strides: [S*H*D, D, H*D, 1] (BSHD memory, BHSD dims)
        return torch.randn(1, seq, h, dim, dtype=torch.bfloat16, device=dev).permute(0, 2, 1, 3)

    q, k, v = bshd(heads), bshd(kv_heads), bshd(kv_heads)
    o = torch.empty(1, seq, heads, dim, dtype=torch.bfloat16, device=dev).permute(0, 2, 1, 3)
    sink = torch.randn(1, heads, 1, 1, dtype=getattr(torch, sink_type), device=dev)
    handle = cudnn.create_handle()
    graph = cudnn.pygraph(io_data_type=cudnn.data_type.BFLOAT16, intermediate_data_type=cudnn.data_type.FLOAT,
                          compute_data_type=cudnn.data_type.FLOAT, handle=handle)
    tq, tk, tv, ts = (graph.tensor_like(t) for t in (q, k, v, sink))
    to, _ = graph.sdpa(name="sdpa", q=tq, k=tk, v=tv, generate_stats=False, attn_scale=dim ** -0.5,
                       diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT, diagonal_band_left_bound=window,
                       diagonal_band_right_bound=0, sink_token=ts)
    to.set_output(True).set_dim(list(o.shape)).set_stride(list(o.stride()))
    out = {"sink": sink_type, "seq": seq, "window": window, "cudnn": cudnn.backend_version()}
    try:
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        graph.check_support()
        graph.build_plans()
    except Exception as exc:   # the verdict is the point
        return {**out, "result": f"not built: {str(exc).splitlines()[0][:200]}"}
    workspace = torch.empty(max(graph.get_workspace_size(), 1), dtype=torch.uint8, device=dev)
    try:
        graph.execute({tq: q, tk: k, tv: v, ts: sink, to: o}, workspace, handle=handle)
        torch.cuda.synchronize()
    except Exception as exc:
        return {**out, "result": f"execute failed: {str(exc).splitlines()[0][:200]}"}
    finite = bool(torch.isfinite(o.float()).all())
    return {**out, "result": "executed", "finite": finite}


def main() -> int:
    if len(sys.argv) == 4:
        print(json.dumps(run_variant(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))
        return 0
    for sink in ("bfloat16", "float32"):
        for seq, window in ((8192, 4096), (256, 32)):
            done = subprocess.run([sys.executable, __file__, sink, str(seq), str(window)],
                                  capture_output=True, text=True, timeout=300)
            line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else \
                json.dumps({"sink": sink, "seq": seq, "window": window,
                            "result": f"process exit {done.returncode}: {done.stderr.strip()[-300:]}"})
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

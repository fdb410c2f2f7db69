"""Write a sweep of LLM layer shapes as hipDNN graphs: a suite of a few hundred, like hipDNN's own.

graphs/perf holds one or two shapes per op family; a perf engineer validates sweeps: every layer of
several models at several token counts (ROCm's dnn-benchmarking ships workload lists of 217
attention, 121 MoE and 30 norm shapes). This writes such a sweep from public model configurations
(hidden size, heads, KV heads, head dim, MLP width, as the models' Hugging Face configs give them),
per model, token count and precision:

    qkv / out / mlp_up (+bias+GELU) / mlp_down projections (matmul), RMSNorm and its backward,
    causal prefill attention and its backward, decode attention (16 sequences against the cache)

with the recipes of graphs/generate.py. Nothing here is committed: write it where the run reads it.

    python benchmarks/llm_sweep.py --out /tmp/llm-sweep            # 6 models x 2 token counts x 2 = 216
    python benchmarks/llm_sweep.py --out /tmp/s --tokens 2048 4096 8192 --precisions bf16
    hipdnn-trace run /tmp/llm-sweep --backend cudnn --gpus all
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _recipes():
    """graphs/generate.py as a module (its recipes and ``render``)."""
    spec = importlib.util.spec_from_file_location("graph_recipes", ROOT / "graphs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Model:
    """The dimensions of one decoder layer (public configuration)."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp: int


#: decoder layers of public models (their Hugging Face config.json: hidden_size, num_attention_heads,
#: num_key_value_heads, head_dim, intermediate_size)
MODELS = {
    "llama3.1_8b": Model(4096, 32, 8, 128, 14336),
    "llama3.1_70b": Model(8192, 64, 8, 128, 28672),
    "qwen3_8b": Model(4096, 32, 8, 128, 12288),
    "qwen3_32b": Model(5120, 64, 8, 128, 25600),
    "mistral_nemo_12b": Model(5120, 32, 8, 128, 14336),
    "qwen3_14b": Model(5120, 40, 8, 128, 17408),
}


def layer_recipes(r, m: Model, tokens: int) -> dict[str, object]:
    """One model layer's graphs at ``tokens`` tokens (one sequence of that length for attention)."""
    qkv = (m.heads + 2 * m.kv_heads) * m.head_dim
    return {
        "qkv_proj": r.matmul([tokens, m.hidden], [m.hidden, qkv]),
        "out_proj": r.matmul([tokens, m.heads * m.head_dim], [m.heads * m.head_dim, m.hidden]),
        "mlp_up_bias_gelu": r.matmul_bias_gelu([tokens, m.hidden], [m.hidden, m.mlp]),
        "mlp_down": r.matmul([tokens, m.mlp], [m.mlp, m.hidden]),
        "rmsnorm": r.rmsnorm([1, tokens, m.hidden]),
        "rmsnorm_backward": r.norm_backward("rmsnorm", [1, tokens, m.hidden]),
        "prefill_causal": r.sdpa(1, m.heads, m.kv_heads, tokens, tokens, m.head_dim, causal=True),
        "prefill_causal_backward": r.sdpa_backward(1, m.heads, m.kv_heads, tokens, m.head_dim, causal=True),
        "decode_b16": r.sdpa(16, m.heads, m.kv_heads, 1, tokens, m.head_dim),
    }


def write_sweep(out: Path, tokens: list[int], precisions: list[str], models: list[str]) -> list[Path]:
    """Write every graph of the sweep under ``out`` (one folder per model); the paths written."""
    r = _recipes()
    written = []
    for name in models:
        for t in tokens:
            for op, make in layer_recipes(r, MODELS[name], t).items():
                for p in precisions:
                    stem = f"{name}_{op}_t{t}_{p}"
                    b = r._b(stem, p)
                    make(b)
                    path = out / name / f"{stem}.json"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(r.render(b.build()))
                    written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder to write the sweep into")
    parser.add_argument("--tokens", type=int, nargs="+", default=[2048, 4096], help="token counts (default 2048 4096)")
    parser.add_argument("--precisions", nargs="+", default=["bf16", "fp16"], choices=["fp16", "bf16", "fp32"])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    args = parser.parse_args(argv)
    written = write_sweep(args.out, args.tokens, args.precisions, args.models)
    print(f"{len(written)} graphs in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

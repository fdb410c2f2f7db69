"""Write the sample graphs in graphs/ (small, CPU-friendly) and graphs/perf/ (GPU sizes).

    python graphs/generate.py            # rewrite every file
    python graphs/generate.py --check    # exit 1 if a committed file differs

Every graph is built with hipdnn_trace.graph.build and written as hipDNN JSON; the
output is deterministic, and a test asserts the committed files equal it. The small
set is sized so one reference execution takes a few milliseconds; graphs/perf/ holds
realistic ResNet-50 and LLM shapes for GPUs (too large for the CPU reference).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:   # run as a script from a checkout
    sys.path.insert(0, str(HERE.parent))

# E402 below: the package comes from the checkout put on sys.path above
from hipdnn_trace.graph.build import GraphBuilder  # noqa: E402
from hipdnn_trace.graph.layout import packed_strides  # noqa: E402
from hipdnn_trace.graph.model import Graph  # noqa: E402
from hipdnn_trace.graph.write import graph_to_json  # noqa: E402

#: suffix -> (io type, compute type, intermediate type)
PRECISIONS = {
    "fp32": ("float", "float", "float"),
    "fp16": ("half", "float", "float"),
    "bf16": ("bfloat16", "float", "float"),
}
Recipe = Callable[[GraphBuilder], None]


def _b(name: str, precision: str) -> GraphBuilder:
    io, compute, inter = PRECISIONS[precision]
    return GraphBuilder(name, io=io, compute=compute, intermediate=inter)


# ------------------------------------------------------------------ small set

def conv_fwd(x_dims, w_dims, layout="NCHW", **conv) -> Recipe:
    def make(b: GraphBuilder) -> None:
        x = b.tensor("x", x_dims, layout=layout)
        w = b.tensor("w", w_dims, layout=layout)
        b.conv_fwd(x, w, name="conv_fwd", out="y", **conv)
    return make


def conv_dgrad(x_dims, w_dims, layout="NCHW", **conv) -> Recipe:
    def make(b: GraphBuilder) -> None:
        probe = GraphBuilder("probe")   # dy's dims: the forward output's
        y = probe.conv_fwd(probe.tensor("x", x_dims), probe.tensor("w", w_dims), **conv)
        dy = b.tensor("dy", y.dims, layout=layout)
        w = b.tensor("w", w_dims, layout=layout)
        b.conv_dgrad(dy, w, x_dims=x_dims, name="conv_dgrad", out="dx", **conv)
    return make


def conv_wgrad(x_dims, w_dims, layout="NCHW", **conv) -> Recipe:
    def make(b: GraphBuilder) -> None:
        probe = GraphBuilder("probe")
        y = probe.conv_fwd(probe.tensor("x", x_dims), probe.tensor("w", w_dims), **conv)
        x = b.tensor("x", x_dims, layout=layout)
        dy = b.tensor("dy", y.dims, layout=layout)
        b.conv_wgrad(x, dy, w_dims=w_dims, name="conv_wgrad", out="dw", **conv)
    return make


def matmul(a_dims, b_dims, *, transpose_b=False) -> Recipe:
    def make(b: GraphBuilder) -> None:
        a = b.tensor("a", a_dims)
        if transpose_b:   # B stored as [..., N, K]: the logical [..., K, N] via strides
            k, n = b_dims[-2:]
            stored = [*b_dims[:-2], n, k]
            s = list(packed_strides(stored))
            s[-2], s[-1] = s[-1], s[-2]
            bt = b.tensor("b", b_dims, strides=s)
        else:
            bt = b.tensor("b", b_dims)
        b.matmul(a, bt, name="matmul", out="c")
    return make


def relu_clip(dims, layout="NCHW") -> Recipe:
    def make(b: GraphBuilder) -> None:
        x = b.tensor("x", dims, layout=layout)
        b.pointwise("relu_fwd", x, relu_lower_clip=0.0, relu_upper_clip=6.0, name="relu6", out="y")
    return make


def leaky_relu(dims) -> Recipe:
    def make(b: GraphBuilder) -> None:
        x = b.tensor("x", dims)
        b.pointwise("relu_fwd", x, relu_lower_clip=0.0, relu_lower_clip_slope=0.01,
                    name="leaky_relu", out="y")
    return make


def bias_add(dims, layout="NHWC") -> Recipe:
    def make(b: GraphBuilder) -> None:
        x = b.tensor("x", dims, layout=layout)
        bias = b.tensor("bias", [1, dims[1], *[1] * (len(dims) - 2)])
        b.pointwise("add", x, bias, name="bias_add", out="y")
    return make


def unary(mode, dims, **opts) -> Recipe:
    def make(b: GraphBuilder) -> None:
        b.pointwise(mode, b.tensor("x", dims), name=mode, out="y", **opts)
    return make


def per_channel(b: GraphBuilder, name: str, c: int, rank: int):
    return b.tensor(name, [1, c, *[1] * (rank - 2)], dtype="float")


def bn_inference(dims, layout="NCHW", *, variance=False) -> Recipe:
    """Inference batchnorm from saved inv_variance, or (``variance``) from the running variance and an
    epsilon: hipDNN's BatchnormInferenceAttributesVarianceExt."""
    def make(b: GraphBuilder) -> None:
        x = b.tensor("x", dims, layout=layout)
        c, r = dims[1], len(dims)
        mean, stat = per_channel(b, "mean", c, r), per_channel(b, "variance" if variance else "inv_variance", c, r)
        scale, bias = per_channel(b, "scale", c, r), per_channel(b, "bias", c, r)
        if variance:
            b.batchnorm_inference_variance(x, mean, stat, scale, bias, name="batchnorm_inference", out="y")
        else:
            b.batchnorm_inference(x, mean, stat, scale, bias, name="batchnorm_inference", out="y")
    return make


def bn_training(dims, layout="NHWC") -> Recipe:
    def make(b: GraphBuilder) -> None:
        x = b.tensor("x", dims, layout=layout)
        c, r = dims[1], len(dims)
        b.batchnorm(x, per_channel(b, "scale", c, r), per_channel(b, "bias", c, r),
                    epsilon=1e-5, momentum=0.1,
                    prev_running_mean=per_channel(b, "running_mean", c, r),
                    prev_running_variance=per_channel(b, "running_variance", c, r),
                    name="batchnorm", out="y")
    return make


def bn_backward(dims, layout="NHWC") -> Recipe:
    def make(b: GraphBuilder) -> None:
        dy = b.tensor("dy", dims, layout=layout)
        x = b.tensor("x", dims, layout=layout)
        c, r = dims[1], len(dims)
        b.batchnorm_backward(dy, x, per_channel(b, "scale", c, r), mean=per_channel(b, "mean", c, r),
                             inv_variance=per_channel(b, "inv_variance", c, r), name="batchnorm_backward")
    return make


def layernorm(dims, count=1) -> Recipe:
    def make(b: GraphBuilder) -> None:
        x = b.tensor("x", dims)
        norm = [*[1] * (len(dims) - count), *dims[-count:]]
        b.layernorm(x, b.tensor("scale", norm), b.tensor("bias", norm), epsilon=1e-5,
                    normalized_dim_count=count, name="layernorm", out="y")
    return make


def rmsnorm(dims) -> Recipe:
    def make(b: GraphBuilder) -> None:
        x = b.tensor("x", dims)
        b.rmsnorm(x, b.tensor("scale", [*[1] * (len(dims) - 1), dims[-1]]), epsilon=1e-5,
                  name="rmsnorm", out="y")
    return make


def norm_backward(kind, dims) -> Recipe:
    """Layernorm or RMSNorm backward over the last dim, with float saved statistics."""
    def make(b: GraphBuilder) -> None:
        dy, x = b.tensor("dy", dims), b.tensor("x", dims)
        scale = b.tensor("scale", [dims[-1]], dtype="float")
        stats = [*dims[:-1], 1]
        if kind == "layernorm":
            b.layernorm_backward(dy, x, scale, b.tensor("saved_mean", stats, dtype="float"),
                                 b.tensor("saved_inv_variance", stats, dtype="float"), name="layernorm_backward")
        else:
            b.rmsnorm_backward(dy, x, scale, b.tensor("saved_inv_rms", stats, dtype="float"),
                               name="rmsnorm_backward")
    return make


def reduction(mode, dims, out_dims) -> Recipe:
    def make(b: GraphBuilder) -> None:
        b.reduction(mode, b.tensor("x", dims), out_dims, name="reduction", out="y")
    return make


def conv_bias_relu(x_dims, w_dims, layout="NHWC", **conv) -> Recipe:
    def make(b: GraphBuilder) -> None:
        x = b.tensor("x", x_dims, layout=layout)
        w = b.tensor("w", w_dims, layout=layout)
        bias = b.tensor("bias", [1, w_dims[0], *[1] * (len(x_dims) - 2)])
        y = b.conv_fwd(x, w, name="conv_fwd", out="conv_out", virtual=True, **conv)
        z = b.pointwise("add", y, bias, name="bias_add", out="biased", virtual=True)
        b.pointwise("relu_fwd", z, name="relu", out="y")
    return make


def matmul_bias_gelu(a_dims, b_dims) -> Recipe:
    def make(b: GraphBuilder) -> None:
        a = b.tensor("a", a_dims)
        w = b.tensor("b", b_dims)
        bias = b.tensor("bias", [*[1] * (len(a_dims) - 1), b_dims[-1]])
        c = b.matmul(a, w, name="matmul", out="matmul_out", virtual=True)
        z = b.pointwise("add", c, bias, name="bias_add", out="biased", virtual=True)
        b.pointwise("gelu_fwd", z, name="gelu", out="y")
    return make


def pool(dims, mode, window, *, layout=None, index=False, **opts) -> Recipe:
    """Pooling (hipDNN's ResampleFwd); ``index`` adds MAXPOOL's int32 argmax output."""
    def make(b: GraphBuilder) -> None:
        b.pool(b.tensor("x", dims, layout=layout), mode, window, index_dtype="int32" if index else None,
               name="pool", **opts)
    return make


def pool_backward(dims, mode, window, **opts) -> Recipe:
    """Pooling's backward; MAXPOOL takes the forward's int32 index (the harness computes it)."""
    def make(b: GraphBuilder) -> None:
        from hipdnn_trace.graph.resample import Pooling, output_dims

        nsp = len(dims) - 2
        per = {k: [v] * nsp if isinstance(v, int) else list(v) for k, v in
               (("window", window), ("stride", opts.get("stride", 1)), ("pad", opts.get("pad", 0)))}
        post = opts.get("post_pad", per["pad"])
        post = [post] * nsp if isinstance(post, int) else list(post)
        p = Pooling(mode, opts.get("padding_mode", "ZERO_PAD"), tuple(per["window"]), tuple(per["stride"]),
                    tuple(per["pad"]), tuple(post))
        out = [*dims[:2], *output_dims(tuple(dims[2:]), p)]
        index = b.tensor("index", out, dtype="int32") if mode == "MAXPOOL" else None
        b.pool_backward(b.tensor("dy", out), dims, mode, window, index=index, name="pool_backward", **opts)
    return make


#: MX and NVFP4 formats: (element type, scale type, block size) -- OCP MX v1.0 and NVIDIA's NVFP4
BLOCK_FORMATS = {"mxfp8_e4m3": ("fp8_e4m3", "fp8_e8m0", 32), "mxfp8_e5m2": ("fp8_e5m2", "fp8_e8m0", 32),
                 "mxfp4": ("fp4_e2m1", "fp8_e8m0", 32), "nvfp4": ("fp4_e2m1", "fp8_e4m3", 16)}


def block_quantize(dims, fmt, axis=None) -> Recipe:
    def make(b: GraphBuilder) -> None:
        element, scale, block = BLOCK_FORMATS[fmt]
        b.block_quantize(b.tensor("x", dims), block, y_dtype=element, scale_dtype=scale, axis=axis,
                         name="quantize")
    return make


def block_dequantize(dims, fmt, global_scale=False) -> Recipe:
    """Block dequantize along the last dim; NVFP4 then multiplies by its float per-tensor scale."""
    def make(b: GraphBuilder) -> None:
        element, scale, block = BLOCK_FORMATS[fmt]
        x = b.tensor("x", dims, dtype=element)
        s = b.tensor("scale", [*dims[:-1], -(-dims[-1] // block)], dtype=scale)
        if not global_scale:
            b.block_dequantize(x, s, [block], name="dequantize")
            return
        y = b.block_dequantize(x, s, [block], name="dequantize", out="block_scaled", virtual=True)
        b.pointwise("mul", y, b.tensor("global_scale", [1] * len(dims), dtype="float"), name="global_scale",
                    out="y")
    return make


def moe_block_scaled(tokens, experts, k, n, fmt="mxfp4", top_k=4) -> Recipe:
    """Expert weights stored block-scaled along K (``[E, K, N]``, one scale per block of K), dequantized
    into the MoE grouped matmul: gpt-oss's MXFP4 experts."""
    def make(b: GraphBuilder) -> None:
        element, scale, block = BLOCK_FORMATS[fmt]
        token = b.tensor("token", [1, tokens * top_k, k])
        weight = b.tensor("weight", [experts, k, n], dtype=element)
        scales = b.tensor("weight_scale", [experts, -(-k // block), n], dtype=scale)
        w = b.block_dequantize(weight, scales, [block, 1], name="dequantize_weight", out="weight_dequantized",
                               virtual=True, dtype=b.io)
        b.moe_grouped_matmul(token, w, b.tensor("first_token_offset", [experts, 1, 1], dtype="int32"),
                             name="moe_grouped_matmul")
    return make


def moe_matmul(tokens, experts, k, n, *, mode="NONE", top_k=2) -> Recipe:
    """An expert layer GEMM: ``tokens`` tokens routed to ``top_k`` of ``experts`` experts (routed
    rows = tokens x top_k), weights [E, K, N] column-major per expert (cuDNN's documented layout).
    NONE: token rows are already the routed rows; GATHER reads them from the tokens by index;
    SCATTER writes each routed row back to (token, k) order."""
    def make(b: GraphBuilder) -> None:
        routed = tokens * top_k
        token = b.tensor("token", [1, tokens if mode == "GATHER" else routed, k])
        weight = b.tensor("weight", [experts, k, n], strides=[k * n, 1, k])
        offsets = b.tensor("first_token_offset", [experts, 1, 1], dtype="int32")
        index = b.tensor("token_index", [1, routed, 1], dtype="int32") if mode != "NONE" else None
        ks = b.tensor("token_ks", [1, routed, 1], dtype="int32") if mode == "SCATTER" else None
        b.moe_grouped_matmul(token, weight, offsets, mode=mode, top_k=top_k if mode == "SCATTER" else 0,
                             token_index=index, token_ks=ks, name="moe_grouped_matmul")
    return make


def moe_matmul_backward(rows, experts, k, n) -> Recipe:
    """The expert weights' gradient: dweight[e] = token[rows of e]^T @ doutput[rows of e]."""
    def make(b: GraphBuilder) -> None:
        b.moe_grouped_matmul_backward(b.tensor("doutput", [1, rows, n]), b.tensor("token", [1, rows, k]),
                                      b.tensor("first_token_offset", [experts, 1, 1], dtype="int32"),
                                      experts=experts, name="moe_grouped_matmul_backward")
    return make


def _bshd(b: GraphBuilder, name: str, batch: int, heads: int, seq: int, d: int):
    """A BHSD tensor stored BSHD (heads interleaved per token), as LLM frameworks lay q/k/v out."""
    return b.tensor(name, [batch, heads, seq, d], strides=[seq * heads * d, d, heads * d, 1])


def sdpa(batch, hq, hkv, sq, skv, d_qk, d_v=None, *, bshd=True, mask=None, lengths=False, sink=False,
         stats=False, pages=None, **opts) -> Recipe:
    """Attention forward. ``mask``: "additive" [1, 1, Sq, Skv] or "boolean" [B, 1, Sq, Skv];
    ``lengths``: per-sequence seq_len_q / seq_len_kv ([B, 1, 1, 1] int32); ``pages``:
    (page_size, total pages) for paged K/V with max_seq_len_kv = skv."""
    d_v = d_v or d_qk

    def make(b: GraphBuilder) -> None:
        qkv = _bshd if bshd else (lambda b_, n, bb, h, s, d: b_.tensor(n, [bb, h, s, d]))
        q = qkv(b, "query", batch, hq, sq, d_qk)
        if pages is None:
            k, v = qkv(b, "key", batch, hkv, skv, d_qk), qkv(b, "value", batch, hkv, skv, d_v)
            paged = {}
        else:
            page, total = pages
            k = b.tensor("key_cache", [total, hkv, page, d_qk])
            v = b.tensor("value_cache", [total, hkv, page, d_v])
            per_seq = -(-skv // page)
            paged = {"page_table_k": b.tensor("page_table_k", [batch, 1, per_seq, 1], dtype="int32"),
                     "page_table_v": b.tensor("page_table_v", [batch, 1, per_seq, 1], dtype="int32"),
                     "max_seq_len_kv": skv}
        extra = {}
        if mask == "additive":
            extra["attn_mask"] = b.tensor("attention_bias", [1, 1, sq, skv])
        elif mask == "boolean":
            extra["attn_mask"] = b.tensor("attention_mask", [batch, 1, sq, skv], dtype="boolean")
        if lengths:
            extra["seq_len_q"] = b.tensor("seq_len_q", [batch, 1, 1, 1], dtype="int32")
            extra["seq_len_kv"] = b.tensor("seq_len_kv", [batch, 1, 1, 1], dtype="int32")
        if sink:
            extra["sink"] = b.tensor("sink_logits", [1, hq, 1, 1], dtype="float")
        b.sdpa(q, k, v, stats=stats, **paged, **extra, **opts)
    return make


def sdpa_backward(batch, hq, hkv, s, d_qk, d_v=None, *, lengths=False, **opts) -> Recipe:
    """Attention backward; o and stats are inputs (the harness computes them from q, k, v)."""
    d_v = d_v or d_qk

    def make(b: GraphBuilder) -> None:
        q, k = _bshd(b, "query", batch, hq, s, d_qk), _bshd(b, "key", batch, hkv, s, d_qk)
        v = _bshd(b, "value", batch, hkv, s, d_v)
        o, do = _bshd(b, "output", batch, hq, s, d_v), _bshd(b, "grad_output", batch, hq, s, d_v)
        stats = b.tensor("stats", [batch, hq, s, 1], dtype="float")
        extra = {}
        if lengths:
            extra["seq_len_q"] = b.tensor("seq_len_q", [batch, 1, 1, 1], dtype="int32")
            extra["seq_len_kv"] = b.tensor("seq_len_kv", [batch, 1, 1, 1], dtype="int32")
        b.sdpa_backward(q, k, v, o, do, stats, **extra, **opts)
    return make


SMALL: dict[str, Recipe] = {
    "conv/conv_fwd_nchw": conv_fwd([2, 8, 12, 12], [16, 8, 3, 3], pad=1),
    "conv/conv_fwd_nhwc_stride2": conv_fwd([2, 8, 12, 12], [16, 8, 3, 3], "NHWC", pad=1, stride=2),
    "conv/conv_fwd_grouped_nhwc": conv_fwd([2, 16, 10, 10], [16, 4, 3, 3], "NHWC", pad=1),
    "conv/conv_fwd_3d_ncdhw": conv_fwd([1, 4, 6, 6, 6], [8, 4, 3, 3, 3], "NCDHW", pad=1),
    "conv/conv_fwd_asym_pad_dilated": conv_fwd([2, 4, 11, 9], [8, 4, 3, 3], pad=[1, 0],
                                               post_pad=[2, 1], dilation=[2, 1]),
    "conv/conv_fwd_1x1_nhwc": conv_fwd([2, 16, 8, 8], [32, 16, 1, 1], "NHWC"),
    "conv/conv_dgrad_nchw": conv_dgrad([2, 8, 12, 12], [16, 8, 3, 3], pad=1),
    "conv/conv_dgrad_nhwc_stride2": conv_dgrad([2, 8, 12, 12], [16, 8, 3, 3], "NHWC", pad=1, stride=2),
    "conv/conv_dgrad_grouped_nhwc": conv_dgrad([2, 16, 10, 10], [16, 4, 3, 3], "NHWC", pad=1),
    "conv/conv_wgrad_nchw": conv_wgrad([2, 8, 12, 12], [16, 8, 3, 3], pad=1),
    "conv/conv_wgrad_nhwc_stride2": conv_wgrad([2, 8, 12, 12], [16, 8, 3, 3], "NHWC", pad=1, stride=2),
    "conv/conv_wgrad_3d_ncdhw": conv_wgrad([1, 4, 6, 6, 6], [8, 4, 3, 3, 3], "NCDHW", pad=1),
    "matmul/matmul_2d": matmul([64, 96], [96, 128]),
    "matmul/matmul_batched": matmul([8, 32, 64], [8, 64, 48]),
    "matmul/matmul_batched_broadcast_bt": matmul([4, 32, 64], [1, 64, 32], transpose_b=True),
    "pointwise/relu_clip": relu_clip([4, 16, 16, 16]),
    "pointwise/leaky_relu": leaky_relu([64, 256]),
    "pointwise/bias_add_broadcast_nhwc": bias_add([4, 16, 16, 16]),
    "pointwise/gelu": unary("gelu_fwd", [64, 256]),
    "pointwise/gelu_approx_tanh": unary("gelu_approx_tanh_fwd", [64, 256]),
    "pointwise/swish": unary("swish_fwd", [64, 256], swish_beta=1.0),
    "norm/batchnorm_inference_nchw": bn_inference([4, 16, 16, 16]),
    "norm/batchnorm_training_nhwc": bn_training([4, 16, 16, 16]),
    "norm/batchnorm_backward_nhwc": bn_backward([4, 16, 16, 16]),
    "norm/layernorm": layernorm([8, 32, 128]),
    "norm/rmsnorm": rmsnorm([8, 32, 128]),
    "norm/layernorm_backward": norm_backward("layernorm", [8, 32, 128]),
    "norm/rmsnorm_backward": norm_backward("rmsnorm", [8, 32, 128]),
    "norm/batchnorm_inference_variance_nhwc": bn_inference([2, 16, 8, 8], "NHWC", variance=True),
    "reduction/reduce_sum_spatial": reduction("add", [4, 16, 16, 16], [4, 16, 1, 1]),
    "reduction/reduce_max_rows": reduction("max", [64, 256], [64, 1]),
    "fused/conv_bias_relu_nhwc": conv_bias_relu([2, 8, 12, 12], [16, 8, 3, 3], pad=1),
    "fused/matmul_bias_gelu": matmul_bias_gelu([64, 96], [96, 128]),
    "attention/sdpa_mha": sdpa(2, 4, 4, 64, 64, 32),
    "attention/sdpa_mha_bhsd_scale_default": sdpa(2, 4, 4, 48, 80, 32, bshd=False),
    "attention/sdpa_gqa_causal": sdpa(2, 8, 2, 64, 64, 32, causal=True, scale=0.125),
    "attention/sdpa_mqa_causal_bottom_right": sdpa(2, 4, 1, 48, 80, 32, causal=True, alignment="BOTTOM_RIGHT"),
    "attention/sdpa_mla_dqk48_dv32_causal": sdpa(1, 4, 4, 64, 64, 48, 32, causal=True),
    "attention/sdpa_sliding_window": sdpa(1, 4, 2, 96, 96, 32, causal=True, left_bound=16),
    "attention/sdpa_sink_window_gqa": sdpa(1, 8, 2, 64, 64, 32, causal=True, left_bound=32, sink=True),
    "attention/sdpa_varlen_causal": sdpa(4, 4, 2, 48, 48, 32, causal=True, lengths=True),
    "attention/sdpa_paged_gqa": sdpa(3, 8, 2, 16, 64, 32, lengths=True, causal=True, alignment="BOTTOM_RIGHT",
                                     pages=(16, 16)),
    "attention/sdpa_additive_bias": sdpa(2, 2, 2, 32, 48, 32, mask="additive"),
    "attention/sdpa_boolean_mask": sdpa(2, 2, 2, 32, 48, 32, mask="boolean"),
    "attention/sdpa_training_stats": sdpa(2, 4, 2, 64, 64, 32, causal=True, stats=True),
    "attention/sdpa_backward_mha": sdpa_backward(1, 4, 4, 64, 32),
    "attention/sdpa_backward_gqa_causal": sdpa_backward(1, 8, 2, 48, 32, causal=True),
    "attention/sdpa_backward_window": sdpa_backward(1, 4, 4, 96, 32, causal=True, left_bound=16),
    "attention/sdpa_backward_varlen": sdpa_backward(3, 4, 2, 40, 32, causal=True, lengths=True),
    "pool/maxpool_2d_index": pool([2, 8, 12, 12], "MAXPOOL", 3, stride=2, pad=1, padding_mode="NEG_INF_PAD",
                                  index=True),
    "pool/maxpool_2d_zero_pad_nhwc": pool([2, 8, 9, 9], "MAXPOOL", 3, layout="NHWC", stride=2, pad=1),
    "pool/avgpool_include_padding_2d": pool([2, 8, 12, 12], "AVGPOOL_INCLUDE_PADDING", 3, stride=2, pad=1),
    "pool/avgpool_exclude_padding_asym_2d": pool([1, 4, 11, 9], "AVGPOOL_EXCLUDE_PADDING", [3, 2],
                                                 stride=[2, 1], pad=[1, 0], post_pad=[0, 1]),
    "pool/maxpool_3d_index": pool([1, 4, 6, 8, 8], "MAXPOOL", 2, stride=2, padding_mode="NEG_INF_PAD",
                                  index=True),
    "pool/avgpool_exclude_padding_3d": pool([1, 4, 5, 7, 7], "AVGPOOL_EXCLUDE_PADDING", 3, stride=2, pad=1),
    "pool/maxpool_backward_2d": pool_backward([2, 8, 12, 12], "MAXPOOL", 3, stride=2, pad=1,
                                              padding_mode="NEG_INF_PAD"),
    "pool/avgpool_include_padding_backward_2d": pool_backward([2, 8, 12, 12], "AVGPOOL_INCLUDE_PADDING", 3,
                                                              stride=2, pad=1),
    "pool/avgpool_exclude_padding_backward_3d": pool_backward([1, 4, 5, 7, 7], "AVGPOOL_EXCLUDE_PADDING", 3,
                                                              stride=2, pad=1),
    "blockscale/mxfp8_e4m3_quantize": block_quantize([32, 256], "mxfp8_e4m3"),
    "blockscale/mxfp8_e5m2_quantize_axis0": block_quantize([96, 48], "mxfp8_e5m2", axis=0),
    "blockscale/mxfp4_quantize": block_quantize([32, 200], "mxfp4"),
    "blockscale/nvfp4_quantize": block_quantize([32, 256], "nvfp4"),
    "blockscale/mxfp8_e4m3_dequantize": block_dequantize([32, 256], "mxfp8_e4m3"),
    "blockscale/mxfp4_dequantize": block_dequantize([32, 200], "mxfp4"),
    "blockscale/nvfp4_dequantize_global_scale": block_dequantize([32, 256], "nvfp4", global_scale=True),
    "moe/moe_mxfp4_experts": moe_block_scaled(24, 8, 64, 48),
    "moe/moe_grouped_matmul_none": moe_matmul(48, 8, 64, 48),
    "moe/moe_grouped_matmul_gather_top2": moe_matmul(48, 8, 64, 48, mode="GATHER"),
    "moe/moe_grouped_matmul_scatter_top2": moe_matmul(48, 8, 64, 48, mode="SCATTER"),
    "moe/moe_grouped_matmul_backward": moe_matmul_backward(96, 8, 64, 48),
}

# ------------------------------------------------------------------- perf set

#: ResNet-50 layers at batch 32 (input dims, weight dims, conv options).
RESNET50 = {
    "stem_7x7_s2": ([32, 3, 224, 224], [64, 3, 7, 7], {"pad": 3, "stride": 2}),
    "res2_1x1_64to256": ([32, 64, 56, 56], [256, 64, 1, 1], {}),
    "res2_3x3_64": ([32, 64, 56, 56], [64, 64, 3, 3], {"pad": 1}),
    "res2_1x1_256to64": ([32, 256, 56, 56], [64, 256, 1, 1], {}),
    "res3_3x3_128_s2": ([32, 128, 56, 56], [128, 128, 3, 3], {"pad": 1, "stride": 2}),
    "res4_3x3_256": ([32, 256, 14, 14], [256, 256, 3, 3], {"pad": 1}),
    "res5_1x1_512to2048": ([32, 512, 7, 7], [2048, 512, 1, 1], {}),
}

PERF: dict[str, Recipe] = {}
for _layer, (_x, _w, _opts) in RESNET50.items():
    PERF[f"perf/conv/resnet50_{_layer}_fwd"] = conv_fwd(_x, _w, "NHWC", **_opts)
    if not _layer.startswith("stem"):   # nothing needs the gradient of the input image
        PERF[f"perf/conv/resnet50_{_layer}_dgrad"] = conv_dgrad(_x, _w, "NHWC", **_opts)
    PERF[f"perf/conv/resnet50_{_layer}_wgrad"] = conv_wgrad(_x, _w, "NHWC", **_opts)
PERF.update({
    "perf/matmul/gemm_4096x4096x4096": matmul([4096, 4096], [4096, 4096]),
    "perf/matmul/gemm_8192x8192x1024": matmul([8192, 1024], [1024, 8192]),
    "perf/matmul/gemm_llm_qkv_8192x12288x4096": matmul([8192, 4096], [4096, 12288]),
    "perf/matmul/attention_qkt_b4h32s2048d128": matmul([4, 32, 2048, 128], [4, 32, 128, 2048],
                                                       transpose_b=True),
    "perf/matmul/attention_pv_b4h32s2048d128": matmul([4, 32, 2048, 2048], [4, 32, 2048, 128]),
    "perf/fused/resnet50_conv_bias_relu_3x3_64": conv_bias_relu([32, 64, 56, 56], [64, 64, 3, 3], pad=1),
    "perf/fused/llm_mlp_matmul_bias_gelu_8192x16384x4096": matmul_bias_gelu([8192, 4096], [4096, 16384]),
    "perf/norm/resnet50_batchnorm_training_64x56x56": bn_training([32, 64, 56, 56]),
    "perf/norm/resnet50_batchnorm_training_256x56x56": bn_training([32, 256, 56, 56]),
    "perf/norm/resnet50_batchnorm_backward_256x56x56": bn_backward([32, 256, 56, 56]),
    "perf/norm/llm_layernorm_8x2048x4096": layernorm([8, 2048, 4096]),
    "perf/norm/llm_rmsnorm_8x2048x4096": rmsnorm([8, 2048, 4096]),
    # qwen3's per-head q/k norm: RMSNorm over head_dim 128 of 32 heads x 4096 tokens
    "perf/norm/qwen3_qk_rmsnorm_per_head_131072x128": rmsnorm([131072, 128]),
    "perf/norm/llm_layernorm_backward_8x2048x4096": norm_backward("layernorm", [8, 2048, 4096]),
    "perf/norm/llm_rmsnorm_backward_8x2048x4096": norm_backward("rmsnorm", [8, 2048, 4096]),
    # LLM attention: prefill (causal, s 4096) and decode (one query against a 4096-token cache)
    "perf/attention/llama3_8b_prefill_s4096": sdpa(1, 32, 8, 4096, 4096, 128, causal=True),
    "perf/attention/llama3_70b_prefill_s4096": sdpa(1, 64, 8, 4096, 4096, 128, causal=True),
    "perf/attention/llama3_8b_decode_b16_kv4096": sdpa(16, 32, 8, 1, 4096, 128),
    "perf/attention/llama3_8b_decode_paged_b16_kv4096": sdpa(16, 32, 8, 1, 4096, 128, lengths=True,
                                                             pages=(64, 16 * 64)),
    "perf/attention/qwen3_30b_a3b_prefill_s4096": sdpa(1, 32, 4, 4096, 4096, 128, causal=True),
    "perf/attention/deepseek_v3_mla_prefill_s4096": sdpa(1, 128, 128, 4096, 4096, 192, 128, causal=True,
                                                         scale=0.1352337788608801),
    "perf/attention/gpt_oss_window128_sink_s4096": sdpa(1, 64, 8, 4096, 4096, 64, causal=True,
                                                        left_bound=128, sink=True),
    "perf/attention/llama3_8b_prefill_s4096_backward": sdpa_backward(1, 32, 8, 4096, 128, causal=True),
    "perf/pool/resnet50_stem_maxpool_3x3_s2": pool([32, 64, 112, 112], "MAXPOOL", 3, layout="NHWC", stride=2,
                                                   pad=1, padding_mode="NEG_INF_PAD"),
    "perf/pool/resnet50_global_avgpool_7x7_b128": pool([128, 2048, 7, 7], "AVGPOOL_INCLUDE_PADDING", 7, layout="NHWC"),
    "perf/pool/resnet50_stem_maxpool_backward": pool_backward([32, 64, 112, 112], "MAXPOOL", 3, stride=2, pad=1,
                                                              padding_mode="NEG_INF_PAD"),
    # MoE expert GEMMs, 4096 tokens: qwen3-30B-A3B (128 experts, top 8, hidden 2048, expert width 768:
    # gate+up 2048 -> 1536, down 768 -> 2048) and one expert-parallel rank (EP 8: 16 of 128 experts, the
    # 4096 x 8 / 8 rows routed to them) of qwen3-235B-A22B (hidden 4096, expert width 1536)
    "perf/moe/qwen3_30b_a3b_experts_gate_up_t4096": moe_matmul(4096, 128, 2048, 1536, top_k=8),
    "perf/moe/qwen3_30b_a3b_experts_down_scatter_t4096": moe_matmul(4096, 128, 768, 2048, mode="SCATTER",
                                                                     top_k=8),
    "perf/moe/qwen3_30b_a3b_experts_gate_up_gather_t4096": moe_matmul(4096, 128, 2048, 1536, mode="GATHER",
                                                                      top_k=8),
    "perf/moe/qwen3_235b_a22b_ep8_experts_gate_up_t4096": moe_matmul(4096, 16, 4096, 3072, top_k=1),
    # gpt-oss-20b: 32 experts, top 4, hidden 2880, gate+up 2880 -> 5760, MXFP4 weights (blocks of 32 along K)
    "perf/moe/gpt_oss_20b_mxfp4_experts_gate_up_t4096": moe_block_scaled(4096, 32, 2880, 5760),
    "perf/blockscale/mxfp8_e4m3_quantize_8192x4096": block_quantize([8192, 4096], "mxfp8_e4m3"),
    "perf/blockscale/nvfp4_dequantize_8192x4096": block_dequantize([8192, 4096], "nvfp4", global_scale=True),
    "perf/moe/qwen3_30b_a3b_experts_gate_up_t4096_backward": moe_matmul_backward(4096 * 8, 128, 2048, 1536),
})


# ------------------------------------------------------------------ output

def graphs() -> Iterator[tuple[str, Graph]]:
    """(path relative to graphs/, graph) for every sample, small set first."""
    for recipes, precisions in ((SMALL, ("fp32", "fp16", "bf16")), (PERF, ("fp16", "bf16"))):
        for stem, make in recipes.items():
            for p in precisions:
                name = f"{stem.rsplit('/', 1)[-1]}_{p}"
                b = _b(name, p)
                make(b)
                yield f"{stem}_{p}.json", b.build()


_SCALAR_LIST = re.compile(r"\[\s*((?:-?[\d.eE+-]+|true|false|null)(?:,\s*(?:-?[\d.eE+-]+|true|false|null))*)\s*\]")


def render(graph: Graph) -> str:
    """hipDNN JSON, 4-space indent, short lists of numbers on one line (as hipDNN's samples)."""
    text = json.dumps(graph_to_json(graph), indent=4)
    return _SCALAR_LIST.sub(lambda m: "[" + ", ".join(v.strip() for v in m.group(1).split(",")) + "]",
                            text) + "\n"


def generate() -> dict[str, str]:
    return {path: render(g) for path, g in graphs()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write (default: graphs/)")
    args = parser.parse_args(argv)
    files = generate()
    existing = {str(p.relative_to(args.out)) for p in args.out.rglob("*.json")}
    stale = sorted(existing - set(files))
    if args.check:
        bad = [p for p, text in files.items()
               if not (args.out / p).is_file() or (args.out / p).read_text() != text]
        for p in bad + stale:
            print(f"out of date: {p}", file=sys.stderr)
        return 1 if bad or stale else 0
    for p in stale:
        (args.out / p).unlink()
    for p, text in files.items():
        dest = args.out / p
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.is_file() or dest.read_text() != text:
            dest.write_text(text)
    print(f"{len(files)} graphs in {args.out} ({len(stale)} stale removed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

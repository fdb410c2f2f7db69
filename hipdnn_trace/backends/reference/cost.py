"""How long one float64 evaluation of a graph takes here: a small per-op cost model.

FLOPs at the matmul rate (what ``budget.py`` uses for its refusal) are a lower bound, and a poor
estimate: on the 2-core development VM the aotriton and ck attention graphs ran at 2-5 GFLOP/s, not
the 30 GFLOP/s of BLAS, because attention's softmax (an exp and ~10 array passes per score), masks,
norms, pooling and rounding are element-wise work that FLOP counts leave out, and a small graph
costs mostly the Python and numpy calls around its arrays. So the work of one evaluation is four
numbers, each turned into seconds by a rate measured once per process (:func:`measured_rates`):

* ``gemm_flops``: products that go through BLAS (conv columns, matmul, attention tiles, MoE groups);
* ``passes``: element passes over float64 arrays (one read and one write of an element);
* ``transcendental``: exp / erf / tanh evaluations (numpy's exp is ~10x a plain pass);
* ``calls``: array operations, each a few microseconds of interpreter and numpy dispatch.

The counts per op family follow what ``backends/reference/ops`` does (attention walks the same
tiles as ``ops/sdpa.py``, so keys a block cannot see cost nothing); the pass counts per element were
fitted on the bundled, perf and upstream suites (docs/benchmarks.md, "Estimates").
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from dataclasses import astuple, dataclass
from math import prod

import numpy as np

from hipdnn_trace.graph import attention
from hipdnn_trace.graph.model import Graph, Node, Tensor
from hipdnn_trace.graph.ops import node_flops
from hipdnn_trace.graph.resample import pooling


@dataclass(frozen=True)
class Work:
    """What an evaluation does, in the units :class:`Rates` turns into seconds."""

    gemm_flops: float = 0.0
    passes: float = 0.0
    transcendental: float = 0.0
    calls: float = 0.0
    small_gemm_flops: float = 0.0

    def __add__(self, other: Work) -> Work:
        return Work(*(a + b for a, b in zip(astuple(self), astuple(other))))

    def times(self, k: float) -> Work:
        return Work(*(a * k for a in astuple(self)))


@dataclass(frozen=True)
class Rates:
    """Per-second rates of this machine (``call_s``: seconds per array operation)."""

    gemm: float
    passes: float
    transcendental: float
    call_s: float
    small_gemm: float

    def seconds(self, work: Work) -> float:
        return (work.gemm_flops / self.gemm + work.small_gemm_flops / self.small_gemm + work.passes / self.passes
                + work.transcendental / self.transcendental + work.calls * self.call_s)


def total(works: Iterable[Work]) -> Work:
    out = Work()
    for w in works:
        out = out + w
    return out


# ------------------------------------------------------------------------ calibration

_PASS_ELEMENTS = 1 << 22        # 32 MiB of float64: past any cache, as the big arrays are
_CALL_REPEATS = 2000
#: an attention tile's product (a kv head's query group of 4 x 128 rows against 128 keys, d 128):
#: BLAS threads that wait on a busy core make products of this size far slower than a large one
_SMALL_GEMM = (4, 128, 128, 128)
#: products below this many FLOPs per call run at the small-product rate
SMALL_GEMM_FLOPS = 2e8


@functools.lru_cache(maxsize=1)
def measured_rates() -> Rates:
    """This machine's rates, measured once per process (~0.1 s): the BLAS rate of ``budget.py``, an
    attention tile's product, a multiply over 32 MiB into a new array (page faults included, as the
    reference's temporaries pay them), exp over the same, and a small array operation. Each is the
    faster of two tries, so a busy moment does not inflate every estimate."""
    from hipdnn_trace.backends.reference.budget import float64_rate

    a = np.random.default_rng(0).standard_normal(_PASS_ELEMENTS)
    passes = _best(lambda: a * 1.5, 2)
    exp = _best(lambda: np.exp(a), 2)
    small = np.ones(8)
    call = _best(lambda: [small * 2.0 for _ in range(_CALL_REPEATS)], 2)
    g, r, d, c = _SMALL_GEMM
    q, k = np.ones((g, r, d)), np.ones((c, d))
    np.matmul(q, k.T)
    tile = _best(lambda: np.matmul(q, k.T), 3)
    return Rates(gemm=float64_rate(), passes=_PASS_ELEMENTS / passes, transcendental=_PASS_ELEMENTS / exp,
                 call_s=call / _CALL_REPEATS, small_gemm=2.0 * g * r * d * c / tile)


def _best(fn: Callable[[], object], tries: int) -> float:
    best = float("inf")
    for _ in range(tries):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return max(best, 1e-9)


# ------------------------------------------------------------------------------ model

#: array operations every node costs beyond its arrays' work (reading its inputs, rounding outputs,
#: the executor's bookkeeping), fitted on the bundled suite's small graphs
NODE_CALLS = 40.0
#: element passes per element of each input (to float64) and output (rounded to its type, kept
#: both ways)
INPUT_PASSES = 1.0
OUTPUT_PASSES = 3.0
#: element passes per element of ``x`` for the normalization families (means, variances, scale,
#: shift; the backward forms several more products)
NORM_PASSES = {"Batchnorm": 10.0, "BatchnormInference": 5.0, "BatchnormInferenceAttributesVarianceExt": 6.0,
               "BatchnormBackward": 16.0, "Layernorm": 10.0, "LayernormBackward": 16.0,
               "RMSNorm": 7.0, "RMSNormBackward": 12.0}
#: element passes per output element of a pointwise op, beyond its inputs and output; the
#: transcendental ones add evaluations (gelu's erf is about two exps)
POINTWISE_PASSES = 2.0
POINTWISE_TRANSCENDENTAL = {"exp": 1, "log": 1, "tanh_fwd": 1, "sigmoid_fwd": 1, "swish_fwd": 1,
                            "elu_fwd": 1, "softplus_fwd": 2, "gelu_fwd": 2, "gelu_approx_tanh_fwd": 1,
                            "erf": 2, "sin": 1, "tan": 1, "gelu_bwd": 3, "gelu_approx_tanh_bwd": 1,
                            "sigmoid_bwd": 1, "tanh_bwd": 1, "swish_bwd": 1, "elu_bwd": 1, "softplus_bwd": 1}
#: attention: element passes per computed score (mask, scale, max, subtract, sum, divide, where;
#: the backward recomputes them and forms dP and dS), exp evaluations, and array calls per tile
SDPA_PASSES = {False: 12.0, True: 22.0}
SDPA_TILE_CALLS = {False: 30.0, True: 50.0}
#: pooling: passes per output element per window tap (max keeps an index and compares)
POOL_PASSES = {"MAXPOOL": 4.0, "AVG": 1.5}
#: block-scaled quantize/dequantize: passes per element (block maxima, scales, the rounding to
#: fp4/fp8 grids)
BLOCKSCALE_PASSES = 25.0
#: convolution: passes per element of the im2col columns (copied once, read by the GEMM)
CONV_COLUMN_PASSES = 1.5


def _numel(graph: Graph, uid: object) -> int:
    if not isinstance(uid, int):
        return 0
    t = graph.by_uid.get(uid)
    return 0 if t is None or t.is_value else t.numel


def _port(graph: Graph, node: Node, port: str) -> int:
    t = _tensor(graph, node, port)
    return 0 if t is None or t.is_value else t.numel


def _io_work(node: Node, graph: Graph) -> Work:
    """Reading the inputs (to float64) and rounding the outputs, plus the node's fixed calls."""
    ins = sum(_numel(graph, u) for u in node.inputs.values())
    outs = sum(_numel(graph, u) for u in node.outputs.values())
    return Work(passes=INPUT_PASSES * ins + OUTPUT_PASSES * outs, calls=NODE_CALLS)


def node_work(node: Node, graph: Graph) -> Work:
    """The work of one node in one float64 evaluation."""
    op = node.op
    special = _FAMILIES.get(op)
    body = special(node, graph) if special is not None else Work()
    if op in NORM_PASSES:
        x = max(_port(graph, node, "x"), _port(graph, node, "dy"))
        body = Work(passes=NORM_PASSES[op] * x, calls=30.0)
    return _io_work(node, graph) + body


def graph_work(graph: Graph) -> Work:
    """The work of one float64 evaluation of ``graph``."""
    return total(node_work(n, graph) for n in graph.nodes)


def graph_seconds(graph: Graph, rates: Rates | None = None) -> float:
    """Estimated seconds of one float64 evaluation of ``graph`` on this CPU."""
    return (rates or measured_rates()).seconds(graph_work(graph))


# ----------------------------------------------------------------------- op families

def _products(flops: float, calls: int = 1) -> Work:
    """``flops`` in ``calls`` BLAS products: at the small-product rate when each is small."""
    if flops / max(calls, 1) < SMALL_GEMM_FLOPS:
        return Work(small_gemm_flops=flops)
    return Work(gemm_flops=flops)


def _gemm(node: Node, graph: Graph) -> Work:
    return _products(node_flops(node, graph))


def _conv(node: Node, graph: Graph) -> Work:
    """im2col columns (C/groups x taps x N x out per group) copied, then one GEMM per chunk: the
    columns are the FLOPs over 2 K/groups."""
    flops = node_flops(node, graph)
    w = _tensor(graph, node, "w") or _tensor(graph, node, "dw")
    x = _tensor(graph, node, "x") or _tensor(graph, node, "dx")
    k_per_group = 1
    if w is not None and x is not None and len(w.dims) > 1 and len(x.dims) > 1:
        groups = max(1, x.dims[1] // max(1, w.dims[1]))
        k_per_group = max(1, w.dims[0] // groups)
    columns = flops / (2.0 * k_per_group)
    return _products(flops) + Work(passes=CONV_COLUMN_PASSES * columns, calls=20.0)


def _tensor(graph: Graph, node: Node, port: str) -> Tensor | None:
    uid = node.inputs.get(port, node.outputs.get(port))
    return graph.by_uid.get(uid) if isinstance(uid, int) else None


def _pointwise(node: Node, graph: Graph) -> Work:
    out = _port(graph, node, "out_0")
    mode = str(node.params.get("operation", "")).lower()
    return Work(passes=POINTWISE_PASSES * out, transcendental=POINTWISE_TRANSCENDENTAL.get(mode, 0) * out,
                calls=10.0)


def _reduction(node: Node, graph: Graph) -> Work:
    return Work(passes=1.0 * _port(graph, node, "in"), calls=10.0)


def _resample(node: Node, graph: Graph) -> Work:
    p = pooling(node)
    taps = prod(p.window)
    out = max(_port(graph, node, "y"), _port(graph, node, "dy"))
    per_tap = POOL_PASSES["MAXPOOL" if p.mode == "MAXPOOL" else "AVG"]
    return Work(passes=per_tap * taps * out, calls=6.0 * taps)


def _blockscale(node: Node, graph: Graph) -> Work:
    x = max(_numel(graph, u) for u in (*node.inputs.values(), *node.outputs.values()))
    return Work(passes=BLOCKSCALE_PASSES * x, calls=60.0)


def _sdpa(node: Node, graph: Graph) -> Work:
    """The tiles ``ops/sdpa.py`` walks: every computed score costs the two (forward) or five
    (backward) products over d, the softmax passes and one exp."""
    try:
        cfg = attention.config(node, graph)
    except Exception:   # noqa: BLE001 - a graph the check refuses costs nothing here
        return Work()
    scores, tiles = attention_scores(cfg)
    d = (cfg.d_qk + cfg.d_v) if not cfg.backward else (3 * cfg.d_qk + 2 * cfg.d_v)
    return _products(2.0 * d * scores, tiles) + Work(
        passes=SDPA_PASSES[cfg.backward] * scores, transcendental=float(scores),
        calls=SDPA_TILE_CALLS[cfg.backward] * tiles)


def expected_lengths(top: int, batch: int) -> list[int]:
    """Per-sequence lengths a padded (varlen) graph gets on average: the seeded inputs give the
    first sequence the full length and draw the others uniformly from 1..top
    (``bench/attention_inputs.py``)."""
    return [top] + [max(1, (top + 1) // 2)] * (batch - 1)


def attention_scores(cfg: attention.AttentionConfig) -> tuple[int, int]:
    """(scores computed, tiles) of one attention evaluation, walking ``ops/sdpa.py``'s tiles:
    row blocks of a kv head's query group, each against the key range it can see."""
    from hipdnn_trace.backends.reference.ops.sdpa import Masking, _row_blocks

    if cfg.heads_kv < 1 or cfg.heads_q % cfg.heads_kv:
        return 0, 0
    g = cfg.group
    lq = expected_lengths(cfg.seq_q, cfg.batch) if cfg.padded else [cfg.seq_q] * cfg.batch
    lkv = expected_lengths(cfg.seq_kv, cfg.batch) if cfg.padded else [cfg.seq_kv] * cfg.batch
    masking = Masking(causal=cfg.causal, bottom_right=cfg.bottom_right, left_bound=cfg.left_bound,
                      right_bound=cfg.right_bound)
    scores = tiles = 0
    for q_len, kv_len in zip(lq, lkv):
        per_head = 0
        count = 0
        for rows in _row_blocks(q_len, g, kv_len, None):
            lo, hi = masking.key_range(rows, q_len, kv_len)
            per_head += len(rows) * max(0, hi - lo)
            count += 1
        scores += g * per_head * cfg.heads_kv
        tiles += count * cfg.heads_kv
    return scores, tiles


_FAMILIES: dict[str, Callable[[Node, Graph], Work]] = {
    "ConvolutionFwd": _conv, "ConvolutionBwd": _conv, "ConvolutionWrw": _conv,
    "Matmul": _gemm, "MoeGroupedMatmul": _gemm, "MoeGroupedMatmulBwd": _gemm,
    "Pointwise": _pointwise, "Reduction": _reduction,
    "ResampleFwd": _resample, "ResampleBwd": _resample,
    "BlockScaleQuantize": _blockscale, "BlockScaleDequantize": _blockscale,
    "Sdpa": _sdpa, "SdpaBackward": _sdpa,
}

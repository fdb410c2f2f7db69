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
from dataclasses import dataclass, replace
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

    def __add__(self, other: Work) -> Work:   # field by field, not astuple: a suite's plan adds thousands
        return Work(self.gemm_flops + other.gemm_flops, self.passes + other.passes,
                    self.transcendental + other.transcendental, self.calls + other.calls,
                    self.small_gemm_flops + other.small_gemm_flops)

    def times(self, k: float) -> Work:
        return Work(self.gemm_flops * k, self.passes * k, self.transcendental * k, self.calls * k,
                    self.small_gemm_flops * k)


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
#: small products (attention tiles, decode rows) run at this fraction of the large-product rate.
#: Measured on the shared 2-core VM: with two BLAS threads and the other core busy, 1 in 5 tile-sized
#: products took 100x their usual 0.4 ms (a thread waiting for its core), so their mean rate was
#: 0.3-4 GFLOP/s against 30-40 for a 768^3 product; a mean cannot be measured in a fraction of a
#: second (two 0.1 s windows gave 10 and 0.07 GFLOP/s), so it is a constant. On an idle machine such
#: graphs finish sooner than estimated; the progress line's ETA corrects that as graphs finish.
SMALL_GEMM_EFFICIENCY = 0.1
#: products below this many FLOPs per BLAS call run at the small-product rate
SMALL_GEMM_FLOPS = 2e7


@functools.lru_cache(maxsize=1)
def measured_rates() -> Rates:
    """This machine's rates, measured once per process (0.1-0.3 s): the BLAS rate of ``budget.py``;
    a multiply over 32 MiB into a new array (page faults included, as the reference's temporaries pay
    them), exp over the same and a small array operation, each the median of three tries. Small
    products are priced at :data:`SMALL_GEMM_EFFICIENCY` of the BLAS rate."""
    from hipdnn_trace.backends.reference.budget import float64_rate

    a = np.random.default_rng(0).standard_normal(_PASS_ELEMENTS)
    passes = _median(lambda: a * 1.5)
    exp = _median(lambda: np.exp(a))
    small = np.ones(8)
    call = _median(lambda: [small * 2.0 for _ in range(_CALL_REPEATS)])
    gemm = float64_rate()
    return Rates(gemm=gemm, passes=_PASS_ELEMENTS / passes, transcendental=_PASS_ELEMENTS / exp,
                 call_s=call / _CALL_REPEATS, small_gemm=gemm * SMALL_GEMM_EFFICIENCY)


def _median(fn: Callable[[], object], tries: int = 3) -> float:
    times = []
    for _ in range(tries):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return max(sorted(times)[tries // 2], 1e-9)


# ------------------------------------------------------------------------------ model

#: array operations every node costs beyond its arrays' work (reading its inputs, rounding outputs,
#: the executor's bookkeeping), fitted on the bundled suite's small graphs
NODE_CALLS = 100.0
#: arrays of at most this many float64 elements (1 MiB) stay in the cache, where a pass over them cost
#: a quarter of one over memory (about 2e9 against 2-5e8 elements a second on the VM)
CACHED_ELEMENTS = 1 << 17
CACHED_PASS_FACTOR = 0.25
#: element passes per element of each input (to float64) and output (rounded to its type, kept
#: both ways)
INPUT_PASSES = 1.0
OUTPUT_PASSES = 3.0
#: element passes per element of ``x`` for the normalization families (means, variances, scale,
#: shift; the backward forms several more products)
NORM_PASSES = {"Batchnorm": 10.0, "BatchnormInference": 5.0, "BatchnormInferenceAttributesVarianceExt": 6.0,
               "BatchnormBackward": 16.0, "Layernorm": 10.0, "LayernormBackward": 30.0,
               "RMSNorm": 12.0, "RMSNormBackward": 30.0}
#: element passes per element of x for a norm backward's saved statistics (made with its inputs; on
#: the 8x2048x4096 bf16 graphs they took 4-6 s, far more than their ~8 array operations suggest)
NORM_STATS_PASSES = 40.0
#: element passes per output element of a pointwise op, beyond its inputs and output; the
#: transcendental ones add evaluations (gelu's erf is about two exps)
POINTWISE_PASSES = 5.0
POINTWISE_TRANSCENDENTAL = {"exp": 1, "log": 1, "tanh_fwd": 1, "sigmoid_fwd": 1, "swish_fwd": 1,
                            "elu_fwd": 1, "softplus_fwd": 2, "gelu_fwd": 2, "gelu_approx_tanh_fwd": 1,
                            "erf": 2, "sin": 1, "tan": 1, "gelu_bwd": 3, "gelu_approx_tanh_bwd": 1,
                            "sigmoid_bwd": 1, "tanh_bwd": 1, "swish_bwd": 1, "elu_bwd": 1, "softplus_bwd": 1}
#: attention: element passes per computed score (mask, scale, max, subtract, sum, divide, where;
#: the backward recomputes them and forms dP and dS), exp evaluations, and array calls per tile
SDPA_PASSES = {False: 22.0, True: 32.0}
SDPA_TILE_CALLS = {False: 30.0, True: 50.0}
#: the backward's dV and dK sum outer products over a tile's leading axes with ``np.einsum``, which
#: does not use BLAS: about 3 GFLOP/s on the VM, priced as element passes per FLOP
CONTRACT_PASSES_PER_FLOP = 0.17
#: pooling: passes per output element per window tap (max keeps an index and compares)
POOL_PASSES = {"MAXPOOL": 12.0, "AVG": 4.0}
POOL_TAP_CALLS = {"MAXPOOL": 40.0, "AVGPOOL_INCLUDE_PADDING": 20.0, "AVGPOOL_EXCLUDE_PADDING": 60.0}
#: block-scaled quantize/dequantize: passes per element (block maxima, scales, the rounding to
#: fp4/fp8 grids)
BLOCKSCALE_PASSES = {"BlockScaleQuantize": 25.0, "BlockScaleDequantize": 10.0}
#: convolution: passes per element of the im2col columns (copied once, read by the GEMM)
CONV_COLUMN_PASSES = 2.5


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
    """The work of one node in one float64 evaluation; element passes over arrays that stay in the
    cache cost :data:`CACHED_PASS_FACTOR` of a pass over memory."""
    op = node.op
    special = _FAMILIES.get(op)
    body = special(node, graph) if special is not None else Work()
    if op in NORM_PASSES:
        x = max(_port(graph, node, "x"), _port(graph, node, "dy"))
        body = Work(passes=NORM_PASSES[op] * x, calls=30.0)
    work = _io_work(node, graph) + body
    if _streamed_elements(node, graph) <= CACHED_ELEMENTS:
        work = replace(work, passes=work.passes * CACHED_PASS_FACTOR)
    return work


def _streamed_elements(node: Node, graph: Graph) -> int:
    """The largest array a node's element passes run over: its largest tensor, or for attention the
    larger of that and one tile's block of scores."""
    largest = max((_numel(graph, u) for u in (*node.inputs.values(), *node.outputs.values())), default=0)
    if node.op in ("Sdpa", "SdpaBackward"):
        try:
            scores, tiles = attention_scores(attention.config(node, graph))
        except Exception:   # noqa: BLE001 - a graph the check refuses costs nothing here
            return largest
        largest = max(largest, scores // max(tiles, 1))
    return largest


def graph_work(graph: Graph) -> Work:
    """The work of one float64 evaluation of ``graph``."""
    return total(node_work(n, graph) for n in graph.nodes)


def graph_seconds(graph: Graph, rates: Rates | None = None) -> float:
    """Estimated seconds of one float64 evaluation of ``graph`` on this CPU."""
    return (rates or measured_rates()).seconds(graph_work(graph))


# ----------------------------------------------------------------------- op families

def _products(flops: float, calls: float = 1) -> Work:
    """``flops`` in ``calls`` BLAS products: at the small-product rate when each is small."""
    if flops / max(calls, 1.0) < SMALL_GEMM_FLOPS:
        return Work(small_gemm_flops=flops)
    return Work(gemm_flops=flops)


def _gemm(node: Node, graph: Graph) -> Work:
    """A (batched) matmul is one BLAS product per batch entry; MoE one per expert group."""
    out = _tensor(graph, node, "c") or _tensor(graph, node, "output") or _tensor(graph, node, "dweight")
    batch = prod(out.dims[:-2]) if out is not None and len(out.dims) > 2 and node.op == "Matmul" else 1
    return _products(node_flops(node, graph), batch)


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
                calls=30.0)


def _reduction(node: Node, graph: Graph) -> Work:
    return Work(passes=1.0 * _port(graph, node, "in"), calls=10.0)


def _resample(node: Node, graph: Graph) -> Work:
    p = pooling(node)
    taps = prod(p.window)
    out = max(_port(graph, node, "y"), _port(graph, node, "dy"))
    per_tap = POOL_PASSES["MAXPOOL" if p.mode == "MAXPOOL" else "AVG"]
    return Work(passes=per_tap * taps * out, calls=POOL_TAP_CALLS.get(p.mode, 40.0) * taps)


def _blockscale(node: Node, graph: Graph) -> Work:
    x = max(_numel(graph, u) for u in (*node.inputs.values(), *node.outputs.values()))
    return Work(passes=BLOCKSCALE_PASSES.get(node.op, 25.0) * x, calls=60.0)


def _sdpa(node: Node, graph: Graph) -> Work:
    try:
        cfg = attention.config(node, graph)
    except Exception:   # noqa: BLE001 - a graph the check refuses costs nothing here
        return Work()
    return attention_work(cfg)


def attention_work(cfg: attention.AttentionConfig) -> Work:
    """The tiles ``ops/sdpa.py`` walks: every computed score costs the products over d (forward:
    S = QK^T and O = PV; backward: S, dP = dO V^T and dQ = dS K by BLAS, dV and dK by einsum), the
    softmax passes and one exp."""
    scores, tiles, per_kind = _attention_walk(cfg)
    blas = (cfg.d_qk + cfg.d_v) if not cfg.backward else (2 * cfg.d_qk + cfg.d_v)
    contracted = 0 if not cfg.backward else 2.0 * (cfg.d_qk + cfg.d_v) * scores
    products = 2 if not cfg.backward else 3
    return _products(2.0 * blas * scores, per_kind * products) + Work(
        passes=SDPA_PASSES[cfg.backward] * scores + CONTRACT_PASSES_PER_FLOP * contracted,
        transcendental=float(scores), calls=SDPA_TILE_CALLS[cfg.backward] * tiles)


def derived_inputs_work(node: Node, graph: Graph) -> Work:
    """What making a backward node's meaningful inputs costs (``bench/inputs.py``): attention's O and
    stats from the float64 forward, a max-pool's indices from a forward over a seeded x, a norm's
    saved statistics from its x. Nothing for other nodes."""
    if node.op == "SdpaBackward":
        try:
            # measured: the inputs' forward took about half what the same forward as a graph did
            return attention_work(replace(attention.config(node, graph), backward=False)).times(0.5)
        except Exception:   # noqa: BLE001 - a graph the check refuses costs nothing here
            return Work()
    if node.op == "ResampleBwd" and isinstance(node.inputs.get("index"), int):
        p = pooling(node)
        out, dx = _port(graph, node, "dy"), _port(graph, node, "dx")
        return Work(passes=2 * POOL_PASSES["MAXPOOL"] * prod(p.window) * out + INPUT_PASSES * dx)
    if node.op in ("LayernormBackward", "RMSNormBackward"):
        return Work(passes=NORM_STATS_PASSES * _port(graph, node, "x"))
    return Work()


def expected_lengths(top: int, batch: int) -> list[int]:
    """Per-sequence lengths a padded (varlen) graph gets on average: the seeded inputs give the
    first sequence the full length and draw the others uniformly from 1..top
    (``bench/attention_inputs.py``)."""
    return [top] + [max(1, (top + 1) // 2)] * (batch - 1)


def attention_scores(cfg: attention.AttentionConfig) -> tuple[int, int]:
    """(scores computed, tiles) of one attention evaluation, walking ``ops/sdpa.py``'s tiles
    (``tile_plan``): row blocks of a chunk of a kv head's query group, or of several kv heads' groups
    side by side (the forward), each against the key range it can see."""
    scores, tiles, _ = _attention_walk(cfg)
    return scores, tiles


def _attention_walk(cfg: attention.AttentionConfig) -> tuple[int, int, int]:
    """(scores, tiles, products of each kind): a tile makes one BLAS product per kv head it holds, its
    query heads' rows stacked (``ops/sdpa.py`` ``_per_kv_head``)."""
    from hipdnn_trace.backends.reference.ops.sdpa import _row_blocks, masking_of, tile_plan

    if cfg.heads_kv < 1 or cfg.heads_q % cfg.heads_kv:
        return 0, 0, 0
    g = cfg.group
    lq = expected_lengths(cfg.seq_q, cfg.batch) if cfg.padded else [cfg.seq_q] * cfg.batch
    lkv = expected_lengths(cfg.seq_kv, cfg.batch) if cfg.padded else [cfg.seq_kv] * cfg.batch
    masking = masking_of(cfg)
    scores = tiles = products = 0
    for q_len, kv_len in zip(lq, lkv):
        per_head = 0
        plan = tile_plan(g, cfg.heads_kv, q_len, kv_len, masking, span=not cfg.backward)
        for rows in _row_blocks(q_len, plan.rows):
            lo, hi = masking.key_range(rows, q_len, kv_len)
            per_head += len(rows) * max(0, hi - lo)
        scores += g * per_head * cfg.heads_kv
        tiles += plan.count(g, cfg.heads_kv, q_len)
        products += cfg.heads_kv * plan.count(g, 1, q_len)
    return scores, tiles, products


_FAMILIES: dict[str, Callable[[Node, Graph], Work]] = {
    "ConvolutionFwd": _conv, "ConvolutionBwd": _conv, "ConvolutionWrw": _conv,
    "Matmul": _gemm, "MoeGroupedMatmul": _gemm, "MoeGroupedMatmulBwd": _gemm,
    "Pointwise": _pointwise, "Reduction": _reduction,
    "ResampleFwd": _resample, "ResampleBwd": _resample,
    "BlockScaleQuantize": _blockscale, "BlockScaleDequantize": _blockscale,
    "Sdpa": _sdpa, "SdpaBackward": _sdpa,
}

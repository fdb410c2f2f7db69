"""How long a suite will take, graph by graph and stage by stage, before it runs.

``run`` prints the total up front and the progress line counts it down. A graph's wall time is its
stages (``graph_run.py``): load, inputs, the validating float64 reference, and per configuration
warmup + timed iterations, then validation and writing its rows. On the CPU reference the float64
evaluations dominate; each is priced by the per-op model of ``backends/reference/cost.py``. Since
the reference backend's own float64 result is the oracle, a reference run evaluates warmup + iters
times and never once more; a GPU run evaluates the oracle once (on the CPU unless
``--reference-device cuda``) and its own passes are priced at nominal device rates.

The prices of inputs and validation (element passes per element) were fitted on the 2-core
development VM (docs/benchmarks.md, "Estimates") in units of the calibrated element-pass rate, so they
scale with the machine the way the reference's own passes do; writing and the fixed parts are seconds
measured there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from hipdnn_trace.backends.reference import cost
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.gpus import NOMINAL_BYTES_PER_S, NOMINAL_FLOPS_PER_S
from hipdnn_trace.bench.graph_run import RunSettings, _cached
from hipdnn_trace.bench.loop import side_iterations
from hipdnn_trace.errors import UserError
from hipdnn_trace.graph.dtypes import DTYPES
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.graph.ops import graph_bytes, graph_flops
from hipdnn_trace.graph.sources import GraphSource

#: element passes per input element drawn (counter-based generator, rounding to the type)
INPUT_PASSES = 1.3
#: element passes per output element validated (float64 copy, chunked differences, tolerances; 40-80
#: ns an element on the perf graphs) and a fixed part per output (tolerances, records)
VALIDATE_PASSES = 30.0
VALIDATE_FIXED_S = 0.004
#: seconds of a graph's own fixed cost: load, expanding configurations, result records, console
GRAPH_FIXED_S = 0.02
#: writing a graph's rows: a fixed part, per iteration row, and per row already in the run (the
#: tables are rewritten whole after each graph, so late graphs of a long suite write more)
WRITE_FIXED_S = 0.02
WRITE_ROW_S = 30e-6
WRITE_EARLIER_ROW_S = 2.5e-6
#: a GPU backend's plan build and a kernel launch (nominal: only GPU runs use them)
GPU_INIT_S = 0.3
GPU_LAUNCH_S = 20e-6
#: torch float64 on a GPU (``--reference-device cuda``), nominal: an H100's dense float64 rate
CUDA_FLOAT64_FLOPS = 2.5e13
#: starting an isolated child (fork server, imports): once for a resident child, else per graph
CHILD_START_S = 0.6
#: the rates of the 2-core development VM (docs/benchmarks.md, "Estimates"): a suite whose estimate
#: at these rates is short is not worth measuring this machine's (about 0.2 s) for
DEFAULT_RATES = cost.Rates(gemm=3e10, passes=4e8, transcendental=4e8, call_s=7e-7,
                           small_gemm=3e10 * cost.SMALL_GEMM_EFFICIENCY)
#: below this many seconds at the default rates, the default rates stand
CALIBRATE_ABOVE_S = 5.0


@dataclass(frozen=True)
class GraphEstimate:
    """Estimated seconds of one graph per stage (in the order they run) and its iteration rows."""

    source: str
    stages: dict[str, float] = field(default_factory=dict)
    rows: int = 0

    @property
    def seconds(self) -> float:
        return sum(self.stages.values())


def reference_pass_s(graph: Graph, rates: cost.Rates, device: str = "cpu") -> float:
    """One float64 evaluation where it runs (``cuda``: nominal GPU float64 rate plus its calls)."""
    if device == "cuda":
        return graph_flops(graph) / CUDA_FLOAT64_FLOPS + len(graph.nodes) * 1e-3
    return rates.seconds(cost.graph_work(graph))


def device_pass_s(graph: Graph) -> float:
    """One execution on a GPU backend: the longer of compute and memory at nominal rates, plus
    a launch per node."""
    return max(graph_flops(graph) / NOMINAL_FLOPS_PER_S, graph_bytes(graph) / NOMINAL_BYTES_PER_S) \
        + GPU_LAUNCH_S * len(graph.nodes)


def _elements(graph: Graph, tensors: Sequence) -> int:
    return sum(t.numel for t in tensors if not t.is_value and t.data_type in DTYPES)


def inputs_s(graph: Graph, rates: cost.Rates) -> float:
    """Seeded inputs, plus what a backward's inputs are derived from (``cost.derived_inputs_work``)."""
    work = cost.Work(passes=INPUT_PASSES * _elements(graph, graph.input_tensors))
    work = work + cost.total(cost.derived_inputs_work(node, graph) for node in graph.nodes)
    return rates.seconds(work)


def _passes(settings: RunSettings, pass_s: float) -> tuple[int, int]:
    """(warmup, timed) iterations the loop will run: ``--min-time-ms`` may ask for more."""
    loop = settings.loop
    timed = max(1, loop.iters)
    if loop.min_time_ms > 0 and pass_s > 0:
        timed = max(timed, min(loop.cap(), math.ceil(loop.min_time_ms / 1e3 / pass_s)))
    return loop.warmup, timed


def _ab_passes(settings: RunSettings, pass_s: float) -> tuple[int, int, int]:
    """(warmup, timed, blocks) one configuration of an interleaved A/B runs up to its first look
    (``bench/ab.py``): a noisy machine may take up to four times as many rounds to decide."""
    from hipdnn_trace.bench.ab import min_rounds

    plan = settings.ab_plan
    assert plan is not None
    blocks = 2 * min_rounds(plan, settings.loop)
    per_block = plan.block_iters
    if plan.block_ms > 0 and pass_s > 0:
        per_block = max(per_block, math.ceil(plan.block_ms / 1e3 / pass_s))
    return blocks * settings.loop.warmup, blocks * per_block, blocks


def _recreations(settings: RunSettings, blocks: int) -> int:
    """Times an interleaved A/B re-creates each session up to its first look (``--ab-fresh-sessions N``:
    every N rounds; a round is two blocks of each configuration), each one more plan build."""
    plan = settings.ab_plan
    if plan is None or plan.fresh_every <= 0:
        return 0
    return max(0, math.ceil((blocks // 2) / plan.fresh_every) - 1)


def refused_up_front(graph: Graph, configs: Sequence[Config], settings: RunSettings) -> bool:
    """Whether ``run`` refuses ``graph`` on every configuration before it makes an input, for its
    host memory or the CPU float64 reference's time (``bench/verdict.py``, the words ``inspect``
    prints): such a graph costs its load and one row, never the hours of its evaluations. A
    reference on the GPU is not judged here (the suite's process does not start torch)."""
    try:
        return _refused_up_front(graph, configs, settings)
    except Exception:   # noqa: BLE001 - an estimate never stops a run; the run itself says what is wrong
        return False


def _refused_up_front(graph: Graph, configs: Sequence[Config], settings: RunSettings) -> bool:
    from hipdnn_trace.bench.verdict import REFERENCE, Limits, host_memory_refusal, time_limit_refusal

    if host_memory_refusal(graph):
        return True
    limits = Limits(validate=settings.validate == "reference" and not _cached(graph, settings),
                    max_reference_s=settings.max_reference_s, reference_device=settings.reference_device)
    for c in configs:
        as_backend = c.backend == REFERENCE
        if not as_backend and (not limits.validate or limits.reference_device != "cpu"):
            return False
        if time_limit_refusal(graph, limits, as_backend=as_backend) is None:
            return False
    return True


def estimate_graph(graph: Graph, configs: Sequence[Config], settings: RunSettings, rates: cost.Rates,
                   *, source: str = "") -> GraphEstimate:
    """The stages of one graph on ``configs`` under ``settings``."""
    stages = {"load": GRAPH_FIXED_S, "inputs": inputs_s(graph, rates), "reference": 0.0}
    as_backend = any(c.backend == "reference" for c in configs)
    validating = settings.validate == "reference"
    if validating and not as_backend and not _cached(graph, settings):
        stages["reference"] = reference_pass_s(graph, rates, settings.reference_device)
    rows = 0
    for c in configs:
        on_cpu = c.backend == "reference"
        pass_s = reference_pass_s(graph, rates) if on_cpu else device_pass_s(graph)
        interleaved = settings.ab and settings.ab_plan is not None and len(configs) == 2 and not settings.hooks
        warmup, timed, blocks = _ab_passes(settings, pass_s) if interleaved else (*_passes(settings, pass_s), 1)
        side = 0 if on_cpu else 2 * side_iterations(math.ceil(timed / max(blocks, 1))) * blocks
        builds = 1 + (_recreations(settings, blocks) if interleaved else 0)
        stages["init"] = stages.get("init", 0.0) + (0.0 if on_cpu else GPU_INIT_S * builds)
        stages["warmup"] = stages.get("warmup", 0.0) + warmup * pass_s
        stages["timed"] = stages.get("timed", 0.0) + (timed + side) * pass_s
        rows += warmup + timed + side
    outputs = _elements(graph, graph.output_tensors)
    stages["validate"] = len(configs) * (VALIDATE_FIXED_S * len(graph.output_tensors) + rates.seconds(
        cost.Work(passes=VALIDATE_PASSES * outputs))) if validating else 0.0
    stages["write"] = WRITE_FIXED_S + WRITE_ROW_S * rows
    return GraphEstimate(source or graph.name, stages, rows)


def estimate_suite(sources: Sequence[GraphSource], configs: Sequence[Config], settings: RunSettings,
                   *, rates: cost.Rates | None = None, isolation: str | None = None) -> list[GraphEstimate]:
    """One estimate per source, in suite order. Without ``rates`` the default ones price the suite
    first and this machine's are measured only when that comes to more than a few seconds.
    ``isolation``: ``resident`` (one child starts) or ``fresh`` (one per graph)."""
    # a graph run refuses up front costs what an unreadable one does: its load and one row
    graphs = [None if g is None or refused_up_front(g, configs, settings) else g
              for g in (_load(src, settings.allow_unknown) for src in sources)]
    if rates is None:
        quick = _suite(sources, graphs, configs, settings, DEFAULT_RATES, isolation)
        if sum(e.seconds for e in quick) < CALIBRATE_ABOVE_S:
            return quick
        rates = cost.measured_rates()
    return _suite(sources, graphs, configs, settings, rates, isolation)


def _load(src: GraphSource, allow_unknown: bool) -> Graph | None:
    try:
        return load_bytes(src.read(), src.name, allow_unknown=allow_unknown)
    except UserError:
        return None   # its error row is quick; the run says what is wrong


def _suite(sources: Sequence[GraphSource], graphs: Sequence[Graph | None], configs: Sequence[Config],
           settings: RunSettings, rates: cost.Rates, isolation: str | None) -> list[GraphEstimate]:
    """The rows written before a graph add to its write stage; a child's start to its first stage."""
    out: list[GraphEstimate] = []
    earlier = 0
    for i, (src, graph) in enumerate(zip(sources, graphs)):
        est = GraphEstimate(src.name, {"load": GRAPH_FIXED_S, "write": WRITE_FIXED_S})
        if graph is not None:
            try:
                est = estimate_graph(graph, configs, settings, rates, source=src.name)
            except Exception:   # noqa: BLE001 - an estimate never stops a run
                pass
        stages = dict(est.stages)
        stages["write"] = stages.get("write", 0.0) + WRITE_EARLIER_ROW_S * earlier
        if isolation == "fresh" or (isolation == "resident" and i == 0):
            stages = {"process start": CHILD_START_S, **stages}
        earlier += est.rows
        out.append(GraphEstimate(est.source, stages, est.rows))
    return out

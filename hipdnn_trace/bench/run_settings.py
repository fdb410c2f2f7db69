"""What one graph's run is told: the loop, the backend options, validation, A/B, profilers' hooks.

Shared by the stages of a graph's run (bench/graph_run.py, bench/arm_measure.py) and by whoever builds
the settings (runs/, the isolated child), so none of them imports another stage for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hipdnn_trace.backends.base import RunOptions
from hipdnn_trace.backends.reference.budget import DEFAULT_MAX_REFERENCE_S
from hipdnn_trace.bench.engine_config import EngineConfig
from hipdnn_trace.bench.loop import LoopSettings, Sampler
from hipdnn_trace.bench.paired import ABPlan
from hipdnn_trace.bench.records import ConfigRun
from hipdnn_trace.bench.reference_cache import ReferenceCache
from hipdnn_trace.device.kernel_clock import KernelClock
from hipdnn_trace.graph.model import Graph


class Hooks(Protocol):
    """In-process profilers: called around each configuration's warmup + timed loop."""

    def before_loop(self, graph: Graph, run: ConfigRun) -> None: ...

    def after_loop(self, graph: Graph, run: ConfigRun) -> None: ...


@dataclass
class RunSettings:
    loop: LoopSettings = field(default_factory=LoopSettings)
    options: RunOptions = field(default_factory=RunOptions)
    seed: int = 0
    validate: str = "reference"            # reference | none
    golden: Path | None = None
    atol: float | None = None
    rtol: float | None = None
    save_tensors: Path | None = None
    samplers: Sequence[Sampler] = ()
    hooks: Sequence[Hooks] = ()
    ab: bool = False                       # the two configs are an A/B pair
    ab_plan: ABPlan | None = None          # with ab: time them interleaved in ABBA blocks (None: one after the other)
    keep_outputs: bool = False             # an isolated child sends outputs back (split A/B)
    allow_unknown: bool = False            # unknown graph fields: warnings (notes) instead of errors
    kernel_clock: KernelClock | None = None   # kernel_ms from CUPTI kernel records (--timing kernel/auto)
    require_kernel_clock: bool = False     # --timing kernel: a session it cannot time is an error
    max_reference_s: float = DEFAULT_MAX_REFERENCE_S   # one float64 evaluation at most (0: no limit)
    reference_cache: ReferenceCache | None = None   # --reference-cache: float64 outputs kept on disk
    engine_config: EngineConfig | None = None   # --test-config: hipDNN rows judged by a dnn-providers engine TOML
    reference_device: str = "cpu"          # where the validating reference runs: cpu | cuda (--reference-device)

"""What running one graph produced, before it becomes frames and files.

``bench`` fills these; ``results`` turns them into rows, files and trace slices.
Arrays (outputs) stay in memory only as long as validation and --save-tensors
need them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.loop import Phase, Samples
from hipdnn_trace.bench.paired import ABResult
from hipdnn_trace.graph.model import Graph

# summary status values
OK, FAILED, UNSUPPORTED, ERROR = "ok", "failed", "unsupported", "error"


#: a resident child freeing the previous graph's memory, recorded as a phase of the graph after it
#: (bench/isolation.py; the breakdown's t_release_ms)
RELEASE_PHASE = "release previous"

@dataclass
class ConfigRun:
    """One graph on one configuration (one engine)."""

    config: Config
    engine: str = ""
    status: str = OK
    error: str | None = None
    samples: Samples | None = None
    phases: list[Phase] = field(default_factory=list)
    init_ms: float | None = None
    e2e_ms: float | None = None
    stop_reason: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    outputs: dict[int, np.ndarray] = field(default_factory=dict)
    #: the float64 reference backend's own unrounded outputs and stored tensors (every other backend: empty):
    #: the validating reference when the backend is the reference itself, so the graph is evaluated once
    float64: dict[int, np.ndarray] = field(default_factory=dict)
    stored: dict[int, np.ndarray] = field(default_factory=dict)
    validation: str = "skipped"       # passed | failed | skipped
    kernels: Any = None               # polars frames from an in-process profiler
    counters: Any = None


@dataclass
class ValidationRecord:
    """One output tensor compared against one expectation."""

    config: str
    output_uid: int
    output: str
    against: str
    dtype: str
    atol: float
    rtol: float
    max_abs: float
    max_rel: float
    mismatches: int
    nonfinite: int
    total: int
    worst_index: str
    passed: bool
    message: str
    worst: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class GraphRun:
    """Everything one graph produced across its configurations."""

    source: str
    name: str
    graph: Graph | None = None
    graph_id: str | None = None
    load_ms: float | None = None
    status: str = OK                   # ERROR when the graph could not even be loaded
    error: str | None = None
    configs: list[ConfigRun] = field(default_factory=list)
    validation: list[ValidationRecord] = field(default_factory=list)
    phases: list[Phase] = field(default_factory=list)   # graph-level: load, reference
    reference: dict[int, np.ndarray] = field(default_factory=dict)   # float64 oracle of outputs
    intermediates: dict[int, np.ndarray] = field(default_factory=dict)   # reference, stored dtypes
    notes: list[str] = field(default_factory=list)
    skip_reference: bool = False      # set when the float64 oracle would not fit in memory
    reference_placement: list[str] = field(default_factory=list)   # where the oracle's nodes ran ("cpu", "cuda:0")
    reference_origin: str | None = None   # computed | reference backend | either + ", cached" | cache
    golden: str | None = None         # an integration-test bundle's golden data: used | dvc-only | unusable | none
    bundle_notes: list[str] = field(default_factory=list)   # its notes (golden, inputs, support, disagreements)
    saved_tensors: str | None = None   # --save-tensors: the bundle's .json, or "failed: <file>: <why>"
    flops: float | None = None        # counted from the bound inputs (varlen attention: real lengths)
    undefined: dict[int, np.ndarray] = field(default_factory=dict)   # output elements an op leaves undefined
    started_ns: int | None = None     # when the suite handed the graph to its runner (breakdown's wall)
    ready_ns: int | None = None       # when its record was ready (then it may wait for the writer)
    queue_ms: float = 0.0             # how long the record waited for the run's one writer (a commit)
    ab: ABResult | None = None        # the interleaved A/B's ratio, interval and verdict (bench/ab.py)

    def graph_flops(self) -> float:
        """FLOPs of one execution: from the inputs when counted, else from the graph alone."""
        if self.flops is not None:
            return self.flops
        from hipdnn_trace.graph.ops import graph_flops

        return graph_flops(self.graph) if self.graph is not None else 0.0

    @property
    def unrunnable(self) -> bool:
        """Failed before any configuration ran (bad file, no memory for its tensors)."""
        return self.status == ERROR and not self.configs

    def drop_arrays(self) -> None:
        """Free tensors once validation and --save-tensors are done."""
        self.reference = {}
        self.intermediates = {}
        for c in self.configs:
            c.outputs, c.float64, c.stored = {}, {}, {}

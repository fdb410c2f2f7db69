"""``RunRequest``: every option of ``run``, typed, with its default.

The command line (``commands/run.py``, whose parser takes its defaults from here) and the Python API
(``api.run``) both build one; ``plan.plan_run`` turns it into a plan. A new ``run`` option is a field
here and a flag in ``commands/run.py``; ``tests/runs/test_plan.py`` checks the two agree.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from hipdnn_trace.backends.reference.budget import DEFAULT_MAX_REFERENCE_S
from hipdnn_trace.bench.paired import ABPlan
from hipdnn_trace.bench.shard import ShardSpec

#: --reference-device as given; "auto" is resolved once, by plan.resolve_reference_device
ReferenceDevice = Literal["auto", "cpu", "cuda"]
REFERENCE_DEVICES: tuple[ReferenceDevice, ...] = ("auto", "cpu", "cuda")
#: where the validating float64 reference runs, once resolved
ResolvedDevice = Literal["cpu", "cuda"]
#: --gpus: off (None), every GPU this process may use ("all"), or these indices
Gpus = tuple[int, ...] | Literal["all"] | None

@dataclass(frozen=True)
class RunRequest:
    """What was asked of one ``run``: the flags' values after argparse, a recipe and a resume."""

    graphs: tuple[str, ...] = ()
    config: Path | None = None
    # what runs
    backend: str = "reference"
    engine: str | None = None
    autotune: bool = False
    oracle: bool = False                # each graph on its out-of-the-box and its tuned plan (bench/oracle.py)
    a: str | None = None
    b: str | None = None
    a_path: str | None = None
    a_id: str | None = None
    b_path: str | None = None
    b_id: str | None = None
    allow_unknown_fields: bool = False
    include_perf: bool = False
    # timing
    warmup: int = 10
    iters: int = 100
    min_time_ms: float = 0.0
    max_rel_ci: float | None = None
    max_iters: int | None = None
    cache: Literal["warm", "cold"] = "warm"
    timing: Literal["auto", "kernel", "staged", "events"] = "auto"
    cuda_graph: bool = False
    device: int = 0
    clocks: str = "off"
    throttle_threshold: float = 75.0    # % of the reference clock under which a sample is throttled (0: off)
    keep_throttled: bool = False
    torch_sdpa_backend: str = "default"
    markers: str = "auto"
    # A/B: interleaved blocks until decided (bench/ab.py)
    ab_band: float = ABPlan.band
    ab_block: int = ABPlan.block_iters
    ab_block_ms: float = ABPlan.block_ms
    ab_min_rounds: int = ABPlan.min_rounds
    ab_max_rounds: int = ABPlan.max_rounds
    ab_max_seconds: float = ABPlan.max_seconds
    ab_fresh_sessions: int = ABPlan.fresh_every
    ab_sequential: bool = False
    # reliability and scale-out
    isolate: bool | None = None
    fresh_child: bool = False
    graph_timeout: float | None = None
    max_reference_seconds: float = DEFAULT_MAX_REFERENCE_S
    reference_device: ReferenceDevice = "auto"
    resume: Path | None = None
    shard: ShardSpec | None = None
    gpus: Gpus = None
    # profiling
    profile: str = "none"
    profile_set: str | None = None
    profile_child: str | None = None
    # validation
    validate: Literal["reference", "none"] = "reference"
    golden: Path | None = None
    rtol: float | None = None
    atol: float | None = None
    test_config: Path | None = None     # a dnn-providers engine TOML: its tolerances, validators, skips
    seed: int = 0
    reference_cache: str = "none"
    reference_cache_max: float = 20.0
    plan_cache: str = "auto"            # built execution plans kept between runs (backends/plan_cache.py)
    plan_cache_max: float = 2.0
    build_workers: str | int = "auto"   # cuDNN plans the cache lacks, built in processes before the suite
    # output
    out: Path = Path("runs")
    run_id: str | None = None
    format: tuple[str, ...] = ("parquet",)
    trace: bool = True
    save_tensors: Path | None = None
    db: str | None = None   # after the run: import it into this results store (history/)
    peaks: str | None = None            # speed of light: a peak table row or a peaks file (default: the GPU's row)
    quiet: bool = False
    verbose: bool = False
    progress: Literal["auto", "on", "off"] = "auto"
    #: the run's own arguments as given (after ``run``): run.json's argv, a profiled child's command line
    argv: tuple[str, ...] = ()

    @property
    def gpus_flag(self) -> str:
        """``--gpus`` as the user wrote it, for messages."""
        return "--gpus " + ("all" if self.gpus == "all" else ",".join(map(str, self.gpus or ())))


#: the options a caller may set (every field but the command line itself)
OPTIONS: tuple[str, ...] = tuple(f.name for f in fields(RunRequest) if f.name != "argv")


def normalize(name: str, value: Any) -> Any:
    """``value`` of option ``name`` as argparse gives it, in the request's form: sequences as tuples,
    --gpus' parser values (False: off, None: all, a list: indices) as None / "all" / a tuple."""
    if name == "gpus":
        return None if value is False else "all" if value is None else tuple(value)
    if name in ("graphs", "format", "argv"):
        return tuple(str(v) for v in value)
    if name in ("config", "resume", "golden", "save_tensors", "out") and value is not None:
        return Path(value)
    return value


def request_from_args(args: argparse.Namespace) -> RunRequest:
    """The request argparse's namespace holds (after a recipe and a resume were applied)."""
    given = vars(args)
    return RunRequest(**{f.name: normalize(f.name, given[f.name]) for f in fields(RunRequest) if f.name in given})

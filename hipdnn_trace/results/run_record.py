"""run.json as a typed record: what a run writes about how its numbers were made.

``RunRecord`` and its blocks (timing, validation, isolation, gpus, reference cache and device, inputs,
estimate, profile, oracle) are dataclasses; ``to_json()`` gives run.json's keys exactly as they have always been
written, and ``from_json()`` reads any run.json back (an older one lacks keys, a newer one has more): a
key the file lacks stays absent and a key this version does not know is kept, so reading and writing
again changes nothing. Only results/ writes run.json (``rundir.RunWriter`` and ``profile_fold``);
``runs/record.py`` fills a record from a run's plan, profilers return what they add.
"""

from __future__ import annotations

import datetime as _dt
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

from hipdnn_trace import __version__
from hipdnn_trace.backends.installed import dist_versions
from hipdnn_trace.bench.records import GraphRun
from hipdnn_trace.device.clock import CLOCK_NAME
from hipdnn_trace.results.environment import recorded_environment
from hipdnn_trace.results.metadata import CORE_PACKAGES, machine


@dataclass
class Block:
    """One JSON object of run.json. ``OPTIONAL`` keys are left out while None (they appear once
    set); keys read from a file that this version does not know are kept (``unknown``)."""

    OPTIONAL: ClassVar[frozenset[str]] = frozenset()
    NESTED: ClassVar[dict[str, type[Block]]] = {}

    def __post_init__(self) -> None:
        object.__setattr__(self, "_absent", {n for n in self.OPTIONAL if getattr(self, n) is None})
        object.__setattr__(self, "_unknown", {})

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        absent = self.__dict__.get("_absent")
        if absent is not None:
            absent.discard(name)   # set once: written from now on, None included

    @property
    def unknown(self) -> dict[str, Any]:
        """Keys this version does not model: from a file, or a tool's own (a profile's details)."""
        return self.__dict__["_unknown"]

    def to_json(self) -> dict[str, Any]:
        absent = self.__dict__["_absent"]
        out = {f.name: _json(getattr(self, f.name)) for f in fields(self) if f.name not in absent}
        out.update(self.unknown)
        return out

    def update(self, values: Mapping[str, Any]) -> None:
        """Set known keys as fields and keep the rest as unknown ones."""
        names = {f.name for f in fields(self)}
        for key, value in values.items():
            if key in names:
                setattr(self, key, value)
            else:
                self.unknown[key] = value

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Any:
        """The block a run.json object holds; nested blocks typed where they are objects."""
        names = [f.name for f in fields(cls)]
        known = {}
        for name in names:
            if name in data:
                value = data[name]
                nested = cls.NESTED.get(name)
                known[name] = nested.from_json(value) if nested and isinstance(value, Mapping) else value
        block = cls(**known)
        object.__setattr__(block, "_absent", {n for n in names if n not in data})
        block.unknown.update({k: v for k, v in data.items() if k not in names})
        return block


def _json(value: Any) -> Any:
    return value.to_json() if isinstance(value, Block) else value


@dataclass
class Timing(Block):
    """How every number was timed; ``compare`` refuses runs whose timing differs."""

    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"ab"})

    timer: str | None = None            # host | device-events
    cache: str | None = None            # warm | cold
    warmup: int | None = None
    iters: int | None = None
    min_time_ms: float | None = None
    max_rel_ci: float | None = None
    staged: bool | None = None
    timing: str | None = None           # --timing as asked
    kernel_clock: str | None = None     # the CUPTI kernel clock's source, or why it is off
    cuda_graph: bool | None = None
    clock_control: str | None = None    # an external profiler's clock policy (ncu)
    markers: str | None = None
    clock_lock: str | None = None       # what --clocks asked; RunRecord.clocks: what held
    profiler: str | None = None
    clocks: dict[str, Any] | None = None   # NVML clock sampling's description
    trace_clock: str = CLOCK_NAME
    ab: dict[str, Any] | None = None    # an interleaved A/B's plan (bench/paired.py ABPlan), when one ran


@dataclass
class Validation(Block):
    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"test_config"})
    against: str | None = None          # reference | none
    golden: str | None = None
    atol: float | None = None
    rtol: float | None = None
    test_config: str | None = None      # --test-config: a dnn-providers engine TOML (bench/engine_config.py)


@dataclass
class Isolation(Block):
    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"split", "warm_up_s", "successor_warm_up_s", "server_started_s"})

    enabled: bool = False
    graph_timeout_s: float | None = None
    child: str | None = None            # resident | fresh per graph
    split: list[list[str]] | None = None   # configurations run in processes of their own
    warm_up_s: dict[str, float] | None = None   # the resident child's set-up before the first graph (bench/warm.py)
    successor_warm_up_s: list[float] | None = None   # each successor's set-up between graphs (a retired/dead child)
    server_started_s: float | None = None   # when the fork server was started, seconds after the command began


@dataclass
class Gpus(Block):
    """--gpus: the GPUs, how each worker was pinned, and where each graph ran."""

    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"warm_up_s", "successor_warm_up_s"})

    devices: list[int] = field(default_factory=list)
    variable: str | None = None
    visible: dict[str, str] = field(default_factory=dict)
    cpus: dict[str, list[int]] = field(default_factory=dict)
    order: str | None = None
    graphs: dict[str, Any] = field(default_factory=dict)
    warm_up_s: dict[str, Any] | None = None   # GPU -> its worker's set-up before its first graph (bench/warm.py)
    successor_warm_up_s: dict[str, list[float]] | None = None   # GPU -> its successors' set-ups between graphs


@dataclass
class ReferenceCache(Block):
    folder: str | None = None
    max_bytes: int | None = None
    graphs: dict[str, str] = field(default_factory=dict)   # graph -> where its reference came from


@dataclass
class ReferenceDevice(Block):
    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"graphs"})

    asked: str | None = None            # --reference-device
    used: str | None = None             # cpu | cuda, resolved once
    graphs: dict[str, list[str]] | None = None   # graph -> where the oracle's nodes ran


@dataclass
class Inputs(Block):
    generator: str | None = None        # --resume refuses another generator


@dataclass
class Estimate(Block):
    seconds: float = 0.0
    graphs: dict[str, float] = field(default_factory=dict)
    rates: dict[str, Any] = field(default_factory=dict)


@dataclass
class Oracle(Block):
    """run --oracle: which configuration is whose tuned twin, and how each backend tunes
    (bench/oracle.py, docs/oracle.md)."""

    pairs: list[dict[str, str]] = field(default_factory=list)   # [{"ootb": NAME#ootb, "tuned": NAME#tuned}]
    tuning: dict[str, str | None] = field(default_factory=dict)   # backend -> "autotune" | "backend"

    def pair_names(self) -> list[tuple[str, str]]:
        """(ootb config, tuned config) of each pair."""
        return [(str(p["ootb"]), str(p["tuned"])) for p in self.pairs if isinstance(p, Mapping)]


@dataclass
class Profile(Block):
    """A profiler's block: its name, the commands an external one ran, and its own details."""

    OPTIONAL: ClassVar[frozenset[str]] = frozenset({"commands"})

    tool: str | None = None
    commands: list[str] | None = None

    @classmethod
    def of(cls, tool: str, details: Mapping[str, Any], commands: list[str] | None = None) -> Profile:
        profile = cls(tool=tool, commands=commands)
        profile.update(details)
        return profile


@dataclass
class RunRecord(Block):
    """run.json. Blocks that only some runs have are OPTIONAL (left out until set)."""

    OPTIONAL: ClassVar[frozenset[str]] = frozenset({
        "gpus", "resumed", "estimate", "clocks", "sessions", "profile", "elapsed_s", "phases_s", "error",
        "speed_of_light", "saved_tensors", "oracle", "environment", "bundles", "plan_builders"})
    NESTED: ClassVar[dict[str, type[Block]]] = {
        "timing": Timing, "validation": Validation, "isolation": Isolation, "gpus": Gpus,
        "reference_cache": ReferenceCache, "reference_device": ReferenceDevice, "inputs": Inputs,
        "estimate": Estimate, "profile": Profile, "oracle": Oracle}

    run_id: str = ""
    created: str | None = None
    status: str = "running"
    argv: list[str] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    machine: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] | None = None   # cwd and the variables that matter (results/environment.py)
    gpu: dict[str, Any] | None = None
    timing: Timing = field(default_factory=Timing)
    seed: int = 0
    configs: list[dict[str, Any]] = field(default_factory=list)
    graphs: list[str] = field(default_factory=list)
    shard: dict[str, Any] | None = None
    shard_from: dict[str, str] | None = None
    validation: Validation = field(default_factory=Validation)
    isolation: Isolation = field(default_factory=Isolation)
    gpus: Gpus | None = None
    max_reference_seconds: float | None = None
    reference_cache: ReferenceCache | None = None
    reference_device: ReferenceDevice = field(default_factory=ReferenceDevice)
    inputs: Inputs = field(default_factory=Inputs)
    speed_of_light: dict[str, Any] | None = None   # --peaks asked, the peaks used and their source (or why none)
    resumed: list[dict[str, Any]] | None = None
    estimate: Estimate | None = None
    clocks: dict[str, Any] | None = None     # --clocks: what held (device/clock_lock.py's record)
    sessions: dict[str, Any] | None = None   # configuration -> how it ran, per graph
    profile: Profile | None = None
    elapsed_s: float | None = None
    phases_s: dict[str, float] | None = None   # the command's wall by phase (runs/phases.py)
    error: str | None = None
    saved_tensors: dict[str, str] | None = None   # --save-tensors: graph -> its bundle, or why it is missing
    oracle: Oracle | None = None             # --oracle: the ootb/tuned pairs
    bundles: dict[str, dict[str, Any]] | None = None   # integration-test bundle rows: source -> golden, notes
    plan_builders: dict[str, Any] | None = None   # --build-workers: what the builders did (runs/plan_builders.py)

    @classmethod
    def start(cls, **values: Any) -> RunRecord:
        """A new run's record: created now, running, this package's versions and this machine."""
        now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        versions = {"hipdnn_trace": __version__, "python": sys.version.split()[0],
                    **dist_versions(CORE_PACKAGES)}
        return cls(created=now, versions=versions, machine=machine(), environment=recorded_environment(), **values)

    def finish(self, status: str, **extra: Any) -> None:
        """How the run ended (status, elapsed_s, error, a merge's warnings ...)."""
        self.update({"status": status, **extra})

    def add_sessions(self, g: GraphRun) -> None:
        """How each configuration ran a graph (timer, fallbacks, plan) into ``sessions``."""
        sessions = self.sessions = self.sessions if self.sessions is not None else {}
        for c in g.configs:
            info = {k: v for k, v in c.info.items() if k not in ("traceback", "cupti", "autotune")}
            if not info:
                continue
            entry = sessions.setdefault(c.config.name, {"method": info, "graphs": {}})
            entry["graphs"][g.name] = {k: info[k] for k in ("plan", "workspace_bytes", "timing_fallback", "timer",
                                                            "timing", "plan_source", "plan_cache_note") if k in info}

    def add_reference(self, g: GraphRun) -> None:
        """Where a graph's reference came from (the cache block) and where it ran (the device block)."""
        if g.reference_origin and self.reference_cache is not None:
            self.reference_cache.graphs[g.name] = g.reference_origin
        if g.reference_placement:   # the oracle's nodes: "cpu", "cuda:0 (NAME)"
            if self.reference_device.graphs is None:
                self.reference_device.graphs = {}
            self.reference_device.graphs[g.name] = g.reference_placement

    def add_handout(self, source: str, handout: Any) -> None:
        """--gpus: where ``source`` ran (its GPU and worker)."""
        assert self.gpus is not None
        self.gpus.graphs[source] = asdict(handout)


def as_record(meta: RunRecord | Mapping[str, Any]) -> RunRecord:
    """A record, from a record or a run.json object (an older file's included)."""
    return meta if isinstance(meta, RunRecord) else RunRecord.from_json(meta)

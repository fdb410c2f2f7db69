"""The one small protocol every executor implements.

A backend turns a graph into a :class:`Session` (timed by the harness as "init"),
and a session runs it on bound inputs. Backends never time themselves and never
write files: ``bench`` owns the clock and ``results`` owns the files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from hipdnn_trace.device.timers import Timer
from hipdnn_trace.graph.model import Graph


@dataclass(frozen=True)
class Support:
    """Whether a backend can run something, and if not, why (one line)."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


SUPPORTED = Support(True)


@dataclass(frozen=True)
class Engine:
    """One way a backend can execute a graph (a cuDNN plan, a hipDNN engine...)."""

    index: int
    name: str
    knobs: Mapping[str, Any] = field(default_factory=dict)
    workspace_bytes: int | None = None
    detail: str = ""

    def label(self) -> str:
        return self.name if self.name else str(self.index)


@dataclass(frozen=True)
class RunOptions:
    """How the harness wants a session set up; backends ignore what they cannot do."""

    cache: str = "warm"              # warm | cold (flush L2 between iterations)
    timing: str = "events"           # events | staged (hold the stream while enqueueing)
    cuda_graph: bool = False
    device: int = 0
    plugin_path: str | None = None   # hipDNN: engine plugin folder for A/B of builds
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SecondOpinion:
    """Another kernel of the same library for the recheck of a FAILED row (bench/recheck.py): what the
    row calls it, and the engine and options that ask for it."""

    label: str
    engine: Engine | None
    options: RunOptions


@runtime_checkable
class Session(Protocol):
    """A prepared graph on one device with its buffers."""

    timer: Timer
    engine: Engine | None

    def bind(self, tensors: Mapping[int, np.ndarray]) -> None:
        """Copy inputs (logical arrays in the tensor's dtype, keyed by uid) to the device."""

    def execute(self) -> None:
        """Enqueue one execution (asynchronous on a GPU)."""

    def synchronize(self) -> None:
        """Wait until everything enqueued has finished."""

    def prepare_iteration(self) -> None:
        """Work between iterations that must stay out of the timed region (L2 flush)."""

    def fetch(self, uids: Iterable[int]) -> dict[int, np.ndarray]:
        """Outputs back to the host as logical arrays in their dtype."""

    def info(self) -> dict[str, Any]:
        """What run.json should record about how this session runs (method, fallbacks)."""

    def close(self) -> None: ...


class Backend(Protocol):
    name: str

    def available(self) -> Support:
        """Is the library importable and a device present?"""

    # optional: ``installed() -> Support``, whether the library is there, asked by ``run`` before it
    # creates anything (cheap: found, not imported, so the parent of GPU children stays light and clean)
    # optional: ``package_versions() -> dict``, versions known without importing the library (what the
    # parent of isolated children records; each child's set-up reports ``versions()`` as loaded)
    # optional: ``preload: tuple[str, ...]``, modules a worker's fork server imports before it forks
    # children (importing them makes no device context), so no child pays them again
    # optional: ``warm_up(options) -> None``, the process-wide set-up every graph of a process would
    # otherwise pay on its first one (device context, library handles); a resident child runs it
    # before its first graph (bench/warm.py), so no graph's wall carries it
    # optional: ``known_refusal(graph, engine, options) -> str | None``, what ``prepare`` would raise as
    # UnsupportedError without building anything (a known crash, a refusal a plan cache remembers); ``run``
    # asks before it makes inputs and the reference, which such a row never reads (bench/config_expansion.py)

    def check(self, graph: Graph) -> Support:
        """Can this backend express the graph? Static: needs no device."""

    def engines(self, graph: Graph, options: RunOptions) -> list[Engine]:
        """The engines ``--engine`` may choose from (empty: the backend has one way)."""

    def prepare(self, graph: Graph, engine: Engine | None, options: RunOptions) -> Session:
        """Build plans and allocate buffers: what the harness times as init."""

    def versions(self) -> dict[str, str]:
        """Library versions for run.json."""

"""STAND-IN backends for ``run --oracle`` (no GPU here): the CPU reference underneath, with a
fixed per-execution time instead of a device's, so which plan is faster is decided, not measured.

``twospeed`` stands in for cuDNN (``oracle_tuning = "autotune"``): two engines, ``slow``
(4 ms, the heuristic's default) and ``fast`` (1 ms). A graph named ``wrong__...`` makes the
``fast`` engine spoil one output element: a tuned plan that is faster but wrong.

``tunedproc`` stands in for torch and hipDNN (``oracle_tuning = "backend"``): no engines; it
tunes itself when ``RunOptions.extra["tuned"]`` is set, through a process-wide switch (as
``cudnn.benchmark`` and TunableOp are), so its ``process_key`` separates the tuned twin. Each
session's info says which process it ran in and whether the switch was already on when the
session was prepared; the ootb plan takes 3 ms, a tuned one 1.5 ms.

Registered by tests through ``hipdnn_trace.backends.REGISTRY`` with this folder on sys.path.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import numpy as np
from stand_in import DelegatingSession, ReferenceStandIn

from hipdnn_trace.backends.base import Engine, RunOptions
from hipdnn_trace.graph.model import Graph

TWO_SPEED_SPEC = "oracle_backends:TwoSpeedBackend"
TUNED_PROCESS_SPEC = "oracle_backends:TunedProcessBackend"
SLOW_MS, FAST_MS = 4.0, 1.0
OOTB_MS, TUNED_MS = 3.0, 1.5

#: the stand-in of a process-wide tuning switch (torch.backends.cudnn.benchmark)
PROCESS_TUNED = {"on": False}


class FixedTimer:
    """A timer that says each execution took ``ms`` (the stand-in's device time)."""

    kind = "stand-in"

    def __init__(self, ms: float) -> None:
        self.ms = ms

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def elapsed_ms(self) -> float:
        return self.ms


class StandInSession(DelegatingSession):
    def __init__(self, inner: Any, engine: Engine | None, ms: float, spoil: bool, info: dict[str, Any]) -> None:
        super().__init__(inner)
        self.engine, self.spoil, self._info = engine, spoil, info
        self.timer = FixedTimer(ms)

    def fetch(self, uids: Iterable[int]) -> dict[int, np.ndarray]:
        out = super().fetch(uids)
        if self.spoil:
            for array in out.values():
                array.reshape(-1)[0] = 1e6
        return out

    def info(self) -> dict[str, Any]:
        return {"timer": "stand-in", **self._info}


class _StandIn(ReferenceStandIn):
    def versions(self) -> dict[str, str]:
        return {self.name: "stand-in"}


class TwoSpeedBackend(_StandIn):
    name = "twospeed"
    oracle_tuning = "autotune"
    ENGINES = (Engine(index=0, name="slow"), Engine(index=1, name="fast"))

    def engines(self, graph: Graph, options: RunOptions) -> list[Engine]:
        return list(self.ENGINES)

    def prepare(self, graph: Graph, engine: Engine | None, options: RunOptions) -> StandInSession:
        chosen = engine or self.ENGINES[0]   # the heuristic's choice is the slow engine
        fast = chosen.name == "fast"
        inner = self.reference.prepare(graph, None, options)
        return StandInSession(inner, chosen, FAST_MS if fast else SLOW_MS,
                              spoil=fast and graph.name.startswith("wrong__"), info={"pid": os.getpid()})


class TunedProcessBackend(_StandIn):
    name = "tunedproc"
    oracle_tuning = "backend"

    def engines(self, graph: Graph, options: RunOptions) -> list[Engine]:
        return []

    def process_key(self, options: RunOptions) -> str | None:
        return "tuned" if options.extra.get("tuned") else None

    def prepare(self, graph: Graph, engine: Engine | None, options: RunOptions) -> StandInSession:
        seen_on = PROCESS_TUNED["on"]
        info: dict[str, Any] = {"pid": os.getpid(), "switch_on_at_prepare": seen_on}
        if options.extra.get("tuned"):
            PROCESS_TUNED["on"] = True
            info["tuning"] = {"detail": "stand-in process-wide switch on", "available": True}
        inner = self.reference.prepare(graph, None, options)
        return StandInSession(inner, None, TUNED_MS if PROCESS_TUNED["on"] else OOTB_MS, spoil=False, info=info)

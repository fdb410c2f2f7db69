"""The CPU reference backend: numpy, float64 accumulation, the embedded default.

It is both a backend you can time (host clock) and the oracle every other backend
is validated against, so it refuses anything it cannot compute exactly rather
than giving an approximate answer.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from hipdnn_trace.backends.base import SUPPORTED, Engine, RunOptions, Support
from hipdnn_trace.backends.reference import executor
from hipdnn_trace.backends.reference.memory import available_memory_bytes, memory_refusal, needed_memory_bytes
from hipdnn_trace.device.timers import HostTimer
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.model import Graph

__all__ = ["ReferenceBackend", "ReferenceSession", "available_memory_bytes", "memory_refusal",
           "needed_memory_bytes"]


class ReferenceSession:
    engine: Engine | None = None

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.timer = HostTimer()
        self._inputs: dict[int, np.ndarray] = {}
        self._result: executor.Evaluation | None = None

    def bind(self, tensors: Mapping[int, np.ndarray]) -> None:
        self._inputs = dict(tensors)
        self._result = None

    def execute(self) -> None:
        self._result = executor.evaluate(self.graph, self._inputs)

    def synchronize(self) -> None:
        pass

    def prepare_iteration(self) -> None:
        pass

    def fetch(self, uids: Iterable[int]) -> dict[int, np.ndarray]:
        if self._result is None:
            raise RuntimeError("fetch before execute")
        return {u: self._result.stored[u] for u in uids}

    def float64_outputs(self, uids: Iterable[int]) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
        """(unrounded float64 values of ``uids``, every produced tensor in its type) of the last
        execute: the oracle itself, so a run validating this backend needs no second evaluation."""
        if self._result is None:
            raise RuntimeError("float64_outputs before execute")
        return {u: self._result.exact[u] for u in uids}, dict(self._result.stored)

    def info(self) -> dict[str, Any]:
        return {"timer": "host", "device": platform.processor() or platform.machine()}

    def close(self) -> None:
        self._inputs.clear()
        self._result = None


class ReferenceBackend:
    name = "reference"
    vendor = None

    def available(self) -> Support:
        return SUPPORTED

    def check(self, graph: Graph) -> Support:
        reason = executor.check(graph)
        return Support(False, reason) if reason else SUPPORTED

    def engines(self, graph: Graph, options: RunOptions) -> list[Engine]:
        return []

    def prepare(self, graph: Graph, engine: Engine | None, options: RunOptions) -> ReferenceSession:
        support = self.check(graph)
        if not support:
            raise UnsupportedError(support.reason)
        refusal = memory_refusal(graph)
        if refusal is not None:
            raise UnsupportedError(refusal)
        return ReferenceSession(graph)

    def versions(self) -> dict[str, str]:
        return {"numpy": np.__version__}

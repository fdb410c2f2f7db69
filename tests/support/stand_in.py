"""What the test stand-in backends share (no GPU here): a session that hands every call to the CPU
reference's session underneath, and a backend that checks graphs as the reference does. The
stand-ins (faulty_backend.py, oracle_backends.py, visible_backend.py) override only what they fake."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from hipdnn_trace.backends.base import SUPPORTED, Engine, Support
from hipdnn_trace.backends.reference import ReferenceBackend
from hipdnn_trace.graph.model import Graph


class DelegatingSession:
    """A session that runs the reference session ``inner``; ``fetch`` hands back copies, so a
    stand-in may damage them without touching the reference's buffers."""

    engine: Engine | None = None

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.timer = inner.timer

    def bind(self, tensors: Mapping[int, np.ndarray]) -> None:
        self.inner.bind(tensors)

    def execute(self) -> None:
        self.inner.execute()

    def synchronize(self) -> None:
        self.inner.synchronize()

    def prepare_iteration(self) -> None:
        self.inner.prepare_iteration()

    def fetch(self, uids: Iterable[int]) -> dict[int, np.ndarray]:
        return {u: np.array(a, copy=True) for u, a in self.inner.fetch(uids).items()}

    def info(self) -> dict[str, Any]:
        return {"timer": "host"}

    def close(self) -> None:
        self.inner.close()


class ReferenceStandIn:
    """A backend with no vendor that supports what the CPU reference supports."""

    vendor = None

    def __init__(self) -> None:
        self.reference = ReferenceBackend()

    def available(self) -> Support:
        return SUPPORTED

    def check(self, graph: Graph) -> Support:
        return self.reference.check(graph)

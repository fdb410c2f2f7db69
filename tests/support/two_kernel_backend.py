"""A stand-in for a library with two kernels (no GPU here): the recheck's subject (bench/recheck.py).

The graph's name picks the behaviour (``<mode>__anything``), like faulty_backend.py:
``firstbad``: the default kernel (no engine, or engine ``broken``) writes NaN into every output element,
the ``good`` engine computes right: the recheck must blame the library;
``bothbad``: both kernels write NaN: the recheck must not attribute the fault;
``secondraises``: the default kernel writes NaN, the ``good`` engine raises: the recheck could not run;
``onlyone``: the default kernel writes NaN and the library lists one kernel only: no recheck.
Every kernel runs the CPU reference underneath (stand_in.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from stand_in import DelegatingSession, ReferenceStandIn

from hipdnn_trace.backends.base import Engine, RunOptions
from hipdnn_trace.graph.model import Graph

NAME = "twokernel"
SPEC = "two_kernel_backend:TwoKernelBackend"
BROKEN, GOOD = Engine(index=0, name="broken"), Engine(index=1, name="good")


def mode_of(graph: Graph) -> str:
    return graph.name.split("__", 1)[0]


class TwoKernelSession(DelegatingSession):
    def __init__(self, inner: Any, nan: bool, engine: Engine) -> None:
        super().__init__(inner)
        self.nan = nan
        self.engine = engine

    def fetch(self, uids: Iterable[int]) -> dict[int, np.ndarray]:
        out = super().fetch(uids)
        if self.nan:
            for array in out.values():
                array[...] = np.nan
        return out


class TwoKernelBackend(ReferenceStandIn):
    name = NAME

    def engines(self, graph: Graph, options: RunOptions) -> list[Engine]:
        return [BROKEN] if mode_of(graph) == "onlyone" else [BROKEN, GOOD]

    def prepare(self, graph: Graph, engine: Engine | None, options: RunOptions) -> TwoKernelSession:
        mode, engine = mode_of(graph), engine or BROKEN
        if engine.name == GOOD.name and mode == "secondraises":
            raise RuntimeError("the second kernel refuses this graph")
        nan = engine.name == BROKEN.name or mode == "bothbad"
        return TwoKernelSession(self.reference.prepare(graph, None, options), nan, engine)

    def versions(self) -> dict[str, str]:
        return {"twokernel": "test"}

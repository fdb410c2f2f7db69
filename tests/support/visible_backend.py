"""A test backend that says which GPU it was given: a stand-in for a GPU backend under ``--gpus``
(no GPU here). It runs the faulty backend (the CPU reference underneath) and, in ``prepare``,
appends one JSON line to the file named by ``VISIBLE_BACKEND_LOG``: the graph, the
visibility variables this process saw, ``--device``, the pid, its CPUs and thread-pool size
(``warm_up`` appends a ``"warm": true`` line the same way). Appends of one short line
are atomic, so workers on several GPUs can share the file."""

from __future__ import annotations

import json
import os
from typing import Any

from faulty_backend import FaultyBackend, FaultySession

from hipdnn_trace.backends.base import Engine, RunOptions
from hipdnn_trace.graph.model import Graph

NAME = "visible"
VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
LOG = "VISIBLE_BACKEND_LOG"


def seen() -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in VARIABLES}


class VisibleSession(FaultySession):
    def info(self) -> dict[str, Any]:
        return {**super().info(), "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}


def _append(entry: dict[str, Any]) -> None:
    log = os.environ.get(LOG)
    if log:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(entry) + "\n").encode())
        finally:
            os.close(fd)


class VisibleBackend(FaultyBackend):
    name = NAME
    #: a fork server imports these before it forks (a GPU backend's torch or cuDNN frontend)
    preload = ("colorsys",)

    def package_versions(self) -> dict[str, str]:
        """What the suite process records without importing the library."""
        return {"visible": "found, not loaded"}

    def versions(self) -> dict[str, str]:
        """What a child that loaded the library reports (it replaces the parent's entry)."""
        return {"visible": f"loaded by {os.getpid()}"}

    def warm_up(self, options: RunOptions) -> None:
        """Logs ``{"warm": true, ...}``: a stand-in for a GPU backend's context and library set-up."""
        _append({"warm": True, "device": options.device, "pid": os.getpid(), **seen()})

    def prepare(self, graph: Graph, engine: Engine | None, options: RunOptions) -> VisibleSession:
        _append({"graph": graph.name, "device": options.device, "pid": os.getpid(), **seen(),
                 "cpus": sorted(os.sched_getaffinity(0)), "threads": os.environ.get("OMP_NUM_THREADS")})
        inner = super().prepare(graph, engine, options)
        return VisibleSession(inner.inner, inner.mode)

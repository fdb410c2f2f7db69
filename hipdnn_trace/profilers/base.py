"""The two kinds of profiler and how ``run`` finds them.

*In-process* profilers (CUPTI) hook around each configuration's timed loop and
hand back kernels/counters frames directly. *External* profilers (ncu,
rocprofv3, rocprof) wrap a child ``hipdnn-trace run`` that writes the run
directory as usual; after it exits the parent parses what the tool wrote and
adds kernels, counters, verdicts and trace tracks to the same run directory.
A profiler that must replay the application (rocprofv3 counter passes) runs the
child once per pass; pass 0 is the run, later passes only feed counters.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from hipdnn_trace.errors import UserError

#: name -> ("module:class", kind)
REGISTRY: dict[str, tuple[str, str]] = {
    "cupti": ("hipdnn_trace.profilers.cupti:CuptiProfiler", "in-process"),
    "ncu": ("hipdnn_trace.profilers.ncu:NcuProfiler", "external"),
    "rocprofv3": ("hipdnn_trace.profilers.rocprof.runner:Rocprofv3Profiler", "external"),
    "rocprof": ("hipdnn_trace.profilers.rocprof.runner:RocprofLegacyProfiler", "external"),
}


@dataclass
class Collected:
    """What an external profiler's output parses into."""

    kernels: pl.DataFrame
    counters: pl.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)   # goes to run.json "profile"


class ExternalProfiler(Protocol):
    """``args`` below: the run's request (runs/request.py ``RunRequest``: device, profile_set, format ...)."""

    name: str
    markers: str          # marker API the child must use: "nvtx" | "roctx"

    def check_tool(self) -> None:
        """Raise ToolMissingError (one line) when the tool is not installed."""

    def passes(self, args: Any) -> int:
        """How many times the child must run (1 unless counters need replays)."""

    def command(self, child_argv: list[str], out_dir: Path, pass_index: int,
                args: Any) -> list[str]:
        """The full command line: the tool wrapping ``child_argv``, writing into ``out_dir``."""

    def env(self, pass_index: int) -> dict[str, str]:
        """Extra environment for the child."""

    def collect(self, run_dir: Path, pass_dirs: list[Path], iterations: pl.DataFrame,
                args: Any) -> Collected:
        """Parse the tool's output into kernels/counters frames joined to iterations."""

    def timing_meta(self, args: Any) -> dict[str, Any]:
        """What run.json's timing block must say (e.g. clock_control) for compare."""


def load(name: str) -> tuple[Any, str]:
    """(profiler instance, kind) for ``--profile NAME``."""
    if name not in REGISTRY:
        raise UserError(f"unknown profiler {name!r} (choose from {', '.join(REGISTRY)})")
    target, kind = REGISTRY[name]
    module_name, _, cls = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise UserError(f"--profile {name} is not part of this build") from None
        raise
    return getattr(module, cls)(), kind

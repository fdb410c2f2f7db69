"""Phase markers for profilers: NVTX, roctx or nothing, behind one small API.

Every run marks the same phases (see docs/timing.md): ``graph <graph_id> <config>``
around everything done for one graph x config, inside it ``init``, ``warmup`` and
``execute``, and inside ``execute`` one ``iter <i>`` per timed iteration. NVTX
names live in the domain ``hipdnn_trace``; roctx has no domains, so its names are
prefixed ``hipdnn_trace:``. Names never contain ``/`` or ``@``: ncu's NVTX filter
uses them as separators.

Per-iteration cost is the marker call itself: iteration names (and NVTX event
attributes) are built before the timed loop. NVTX calls reach a tool only when one is
injected (nvtx3 loads the library ``NVTX_INJECTION64_PATH`` names; Nsight Systems and
Nsight Compute set it, and CUDA_INJECTION64_PATH, in the process they profile); without
one the per-iteration ranges are skipped, the phase ranges stay.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from hipdnn_trace.device.cupti_activity import EXTERNAL_PROFILER_ENV, external_profiler
from hipdnn_trace.markers_base import DOMAIN, ROCTX_PREFIX, Markers, graph_range_name, iteration_name

__all__ = ["DOMAIN", "ROCTX_PREFIX", "Markers", "NvtxMarkers", "graph_range_name", "iteration_name",
           "nvtx_tool_attached", "select"]

#: Variables an NVTX-consuming tool sets in the process it profiles: the injection path nvtx3
#: reads, and those that mark an external CUDA profiler.
NVTX_TOOL_ENV = ("NVTX_INJECTION64_PATH", *EXTERNAL_PROFILER_ENV)


def nvtx_tool_attached() -> bool:
    """A tool that receives NVTX ranges is attached to this process."""
    return bool(os.environ.get("NVTX_INJECTION64_PATH")) or external_profiler() is not None


class NvtxMarkers(Markers):
    """NVTX push/pop ranges in the ``hipdnn_trace`` domain (python ``nvtx`` package)."""

    kind = "nvtx"

    def __init__(self) -> None:
        import nvtx

        self._domain: Any = nvtx.get_domain(DOMAIN)
        self._attrs: dict[str, Any] = {}
        self._iters: list[Any] = []
        self.iteration_ranges = nvtx_tool_attached()

    def _attributes(self, name: str) -> Any:
        attrs = self._attrs.get(name)
        if attrs is None:
            attrs = self._attrs[name] = self._domain.get_event_attributes(message=name)
        return attrs

    def push(self, name: str) -> None:
        self._domain.push_range(self._attributes(name))

    def pop(self) -> None:
        self._domain.pop_range()

    def mark(self, name: str) -> None:
        self._domain.mark(self._attributes(name))

    def prepare_iterations(self, count: int) -> None:
        while len(self._iters) < count:
            self._iters.append(self._domain.get_event_attributes(message=iteration_name(len(self._iters))))

    def push_iteration(self, i: int) -> None:
        self._domain.push_range(self._iters[i] if i < len(self._iters) else self._attributes(iteration_name(i)))


def _nvtx_available() -> bool:
    return importlib.util.find_spec("nvtx") is not None


def _roctx_markers() -> Markers | None:
    """roctx markers when a roctx library can be loaded (see markers_roctx.py)."""
    try:
        from hipdnn_trace.markers_roctx import RoctxMarkers, roctx_available
    except ImportError:
        return None
    return RoctxMarkers() if roctx_available() else None


def select(kind: str = "auto", *, vendor: str | None = None) -> Markers:
    """Markers of ``kind`` (auto | nvtx | roctx | none).

    ``auto`` picks the marker API of the backend's vendor ("nvidia" / "amd") when
    importable, else whichever exists, else no-op markers.
    """
    from hipdnn_trace.errors import ToolMissingError

    if kind == "none":
        return _no_markers()
    if kind == "nvtx":
        if not _nvtx_available():
            raise ToolMissingError("--markers nvtx: the python package 'nvtx' is not installed")
        return NvtxMarkers()
    if kind == "roctx":
        markers = _roctx_markers()
        if markers is None:
            raise ToolMissingError("--markers roctx: no roctx library found "
                                   "(rocprofiler-sdk's roctx module or librocprofiler-sdk-roctx.so)")
        return markers
    if kind != "auto":
        raise ValueError(f"unknown marker kind {kind!r}")
    order = ["roctx", "nvtx"] if vendor == "amd" else ["nvtx", "roctx"]
    for candidate in order:
        if candidate == "nvtx" and _nvtx_available():
            return NvtxMarkers()
        if candidate == "roctx" and (markers := _roctx_markers()) is not None:
            return markers
    return _no_markers()


def _no_markers() -> Markers:
    markers = Markers()
    markers.iteration_ranges = False
    return markers

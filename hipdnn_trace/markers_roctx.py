"""roctx markers: rocprofiler-sdk's Python ``roctx`` module, else the roctx library by ctypes.

Three ways to reach roctx, first found wins:

1. ``import roctx`` — rocprofiler-sdk's bindings (``source/lib/python/roctx``, installed
   under ``<rocm>/lib/pythonX.Y/site-packages``): ``rangePush(msg)``, ``rangePop()``,
   ``mark(msg)``, ``profilerPause(tid=0)``, ``profilerResume(tid=0)``.
2. ``librocprofiler-sdk-roctx.so`` by ctypes (rocprofiler-sdk ``roctx.h``):
   ``int roctxRangePushA(const char*)``, ``int roctxRangePop(void)``,
   ``void roctxMarkA(const char*)``, ``int roctxProfilerPause(roctx_thread_id_t)``,
   ``int roctxProfilerResume(roctx_thread_id_t)`` with ``roctx_thread_id_t = uint64_t``
   (0 = every thread of the process).
3. legacy ``libroctx64.so`` (roctracer): the same push/pop/mark symbols, no pause/resume.

``HIPDNN_TRACE_ROCTX_LIB`` names a library to use instead of searching.

Pause/resume. rocprofiler-sdk's rocprofv3 stops its tracing contexts on
``roctxProfilerPause`` whenever ``--marker-trace`` is on, not only under
``--selected-regions`` (``rocprofiler-sdk-tool/tool.cpp``, ``cntrl_tracing_callback``).
Pausing after every timed loop would therefore hide the next graph's ``init`` and
``warmup`` from an ordinary trace, so pause()/resume() call roctx only when the
profiler asked for scoped collection (``HIPDNN_TRACE_ROCTX_REGIONS=1``, set by the
rocprofv3 runner for ``--selected-regions`` passes). Ranges pushed while collection is
paused are not recorded, so in that mode resume() re-opens the enclosing ``graph`` range
inside the collected region and pause() closes it again: kernels in a scoped pass still
name their graph and configuration.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hipdnn_trace.markers_base import ROCTX_PREFIX, Markers, iteration_name

#: Environment switch for scoped collection (see the module docstring).
REGIONS_ENV = "HIPDNN_TRACE_ROCTX_REGIONS"
LIBRARY_ENV = "HIPDNN_TRACE_ROCTX_LIB"
SDK_LIBRARY = "librocprofiler-sdk-roctx.so"
LEGACY_LIBRARY = "libroctx64.so"
_PY_FUNCTIONS = ("rangePush", "rangePop", "mark")


class RoctxApi:
    """push/pop/mark/pause/resume over whichever roctx was found."""

    def __init__(self, source: str, push: Callable[[bytes], Any], pop: Callable[[], Any],
                 mark: Callable[[bytes], Any], pause: Callable[[int], Any] | None,
                 resume: Callable[[int], Any] | None, encode: bool) -> None:
        self.source = source
        self.push, self.pop, self.mark = push, pop, mark
        self.pause, self.resume = pause, resume
        self.encode = encode      # ctypes wants bytes; the Python module wants str


def _python_module() -> RoctxApi | None:
    try:
        module = importlib.import_module("roctx")
    except ImportError:
        return None
    if not all(callable(getattr(module, f, None)) for f in _PY_FUNCTIONS):
        return None   # some other package called roctx
    pause = getattr(module, "profilerPause", None)
    resume = getattr(module, "profilerResume", None)
    where = getattr(module, "__file__", None) or "roctx"
    return RoctxApi(f"python roctx module ({where})", module.rangePush, module.rangePop, module.mark,
                    pause if callable(pause) else None, resume if callable(resume) else None, encode=False)


def _library_candidates() -> list[str]:
    explicit = os.environ.get(LIBRARY_ENV)
    if explicit:
        return [explicit]
    names: list[str] = []
    roots = [os.environ.get(v) for v in ("ROCM_PATH", "ROCM_HOME", "HIP_PATH")] + ["/opt/rocm"]
    for lib in (SDK_LIBRARY, LEGACY_LIBRARY):
        names.append(lib)                       # the loader's own search (LD_LIBRARY_PATH, ldconfig)
        names += [str(Path(r) / "lib" / lib) for r in roots if r]
        found = ctypes.util.find_library(lib.removeprefix("lib").removesuffix(".so"))
        if found:
            names.append(found)
    return list(dict.fromkeys(names))


def load_library(path: str) -> RoctxApi | None:
    """roctx through ctypes from one library; None if it cannot be loaded or lacks push/pop."""
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    try:
        push, pop, mark = lib.roctxRangePushA, lib.roctxRangePop, lib.roctxMarkA
    except AttributeError:
        return None
    push.argtypes, push.restype = [ctypes.c_char_p], ctypes.c_int
    pop.argtypes, pop.restype = [], ctypes.c_int
    mark.argtypes, mark.restype = [ctypes.c_char_p], None
    pause = getattr(lib, "roctxProfilerPause", None)
    resume = getattr(lib, "roctxProfilerResume", None)
    for fn in (pause, resume):
        if fn is not None:
            fn.argtypes, fn.restype = [ctypes.c_uint64], ctypes.c_int
    return RoctxApi(f"ctypes {path}", push, pop, mark, pause, resume, encode=True)


_FOUND: list[RoctxApi | None] = []


def find_roctx(refresh: bool = False) -> RoctxApi | None:
    """The roctx to use (cached): the Python module, else a library found by ctypes."""
    if refresh or not _FOUND:
        api = _python_module()
        if api is None:
            for candidate in _library_candidates():
                api = load_library(candidate)
                if api is not None:
                    break
        _FOUND[:] = [api]
    return _FOUND[0]


def roctx_available() -> bool:
    return find_roctx() is not None


class RoctxMarkers(Markers):
    """Phase ranges as roctx thread ranges named ``hipdnn_trace:<name>``."""

    kind = "roctx"

    def __init__(self, api: RoctxApi | None = None, *, scoped: bool | None = None) -> None:
        api = api or find_roctx()
        if api is None:
            raise RuntimeError("no roctx library found")
        self.api = api
        self.scoped = os.environ.get(REGIONS_ENV) == "1" if scoped is None else scoped
        self._names: dict[str, Any] = {}
        self._iters: list[Any] = []
        self._stack: list[str] = []
        self._reopened = False

    def _encoded(self, name: str) -> Any:
        value = self._names.get(name)
        if value is None:
            full = ROCTX_PREFIX + name
            value = self._names[name] = full.encode() if self.api.encode else full
        return value

    def push(self, name: str) -> None:
        self._stack.append(name)
        self.api.push(self._encoded(name))

    def pop(self) -> None:
        if self._stack:
            self._stack.pop()
        self.api.pop()

    def mark(self, name: str) -> None:
        self.api.mark(self._encoded(name))

    def prepare_iterations(self, count: int) -> None:
        while len(self._iters) < count:
            name = iteration_name(len(self._iters))
            self._iters.append((name, self._encoded(name)))

    def push_iteration(self, i: int) -> None:
        if i < len(self._iters):
            name, encoded = self._iters[i]
            self._stack.append(name)
            self.api.push(encoded)
        else:
            self.push(iteration_name(i))

    def resume(self) -> None:
        if not self.scoped or self.api.resume is None:
            return
        self.api.resume(0)
        graph = next((n for n in reversed(self._stack) if n.startswith("graph ")), None)
        if graph is not None:
            self.api.push(self._encoded(graph))   # re-open: its first push was not collected
            self._reopened = True

    def pause(self) -> None:
        if not self.scoped or self.api.pause is None:
            return
        if self._reopened:
            self.api.pop()
            self._reopened = False
        self.api.pause(0)

    def describe(self) -> str:
        pause = "with pause/resume" if self.api.pause is not None else "no pause/resume"
        return f"{self.api.source}, {pause}{', scoped' if self.scoped else ''}"

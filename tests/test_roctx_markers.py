"""roctx markers through a stand-in Python ``roctx`` module and through ctypes on a tiny
stand-in shared library compiled here (skipped without gcc). Neither is rocprofiler-sdk:
they record the calls hipdnn-trace makes so the names, nesting and pause/resume can be
checked; whether rocprofv3 records them is rocprofiler-sdk's business."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from amd_helpers import STAND_INS

from hipdnn_trace import markers_roctx
from hipdnn_trace.errors import ToolMissingError
from hipdnn_trace.markers import graph_range_name, select as select_markers
from hipdnn_trace.markers_roctx import REGIONS_ENV, RoctxMarkers, find_roctx, load_library, roctx_available


@pytest.fixture(autouse=True)
def _fresh_roctx_search(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(markers_roctx, "_FOUND", [])
    monkeypatch.delenv(REGIONS_ENV, raising=False)
    yield


def _stand_in_roctx(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("roctx", STAND_INS / "roctx" / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "roctx", module)
    return module


def _phases(markers: RoctxMarkers, iterations: int = 2) -> None:
    """What the harness does for one graph x config (bench/graph_run + bench/loop)."""
    markers.push(graph_range_name("0123abcd", "hipdnn:MIOPEN_ENGINE@/opt/a b"))
    markers.push("init")
    markers.pop()
    markers.push("warmup")
    markers.pop()
    markers.prepare_iterations(iterations)
    markers.resume()
    markers.push("execute")
    for i in range(iterations):
        markers.push_iteration(i)
        markers.pop()
    markers.pop()
    markers.pause()
    markers.mark("done")
    markers.pop()


def test_python_roctx_module_is_used_first_with_stand_in_roctx_module(monkeypatch) -> None:
    roctx = _stand_in_roctx(monkeypatch)
    api = find_roctx(refresh=True)
    assert api is not None and api.source.startswith("python roctx module")
    _phases(RoctxMarkers())
    assert roctx.CALLS == [
        ("push", "hipdnn_trace:graph 0123abcd hipdnn:MIOPEN_ENGINE__opt_a_b"),
        ("push", "hipdnn_trace:init"), ("pop", None), ("push", "hipdnn_trace:warmup"), ("pop", None),
        ("push", "hipdnn_trace:execute"),
        ("push", "hipdnn_trace:iter 0"), ("pop", None), ("push", "hipdnn_trace:iter 1"), ("pop", None),
        ("pop", None), ("mark", "hipdnn_trace:done"), ("pop", None),
    ]   # no pause/resume outside scoped collection: they would stop rocprofv3's whole trace


def test_scoped_collection_pauses_and_reopens_the_graph_range_with_stand_in_roctx_module(monkeypatch) -> None:
    roctx = _stand_in_roctx(monkeypatch)
    monkeypatch.setenv(REGIONS_ENV, "1")
    markers = RoctxMarkers()
    assert markers.scoped
    _phases(markers, iterations=1)
    graph = "hipdnn_trace:graph 0123abcd hipdnn:MIOPEN_ENGINE__opt_a_b"
    assert roctx.CALLS[5:] == [
        ("resume", 0), ("push", graph),                       # collected region opens, graph range again
        ("push", "hipdnn_trace:execute"), ("push", "hipdnn_trace:iter 0"), ("pop", None), ("pop", None),
        ("pop", None), ("pause", 0),                          # the re-opened graph range closes first
        ("mark", "hipdnn_trace:done"), ("pop", None),
    ]
    depth = 0
    for op, _ in roctx.CALLS:
        depth += {"push": 1, "pop": -1}.get(op, 0)
        assert depth >= 0
    assert depth == 0


def test_a_foreign_roctx_module_is_ignored_and_missing_roctx_is_one_line(monkeypatch, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "roctx", ModuleType("roctx"))   # some other package of that name
    monkeypatch.setenv("HIPDNN_TRACE_ROCTX_LIB", str(tmp_path / "libnothing.so"))
    assert not roctx_available()
    with pytest.raises(ToolMissingError) as info:
        select_markers("roctx")
    assert "\n" not in str(info.value)


def test_auto_markers_pick_roctx_for_amd_backends_with_stand_in_roctx_module(monkeypatch) -> None:
    _stand_in_roctx(monkeypatch)
    assert select_markers("auto", vendor="amd").kind == "roctx"
    assert select_markers("roctx").kind == "roctx"


_C_SOURCE = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
static FILE* out(void) {
    static FILE* f = 0;
    if (!f) { f = fopen(getenv("STAND_IN_ROCTX_C_LOG"), "a"); setvbuf(f, 0, _IONBF, 0); }
    return f;
}
static int depth = 0;
int roctxRangePushA(const char* m) { fprintf(out(), "push %s\n", m); return depth++; }
int roctxRangePop(void) { fprintf(out(), "pop\n"); return depth > 0 ? --depth : -1; }
void roctxMarkA(const char* m) { fprintf(out(), "mark %s\n", m); }
#ifndef LEGACY
int roctxProfilerPause(uint64_t tid) { fprintf(out(), "pause %llu\n", (unsigned long long)tid); return 0; }
int roctxProfilerResume(uint64_t tid) { fprintf(out(), "resume %llu\n", (unsigned long long)tid); return 0; }
#endif
"""


def _compile(tmp_path: Path, name: str, legacy: bool = False) -> Path:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler to build the stand-in roctx library")
    src = tmp_path / "stand_in_roctx.c"
    src.write_text(_C_SOURCE)
    lib = tmp_path / name
    cmd = [gcc, "-shared", "-fPIC", "-o", str(lib), str(src)] + (["-DLEGACY"] if legacy else [])
    subprocess.run(cmd, check=True, capture_output=True)
    return lib


def test_ctypes_roctx_with_stand_in_shared_library(monkeypatch, tmp_path) -> None:
    lib = _compile(tmp_path, "librocprofiler-sdk-roctx.so")
    log = tmp_path / "calls.txt"
    monkeypatch.setitem(sys.modules, "roctx", None)                 # no Python module: ctypes it is
    monkeypatch.setenv("HIPDNN_TRACE_ROCTX_LIB", str(lib))
    monkeypatch.setenv("STAND_IN_ROCTX_C_LOG", str(log))
    monkeypatch.setenv(REGIONS_ENV, "1")
    api = find_roctx(refresh=True)
    assert api is not None and api.source == f"ctypes {lib}" and api.pause is not None
    _phases(RoctxMarkers(), iterations=1)
    graph = "hipdnn_trace:graph 0123abcd hipdnn:MIOPEN_ENGINE__opt_a_b"
    assert log.read_text().splitlines() == [
        f"push {graph}", "push hipdnn_trace:init", "pop", "push hipdnn_trace:warmup", "pop",
        "resume 0", f"push {graph}", "push hipdnn_trace:execute", "push hipdnn_trace:iter 0", "pop", "pop",
        "pop", "pause 0", "mark hipdnn_trace:done", "pop",
    ]


def test_legacy_roctx_library_without_pause_resume_with_stand_in_shared_library(monkeypatch, tmp_path) -> None:
    lib = _compile(tmp_path, "libroctx64.so", legacy=True)
    log = tmp_path / "calls.txt"
    monkeypatch.setenv("STAND_IN_ROCTX_C_LOG", str(log))
    api = load_library(str(lib))
    assert api is not None and api.pause is None and api.resume is None
    markers = RoctxMarkers(api, scoped=True)
    _phases(markers, iterations=1)
    lines = log.read_text().splitlines()
    assert not any(line.startswith(("pause", "resume")) for line in lines)
    assert lines.count("push hipdnn_trace:execute") == 1 and "no pause/resume" in markers.describe()


def test_a_library_without_roctx_symbols_is_not_used(tmp_path) -> None:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "other.c"
    src.write_text("int something(void) { return 1; }\n")
    lib = tmp_path / "libother.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, capture_output=True)
    assert load_library(str(lib)) is None
    assert load_library(str(tmp_path / "missing.so")) is None

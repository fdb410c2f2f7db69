"""Shared test setup: helpers importable, hardware markers skip cleanly where the hardware is absent.

``tests/support`` (helper modules, stand-ins and test backends; tests/README.md) goes on ``sys.path``
here, so every test imports its helpers by module name wherever the test lives.

``gpu``/``cuda`` tests need an NVIDIA GPU, ``rocm`` tests an AMD GPU. Detection
never imports a heavy framework when a cheap check answers: no /dev/nvidia* or
/dev/kfd means no device.
"""

from __future__ import annotations

import functools
import glob
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: Upstream data beside the repo (read in place, never copied): skip when absent.
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"
#: Helper modules, stand-ins and test backends, imported by module name from any test folder.
SUPPORT = REPO / "tests" / "support"
if str(SUPPORT) not in sys.path:
    sys.path.insert(0, str(SUPPORT))


@functools.cache
def has_cuda() -> bool:
    if not glob.glob("/dev/nvidia[0-9]*") and not os.environ.get("CUDA_VISIBLE_DEVICES"):
        return False
    try:
        from cuda.bindings import runtime

        err, count = runtime.cudaGetDeviceCount()
        return int(err) == 0 and count > 0
    except Exception:  # any failure means no usable device
        try:
            import torch

            return bool(torch.cuda.is_available())
        except Exception:
            return False


@functools.cache
def has_rocm() -> bool:
    return os.path.exists("/dev/kfd") and bool(glob.glob("/dev/dri/renderD*"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if ("cuda" in item.keywords or "gpu" in item.keywords) and "rocm" not in item.keywords and not has_cuda():
            item.add_marker(pytest.mark.skip(reason="needs an NVIDIA GPU"))
        if "rocm" in item.keywords and not has_rocm():
            item.add_marker(pytest.mark.skip(reason="needs an AMD GPU with ROCm"))


@pytest.fixture
def shared_fixtures() -> Path:
    if not SHARED_FIXTURES.is_dir():
        pytest.skip("upstream fixtures (../shared/fixtures) not present")
    return SHARED_FIXTURES


@pytest.fixture
def faulty(monkeypatch: pytest.MonkeyPatch) -> str:
    """Register the faulty backend (support/faulty_backend.py, a stand-in for a crashing vendor library)
    in this process; returns its name. Isolated children receive the registry entries of the backends they
    run from the parent; CLI subprocesses find it through ``HIPDNN_TRACE_EXTRA_BACKENDS``
    (reliability_helpers.cli_env)."""
    from reliability_helpers import FAULTY_SPEC

    from hipdnn_trace import backends

    monkeypatch.setitem(backends.REGISTRY, "faulty", FAULTY_SPEC)
    return "faulty"


#: variables a hipDNN session exports for its library's own cache (backends/plan_cache.py hipdnn_cache_env)
_LIBRARY_CACHE_VARIABLES = ("HIPDNN_CACHE_DIR", "HIPDNN_DISABLE_CACHE")


@pytest.fixture(autouse=True)
def _library_cache_variables_stay_per_test():
    """A (stand-in) hipDNN session sets its cache variables in this process, as it must before the library
    reads them; each test gets the environment back as it found it."""
    before = {name: os.environ.get(name) for name in _LIBRARY_CACHE_VARIABLES}
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def steady_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host memory available, as both commands see it, fixed at its value when the test starts: whether
    the float64 copies fit decides some verdicts (a reference dropped for its memory is never timed), and on a
    shared CI machine other processes move it between the inspect and the run by gigabytes."""
    from hipdnn_trace.backends import reference
    from hipdnn_trace.backends.reference import memory

    have = reference.available_memory_bytes()
    monkeypatch.setattr(reference, "available_memory_bytes", lambda: have)
    monkeypatch.setattr(memory, "available_memory_bytes", lambda: have)

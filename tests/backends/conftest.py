"""Backend test setup: the hipDNN stand-ins for what cannot exist here (an AMD GPU and its libraries).

Every stand-in lives in ``tests/support/stand_ins/`` and says so in its docstring; tests that use one
carry ``stand_in`` in their name.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from types import ModuleType

import pytest
from amd_helpers import STAND_INS

from hipdnn_trace.backends import hipdnn as hipdnn_backend
from hipdnn_trace.backends.hipdnn_api import reset_frontend


def _load_stand_in_package() -> ModuleType:
    spec = importlib.util.spec_from_file_location("stand_in_hipdnn_frontend",
                                                  STAND_INS / "hipdnn_frontend" / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module      # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def stand_in_frontend(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., ModuleType]]:
    """install(generation, **settings) -> the stand-in module now imported as hipdnn_frontend.

    Also gives the hipdnn backend a fresh process plugin state, as a new process would have.
    """
    package = _load_stand_in_package()

    def install(generation: str = "newest", **settings: object) -> ModuleType:
        module = package.build(generation, **settings)
        monkeypatch.setitem(sys.modules, "hipdnn_frontend", module)
        monkeypatch.setattr(hipdnn_backend, "_PLUGINS", hipdnn_backend._PluginState())
        reset_frontend()
        return module

    yield install
    reset_frontend()


"""Executors behind one protocol, imported only when asked for.

Importing a GPU backend may load CUDA or HIP libraries; the registry keeps that off
the path of users who run the reference backend only.
"""

from __future__ import annotations

import importlib

from hipdnn_trace.backend_registry import REGISTRY  # the one dict: registering an extra backend adds to it
from hipdnn_trace.backends.base import Backend, Engine, RunOptions, Session, Support
from hipdnn_trace.errors import UserError

_instances: dict[str, Backend] = {}


def names() -> list[str]:
    return list(REGISTRY)


def get(name: str) -> Backend:
    """The backend called ``name``; UserError for an unknown name."""
    if name not in REGISTRY:
        raise UserError(f"unknown backend {name!r} (choose from {', '.join(REGISTRY)})")
    if name not in _instances:
        module_name, _, cls = REGISTRY[name].partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                raise UserError(f"backend {name!r} is not part of this build") from None
            raise
        _instances[name] = getattr(module, cls)()
    return _instances[name]


__all__ = ["REGISTRY", "Backend", "Engine", "RunOptions", "Session", "Support", "get", "names"]

"""Fixtures of the reliability tests.

The faulty backend (``faulty_backend.py`` beside this file, a stand-in for a
crashing vendor library) is registered in this process by patching
``hipdnn_trace.backends.REGISTRY``; isolated children receive the registry entries
of the backends they run from the parent, and CLI subprocesses find it through
``HIPDNN_TRACE_EXTRA_BACKENDS`` (reliability_helpers.cli_env).
"""

from __future__ import annotations

import pytest
from reliability_helpers import FAULTY_SPEC, HERE

from hipdnn_trace import backends


@pytest.fixture
def faulty(monkeypatch: pytest.MonkeyPatch) -> str:
    """Register the faulty backend in this process; returns its name."""
    monkeypatch.setitem(backends.REGISTRY, "faulty", FAULTY_SPEC)
    monkeypatch.syspath_prepend(str(HERE))
    return "faulty"

"""Paths for the AMD profiler tests: our own fixtures and the upstream ones beside the repo."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[0] / "data" / "rocprof"
ROCPROF_FIXTURES = HERE.parents[1] / ".." / "shared" / "fixtures" / "rocprof"


@pytest.fixture
def data() -> Path:
    return DATA


@pytest.fixture
def upstream() -> Path:
    """The real profiler outputs in ../shared/fixtures/rocprof (read in place); skip without them."""
    if not ROCPROF_FIXTURES.is_dir():
        pytest.skip("upstream rocprof fixtures (../shared/fixtures/rocprof) not present")
    return ROCPROF_FIXTURES.resolve()

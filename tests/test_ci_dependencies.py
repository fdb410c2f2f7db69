"""CI exercises every backend that can run on a CPU (issue 33: 49 tests skipped in CI because torch was
not installed, so the torch backend and the import paths of every GPU machine went untested). Under
CI (CI=true, as .ci/run runs) every CPU-installable optional dependency must be importable, so no test
can skip for want of one; elsewhere this test says which are missing and skips."""

from __future__ import annotations

import importlib.util
import os

import pytest

#: what the README's test command installs (pyproject's dev and torch extras) and tests use
CPU_INSTALLABLE = ("torch", "scipy", "hypothesis", "array_api_strict", "ruff")


def test_every_cpu_installable_dependency_is_present_under_ci() -> None:
    missing = [m for m in CPU_INSTALLABLE if importlib.util.find_spec(m) is None]
    if os.environ.get("CI") != "true":
        if missing:
            pytest.skip(f"not CI; missing here: {', '.join(missing)} (pip install -e '.[dev,torch]')")
        return
    assert not missing, f"CI must install {', '.join(missing)}: .ci/run installs '.[dev,torch]'"


def test_torch_runs_on_the_cpu_here_when_installed() -> None:
    """The torch backend's own process: a real CPU execution, not only an import."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch not installed")
    import torch

    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert torch.equal(x @ x.T, torch.tensor([[5.0, 14.0], [14.0, 50.0]]))

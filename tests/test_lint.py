"""The lint check CI runs: ``ruff check`` (rules in pyproject.toml's [tool.ruff]) over the package,
the tests, the benchmarks and the sample generator. It is a test so that the README's one test
command is also the lint command; it skips where ruff is not installed (``pip install -e .[dev]``)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: What the check covers, relative to the checkout.
TARGETS = ("hipdnn_trace", "tests", "benchmarks", "graphs/generate.py")

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                                reason="ruff is not installed (it is in the dev extra: pip install -e '.[dev]')")


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    """``ruff check`` with the checkout's configuration; no cache, so a read-only checkout works."""
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_reports_nothing() -> None:
    done = _ruff(*TARGETS)
    assert done.returncode == 0, f"ruff check {' '.join(TARGETS)}:\n{done.stdout}{done.stderr}"


def test_ruff_uses_the_projects_rules(tmp_path: Path) -> None:
    """The check is live: the project's configuration flags an unused import, a long line and unsorted imports."""
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nimport os\n\nx = '" + "y" * 130 + "'\n")
    done = _ruff("--config", str(ROOT / "pyproject.toml"), str(bad))
    assert done.returncode == 1, done.stdout + done.stderr
    for code in ("F401", "E501", "I001"):
        assert code in done.stdout, done.stdout

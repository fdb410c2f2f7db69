"""What is installed, asked without importing it (backends/installed.py): the suite process of an
isolated run decides on a GPU reference and records versions without importing torch or cuDNN."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hipdnn_trace.backends import installed

ROOT = Path(__file__).resolve().parents[2]


def _fake_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version_py: str) -> None:
    """A package named torch whose import would fail loudly: only its version.py may be read."""
    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('torch was imported')\n")
    (package / "version.py").write_text(textwrap.dedent(version_py))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
        monkeypatch.delitem(sys.modules, name)
    installed.torch_build.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_cache():
    installed.torch_build.cache_clear()
    yield
    installed.torch_build.cache_clear()


def test_a_cuda_build_is_read_from_its_version_file_without_importing_it(tmp_path, monkeypatch):
    _fake_torch(tmp_path, monkeypatch, """\
        from typing import Optional
        __version__ = '2.11.0+cu130'
        debug = False
        cuda: Optional[str] = '13.0'
        hip: Optional[str] = None
    """)
    assert installed.torch_build() == installed.TorchBuild("2.11.0+cu130", "13.0", None)
    monkeypatch.setattr("hipdnn_trace.device.visibility.gpu_count", lambda vendor: 2)
    assert installed.torch_gpu_missing() is None
    monkeypatch.setattr("hipdnn_trace.device.visibility.gpu_count", lambda vendor: 0)
    assert installed.torch_gpu_missing() == "torch sees no GPU"
    assert "torch" not in sys.modules


def test_a_cpu_build_and_a_rocm_build(tmp_path, monkeypatch):
    _fake_torch(tmp_path, monkeypatch, "__version__ = '2.11.0+cpu'\ncuda = None\nhip = None\n")
    assert installed.torch_gpu_missing() == "torch is a CPU-only build"
    installed.torch_build.cache_clear()
    (tmp_path / "torch" / "version.py").write_text("__version__ = '2.9.0+rocm7.0'\ncuda = None\nhip = '7.0.1'\n")
    asked = []
    monkeypatch.setattr("hipdnn_trace.device.visibility.gpu_count", lambda vendor: asked.append(vendor) or 1)
    assert installed.torch_build().hip == "7.0.1"
    assert installed.torch_gpu_missing() is None and asked == ["amd"]


def test_a_version_file_that_is_not_plain_assignments_gives_no_build(tmp_path, monkeypatch):
    _fake_torch(tmp_path, monkeypatch, "import os\nsomething = os.getcwd()\n")
    assert installed.torch_build() is None


def test_presence_and_versions_of_what_is_not_there():
    assert installed.present("hipdnn_trace") and not installed.present("no_such_module_hipdnn_trace")
    assert installed.dist_version("no-such-distribution-hipdnn-trace") is None
    assert installed.dist_version("numpy")


@pytest.mark.skipif(not installed.present("torch"), reason="torch is not installed")
def test_planning_an_isolated_torch_run_does_not_import_torch(tmp_path):
    """The parent plans, records versions (torch's from its build file) and stays free of torch."""
    code = textwrap.dedent(f"""
        import sys
        from hipdnn_trace.cli import build_parser
        from hipdnn_trace.runs.plan import plan_run
        from hipdnn_trace.runs.request import request_from_args
        args = build_parser().parse_args(["run", {str(ROOT / "graphs" / "conv")!r}, "--backend", "torch",
                                          "--isolate", "--out", {str(tmp_path)!r}])
        plan = plan_run(request_from_args(args))
        assert plan.timeout is not None, "not isolated"
        assert "torch" in plan.record.versions, plan.record.versions
        print("torch" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"

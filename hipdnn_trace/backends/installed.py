"""What is installed, asked without importing it.

The suite process of an isolated or ``--gpus`` run only decides and records; its children
import the GPU libraries and do the work. Importing torch in the parent just to learn that
it is there cost 2.6 s on an H200 host (plus 0.5 s for ``torch.cuda.is_available()``), on
every command and before any worker started. These probes read the import system's spec,
the installed distributions' metadata and torch's generated ``version.py`` instead.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path


def present(module: str) -> bool:
    """``module`` can be found on the path (its code is not run)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def dist_version(distribution: str) -> str | None:
    """The installed version of a distribution (pip name), or None."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def dist_versions(distributions: Iterable[str]) -> dict[str, str]:
    """The installed versions of these distributions; those not installed are left out."""
    found = {name: dist_version(name) for name in distributions}
    return {name: version for name, version in found.items() if version}


@dataclass(frozen=True)
class TorchBuild:
    """torch's build as its generated ``torch/version.py`` states it."""

    version: str | None
    cuda: str | None
    hip: str | None


@cache
def torch_build() -> TorchBuild | None:
    """torch's version and GPU toolkit without importing torch; None when torch is absent or its
    ``version.py`` cannot be read as plain assignments (then callers import torch to ask)."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return None
    values: dict[str, object] = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and getattr(node, "value", None) is not None:
            try:
                values[target.id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    if "cuda" not in values and "hip" not in values:
        return None
    text = {k: (str(v) if v is not None else None) for k, v in values.items()}
    return TorchBuild(version=text.get("__version__"), cuda=text.get("cuda"), hip=text.get("hip"))


def torch_gpu_missing(vendor: str | None = None) -> str | None:
    """Why torch cannot compute on a GPU here (one line), or None when it can, decided from torch's
    build file and the GPU count the driver reports (NVML, /dev/kfd): no torch import, no device
    context. A torch whose build file cannot be read is imported and asked."""
    if not present("torch"):
        return "torch is not installed"
    build = torch_build()
    if build is None:
        from hipdnn_trace.backends.reference.xp import cuda_missing

        return cuda_missing()
    if not (build.cuda or build.hip):
        return "torch is a CPU-only build"
    from hipdnn_trace.device import visibility

    if not visibility.gpu_count(vendor or ("amd" if build.hip else "nvidia")):
        return "torch sees no GPU"
    return None

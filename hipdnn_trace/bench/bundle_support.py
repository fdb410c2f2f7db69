"""A bundle's support claims against this run's hipDNN rows (docs/hipdnn-format.md section 5.1).

dnn-providers' support files say which hipDNN engines claim a graph on which AMD GPU and OS; a
``hipdnn`` row here that ran where nothing is claimed, or did not run where an engine is, is a
disagreement worth a line in the graph's notes and run.json's ``bundles`` block.
"""

from __future__ import annotations

import functools
import platform

from hipdnn_trace.bench.records import FAILED, OK, GraphRun
from hipdnn_trace.graph.bundles import BundleRef, support_disagreement

__all__ = ["check_support", "gpu_arch"]


@functools.cache
def gpu_arch() -> str | None:
    """This machine's AMD GPU architecture (``gfx942``...) as ROCm torch reports it; None elsewhere. Asked
    once a process: every bundle row and every ``--test-config`` skip asks again, and it does not change."""
    try:
        import torch

        if getattr(torch.version, "hip", None) and torch.cuda.is_available():
            return str(torch.cuda.get_device_properties(0).gcnArchName)
    except Exception:   # no ROCm torch: no arch, no disagreement to list
        return None
    return None


def check_support(run: GraphRun, bundle: BundleRef, arch: str | None) -> None:
    """A note per hipDNN row whose verdict disagrees with the bundle's support file (graph/bundles.py)."""
    for c in run.configs:
        if c.config.backend == "hipdnn":
            verdict = c.status if c.status in (OK, FAILED) else f"{c.status} ({c.error})"
            line = support_disagreement(bundle, arch, platform.system().lower(), c.status in (OK, FAILED), verdict)
            if line:
                run.notes.append(f"[{c.config.name}] {line}")
                run.bundle_notes.append(run.notes[-1])

"""Where Nsight Compute is, and the command that exports a report's raw page.

Shared by ``run --profile ncu`` (profilers/ncu.py) and ``ingest R.ncu-rep`` (profilers/ncu_why.py).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hipdnn_trace.errors import ToolMissingError


def find_ncu() -> str:
    """Path of ncu: $HIPDNN_TRACE_NCU, PATH, then CUDA's default install; one-line error if none."""
    candidates = [os.environ.get("HIPDNN_TRACE_NCU"), shutil.which("ncu"), "/usr/local/cuda/bin/ncu"]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise ToolMissingError("Nsight Compute (ncu) not found on PATH; install it or set "
                           "HIPDNN_TRACE_NCU to its path")


def export_command(exe: str, report: Path) -> list[str]:
    return [exe, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base",
            "--print-kernel-base", "mangled"]

"""run.json: how the numbers were made (argv, versions, machine, timing method).

Two runs are only comparable when their timing methods match; ``compare`` reads
the ``timing`` block written here to refuse apples-to-oranges comparisons.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
import sys
import uuid
from collections.abc import Mapping
from typing import Any

from hipdnn_trace import __version__
from hipdnn_trace.backends.installed import dist_versions
from hipdnn_trace.device.clock import CLOCK_NAME

CORE_PACKAGES = ("numpy", "polars", "perfetto", "protobuf", "ml_dtypes")


def new_run_id() -> str:
    """Sortable and unique: UTC time plus a short random suffix."""
    now = _dt.datetime.now(_dt.timezone.utc)
    return now.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    return {
        "host": socket.gethostname(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
    }


def run_metadata(
    *,
    run_id: str,
    argv: list[str],
    timing: Mapping[str, Any],
    seed: int,
    configs: list[dict[str, Any]],
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "run_id": run_id,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "status": "running",
        "argv": argv,
        "versions": {"hipdnn_trace": __version__, "python": sys.version.split()[0],
                     **dist_versions(CORE_PACKAGES)},
        "machine": machine(),
        "gpu": None,
        "timing": {**timing, "trace_clock": CLOCK_NAME},
        "seed": seed,
        "configs": configs,
    }
    if extra:
        meta.update(extra)
    return meta

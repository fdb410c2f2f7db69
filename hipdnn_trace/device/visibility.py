"""Which GPUs a process may see: the vendors' visibility variables, read and narrowed.

``--gpus`` runs one worker process per GPU. Each worker is started with its vendor's
visibility variable narrowed to one entry, before anything in it initialises CUDA or
HIP, so the worker sees its GPU as device 0 and cannot touch the others.

* NVIDIA: ``CUDA_VISIBLE_DEVICES``.
* AMD: ROCm documents ``ROCR_VISIBLE_DEVICES`` (the ROCm runtime, every user-mode
  component) as the one to use on Linux, and ``HIP_VISIBLE_DEVICES`` /
  ``CUDA_VISIBLE_DEVICES`` as HIP-only filters applied *on top of* it (their indices
  count the devices ROCr left visible). So the innermost filter the suite already
  has is narrowed (HIP, then CUDA, then ROCr), and ``ROCR_VISIBLE_DEVICES`` is set
  when none is.
* Unknown vendor (a backend that does not say): ``CUDA_VISIBLE_DEVICES``, which the
  CUDA runtime and HIP both honour.

GPU indices are those of the suite process: when its variable is already set (Slurm
sets it for the GPUs of a job), index ``i`` means the ``i``-th entry there, so a
worker gets that entry (an index or a UUID) and never a GPU outside the job.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from hipdnn_trace.errors import UserError

CUDA = "CUDA_VISIBLE_DEVICES"
HIP = "HIP_VISIBLE_DEVICES"
ROCR = "ROCR_VISIBLE_DEVICES"
#: AMD: innermost filter first (HIP's indices count what ROCr leaves visible)
AMD_ORDER = (HIP, CUDA, ROCR)
#: where the ROCm runtime finds its devices: one node per CPU and GPU agent
KFD_NODES = Path("/sys/class/kfd/kfd/topology/nodes")


def variable_for(vendor: str | None, environ: Mapping[str, str]) -> str:
    """The visibility variable that pins a worker of ``vendor``'s backend."""
    if vendor == "amd":
        return next((name for name in AMD_ORDER if name in environ), ROCR)
    return CUDA


def entries(value: str) -> list[str]:
    """The devices a visibility variable lists (indices or UUIDs), in its order."""
    return [part.strip() for part in value.split(",") if part.strip()]


def pin(vendor: str | None, index: int, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a worker needs to see only GPU ``index`` (of this process's GPUs) as device 0."""
    environ = os.environ if environ is None else environ
    name = variable_for(vendor, environ)
    if name not in environ:
        return {name: str(index)}
    visible = entries(environ[name])
    if index >= len(visible):
        raise UserError(f"--gpus {index}: this process sees {len(visible)} GPU(s) ({name}={environ[name]!r}); "
                        f"use indices 0..{len(visible) - 1}")
    return {name: visible[index]}


def _nvml_count() -> int | None:
    from hipdnn_trace.device.nvml import gpu_count

    return gpu_count()


def _kfd_count() -> int | None:
    """AMD GPUs the ROCm runtime would enumerate: KFD topology nodes with SIMDs (CPU nodes have none)."""
    try:
        nodes = list(KFD_NODES.iterdir())
    except OSError:
        return None
    count = 0
    for node in nodes:
        try:
            props = dict(line.split(None, 1) for line in (node / "properties").read_text().splitlines()
                         if " " in line)
        except OSError:
            continue
        if int(props.get("simd_count", "0").strip() or 0) > 0:
            count += 1
    return count


def gpu_count(vendor: str | None, environ: Mapping[str, str] | None = None) -> int:
    """How many GPUs this process may use, without creating a device context (NVML, KFD topology)."""
    environ = os.environ if environ is None else environ
    name = variable_for(vendor, environ)
    if name in environ:
        return len(entries(environ[name]))
    probes = {"nvidia": (_nvml_count,), "amd": (_kfd_count,)}.get(vendor or "", (_nvml_count, _kfd_count))
    for probe in probes:
        found = probe()
        if found:
            return found
    return 0

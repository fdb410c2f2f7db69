"""A graph's data where it lives: host numpy arrays or torch tensors on the GPU.

On a GPU backend the inputs are made on the device, the float64 reference runs there and the
outputs are judged there, so an LLM-size graph sends only verdicts over PCIe. These helpers put
the two sides of a comparison in one place (a reference cache hit is a host array; a device
output is compared with it on the device) and give host copies to the few host consumers.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from hipdnn_trace.backends.device_tensors import is_device_tensor
from hipdnn_trace.backends.reference import xp as shim

__all__ = ["is_device_tensor", "release_device_memory", "same_place", "to_host"]


def to_host(value: Any) -> np.ndarray:
    """A host numpy array of ``value`` (a copy only when it lives on a device): the float64 oracle
    for the reference cache, or either side of a comparison whose output is on the host."""
    return shim.to_numpy(value)


def _to_device(value: Any, like: Any) -> Any:
    """A host expectation (the float64 oracle, a golden tensor) or an ignore mask on ``like``'s device:
    values as float64, which is what the validator reads them as; masks as booleans."""
    import torch

    host = np.asarray(value)
    if host.dtype != np.bool_:
        host = host.astype(np.float64)
    return torch.as_tensor(np.ascontiguousarray(host), device=like.device)


def same_place(actual: Any, expected: Any, ignore: Any = None) -> tuple[Any, Any, Any]:
    """(actual, expected, ignore) all on the device when the actual output is there (a host
    expectation, e.g. a reference-cache hit, is uploaded), else all on the host."""
    if is_device_tensor(actual):
        if not is_device_tensor(expected):
            expected = _to_device(expected, actual)
        if ignore is not None and not is_device_tensor(ignore):
            ignore = _to_device(ignore, actual)
        return actual, expected, ignore
    if is_device_tensor(expected):
        expected = to_host(expected)
    if is_device_tensor(ignore):
        ignore = to_host(ignore)
    return actual, expected, ignore


def release_device_memory() -> None:
    """Return torch's cached, unused GPU blocks to the driver, so the next library allocation
    (cuDNN's cudaMalloc'ed buffers) finds the memory; a no-op where torch never touched CUDA."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()

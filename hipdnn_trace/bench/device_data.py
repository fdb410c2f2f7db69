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

__all__ = ["is_device_tensor", "release_device_memory", "same_place", "to_host"]


def to_host(value: Any) -> np.ndarray:
    """A host numpy array of ``value`` (a copy only when it lives on a device). float64, the
    integer types and float16 map one to one; bfloat16 and float8 come back as their raw bits
    viewed in ml_dtypes' types, as the host path stores them."""
    if not is_device_tensor(value):
        return np.asarray(value)
    import torch

    host = value.detach().to("cpu").contiguous()
    special = {torch.bfloat16: "bfloat16"}
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"):
        if hasattr(torch, name):
            special[getattr(torch, name)] = name
    if host.dtype in special:
        import ml_dtypes

        raw = host.view(torch.int16 if host.element_size() == 2 else torch.uint8).numpy()
        return raw.view(getattr(ml_dtypes, special[host.dtype]))
    return host.numpy()


def _to_device(value: Any, like: Any) -> Any:
    import torch

    host = np.asarray(value)
    if host.dtype.kind == "V" or host.dtype.name.startswith(("bfloat16", "float8", "float4")):
        host = host.astype(np.float64)     # only the float64 oracle or a golden tensor reaches here
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

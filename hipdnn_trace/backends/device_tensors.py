"""Graph tensors that already live on the GPU (torch tensors), bound and fetched without the host.

Inputs made on the device (``bench/inputs.py``) reach a GPU session as torch tensors in logical
dims; outputs a device validator judges leave the session the same way. A session lays a device
tensor out by the graph's strides on the device and copies device to device, so a validated
LLM-size graph moves no tensor over PCIe. Every function here imports torch lazily: the package
and the CPU reference never need it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hipdnn_trace.graph import layout


def is_device_tensor(value: Any) -> bool:
    """A torch tensor (on any device), told without importing torch."""
    return type(value).__module__.startswith("torch") and hasattr(value, "data_ptr")


def scalar_of(value: Any) -> float:
    """The one value of a single-element tensor, host or device."""
    if is_device_tensor(value):
        return float(value.reshape(-1)[0].item())
    return float(np.asarray(value, dtype=np.float64).reshape(-1)[0])


def pack_on_device(tensor: Any, strides: Sequence[int]) -> Any:
    """A flat device tensor holding ``tensor`` (logical dims) at the offsets ``strides`` give
    (gaps of padded layouts zero): :func:`graph.layout.pack` on the device."""
    import torch

    dims = tuple(tensor.shape)
    flat = torch.zeros(layout.storage_elements(dims, strides), dtype=tensor.dtype, device=tensor.device)
    if flat.numel():
        torch.as_strided(flat, dims, tuple(strides)).copy_(tensor)
    return flat


def logical_view(flat: Any, dims: Sequence[int], strides: Sequence[int]) -> Any:
    """A logical (dims-ordered) view of a flat device buffer laid out by ``strides``."""
    import torch

    need = layout.storage_elements(dims, strides)
    if flat.numel() < need:
        raise ValueError(f"buffer has {flat.numel()} elements, layout needs {need}")
    return torch.as_strided(flat, tuple(dims), tuple(strides))


def warm_torch_device(device: int) -> None:
    """Create what torch makes lazily on a GPU's first use: its context, the caching allocator's
    first block, cuBLAS's handle (a float64 and a half product) and torch.nn's modules, so a graph's first stage
    (device inputs, the float64 reference, a torch session) does not pay them."""
    import torch
    import torch.nn.functional  # noqa: F401  (imported on first use otherwise: ~2 s, inside a graph)

    if not torch.cuda.is_available():
        return
    target = torch.device("cuda", device)
    torch.cuda.init()
    for dtype in (torch.float64, torch.float16):
        a = torch.ones((64, 64), dtype=dtype, device=target)
        (a @ a).sum().item()
    torch.cuda.synchronize(target)

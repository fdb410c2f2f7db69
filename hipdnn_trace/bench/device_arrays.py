"""Inputs as torch tensors on a device: drawn there, uploaded, and brought back to the host.

A device tensor holds the logical dims row-major in the tensor's torch dtype
(``backends/torch_ops`` ``TORCH_DTYPES``; fp4 is one e2m1 code per byte). Values move as raw
bits (``view``), never through a conversion, so a round trip keeps every bit. torch is
imported only when a device is asked for: CI and CPU-only users have none.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from hipdnn_trace.bench import counter_rng
from hipdnn_trace.graph.dtypes import numpy_dtype
from hipdnn_trace.graph.model import Tensor

_SIGNED = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}   # torch's fully supported bit types


def torch_dtype(data_type: str) -> Any:
    """The torch dtype a tensor of ``data_type`` has on a device, or None when torch has none."""
    from hipdnn_trace.backends.torch_ops import TORCH_DTYPES

    return TORCH_DTYPES.get(data_type)


def _raw_torch(itemsize: int) -> Any:
    import torch

    return {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[itemsize]


def upload(host: np.ndarray, tensor: Tensor, device: Any) -> Any:
    """A host array of ``tensor`` (logical dims, its numpy type) as a device tensor, bit for bit."""
    import torch

    flat = np.ascontiguousarray(host).reshape(-1)
    raw = torch.from_numpy(flat.view(_SIGNED[flat.dtype.itemsize]).copy())
    return raw.to(device).view(torch_dtype(tensor.data_type)).reshape(tuple(tensor.dims))


def stored(values: Any, tensor: Tensor) -> Any:
    """float64 ``values`` of ``tensor`` rounded to its type where they already are, for inputs computed
    from others (saved statistics, an attention forward's results).

    A torch tensor is rounded there (``round_in``, ``round_to``'s bits) when the type's rounded storage
    dtype is its device dtype (:func:`torch_dtype`), and comes back as a device input (logical dims,
    contiguous); anything else is rounded on the host by ``round_to`` and returned as the host array
    (the caller uploads it), as before: no device copy of a type torch stores otherwise.
    """
    from hipdnn_trace.backends.reference import xp as shim
    from hipdnn_trace.backends.reference.ops.rounding import round_in, round_to

    dims = tuple(tensor.dims)
    if not isinstance(values, np.ndarray) and shim.is_torch(shim.namespace(values)):
        if shim.torch_storage_dtype(tensor.data_type) == torch_dtype(tensor.data_type):
            return round_in(values.reshape(dims), tensor.data_type).contiguous()
        values = shim.to_numpy(values)
    return round_to(np.asarray(values, dtype=np.float64).reshape(dims), tensor.data_type)


def host_array(value: Any, tensor: Tensor) -> np.ndarray:
    """Any input value of ``tensor`` (host numpy or device torch) as the host numpy form: logical
    dims in its numpy type, for host consumers (the CPU reference, --save-tensors)."""
    if isinstance(value, np.ndarray):
        return value
    from hipdnn_trace.backends.torch_backend import to_numpy

    return to_numpy(value, tensor)


@functools.cache
def _values_on(domain: str, data_type: str, device: str) -> Any:
    """:func:`counter_rng.table` as raw bits on ``device`` (int32 for wide types), made once."""
    import torch

    values = counter_rng.table(domain, data_type)
    return torch.from_numpy(values.view(_SIGNED[values.dtype.itemsize]).copy()).to(device)


def drawn(tensor: Tensor, stream: counter_rng.Stream, domain: str, device: Any) -> Any:
    """The counter-generated values of ``tensor`` made on ``device`` (bitwise the host's)."""
    import torch

    device = torch.device(device)
    n = math.prod(tensor.dims)
    wide = tensor.data_type in counter_rng.WIDE
    values = _values_on(domain, tensor.data_type, str(device))
    if tensor.data_type == "double":
        out = torch.empty(n, dtype=torch.float64, device=device)
    else:
        out = torch.empty(n, dtype=_raw_torch(numpy_dtype(tensor.data_type).itemsize), device=device)
    counter_rng.fill_torch(out, stream, values, wide=wide)
    return out.view(torch_dtype(tensor.data_type)).reshape(tuple(tensor.dims))

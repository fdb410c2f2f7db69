"""The few array functions the reference ops need beyond the Array API standard, per namespace.

The ops are written against the Array API (``xp = namespace(x)``: numpy's or torch's namespace
through array-api-compat), so the same code runs on numpy float64 arrays on the CPU and on torch
float64 tensors on a GPU. The standard (2024.12) has no BLAS call bounded for signals, no strided
window view (im2col), no einsum, no erf, no exp2, no row scatter, no error-state switch and no
element types below float32 but integers; each is here, once, with a numpy
implementation (exactly the calls the reference made before it was namespace-generic, so CPU
results stay bit-identical), a torch implementation, and a plain Array API fallback (what
array-api-strict, the tests' stand-in for "any other namespace", runs).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import array_api_compat
import numpy as np
from numpy.lib.stride_tricks import as_strided

from hipdnn_trace.backends.reference.ops._gemm import bounded_matmul
from hipdnn_trace.graph.dtypes import numpy_dtype

__all__ = ["DEVICES", "Target", "bits", "contiguous", "contract_leading", "device_of", "erf", "exp2", "from_numpy",
           "index_array", "is_numpy", "is_torch", "matmul", "matmul_into", "namespace", "quiet",
           "set_rows", "storage_to_numpy", "to_numpy", "to_storage", "torch_storage_dtype", "windows"]

Array = Any
Namespace = Any

#: what ``--reference-device`` takes
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class Target:
    """Where device ops run: a namespace, a device of it, and the label run.json records."""

    xp: Namespace
    device: Any
    label: str

    @staticmethod
    def of(name: str) -> Target:
        """The target for a ``--reference-device`` value other than cpu ("cuda": torch float64 on
        the current GPU; ROCm builds of torch name their GPUs "cuda" too)."""
        if name != "cuda":
            raise ValueError(f"unknown reference device {name!r} (expected one of {', '.join(DEVICES)})")
        reason = cuda_missing()
        if reason:
            raise RuntimeError(f"--reference-device cuda: {reason}")
        import torch
        from array_api_compat import torch as torch_xp

        device = torch.device("cuda", torch.cuda.current_device())
        return Target(torch_xp, device, f"cuda:{device.index} ({torch.cuda.get_device_name(device)})")


@functools.cache
def cuda_missing() -> str | None:
    """Why torch float64 on a GPU is not available here (one line), or None when it is; asked once
    per process (torch's device count cost 5 ms a call, and every graph asked)."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no GPU"
    return None


def namespace(*arrays: object) -> Namespace:
    """The Array API namespace of ``arrays`` (array-api-compat's numpy or torch wrapper, or the
    array's own namespace); arrays that are not Array API objects (lists, scalars) are numpy."""
    found = [a for a in arrays if a is not None and array_api_compat.is_array_api_obj(a)]
    return array_api_compat.array_namespace(*found) if found else array_api_compat.array_namespace(np.empty(0))


def device_of(a: Array) -> Any:
    """The device ``a`` lives on (array-api-compat's ``device``)."""
    return array_api_compat.device(a)


def is_numpy(xp: Namespace) -> bool:
    return array_api_compat.is_numpy_namespace(xp) or xp is np


def is_torch(xp: Namespace) -> bool:
    return array_api_compat.is_torch_namespace(xp)


#: torch floating types numpy lacks -> the ml_dtypes type with the same bits
_ML_DTYPES = {"bfloat16": "bfloat16", "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
              "float8_e4m3fnuz": "float8_e4m3fnuz", "float8_e5m2fnuz": "float8_e5m2fnuz",
              "float8_e8m0fnu": "float8_e8m0fnu"}


def to_numpy(a: Array) -> np.ndarray:
    """``a`` as a host numpy array (a view for numpy, a device-to-host copy for a GPU tensor); torch's
    bfloat16 and fp8 tensors, which numpy cannot take, come back bit for bit as ml_dtypes arrays."""
    if isinstance(a, np.ndarray):
        return a
    if array_api_compat.is_torch_array(a):
        host = a.detach().cpu()
        ml_name = _ML_DTYPES.get(str(host.dtype).removeprefix("torch."))
        if ml_name is not None:
            import ml_dtypes

            return bits(host).numpy().view(getattr(ml_dtypes, ml_name))
        return host.numpy()
    if array_api_compat.is_array_api_obj(a):
        return np.from_dlpack(a)
    return np.asarray(a)


def from_numpy(xp: Namespace, a: np.ndarray, device: Any = None) -> Array:
    """Host array ``a`` in namespace ``xp`` on ``device``, as float64 (every op reads float64; the
    integer and boolean tensors the ops take, masks and lengths, are exact in float64 below 2^53)."""
    return _host_to(xp, np.ascontiguousarray(np.asarray(a, dtype=np.float64)), device)


def index_array(xp: Namespace, a: np.ndarray, device: Any = None) -> Array:
    """Host integers ``a`` as an int64 array of ``xp`` on ``device`` (row indices for ``take``)."""
    return _host_to(xp, np.ascontiguousarray(np.asarray(a, dtype=np.int64)), device)


def _host_to(xp: Namespace, host: np.ndarray, device: Any) -> Array:
    """A contiguous host array as an array of ``xp`` on ``device`` (numpy: itself)."""
    if is_numpy(xp):
        return host
    if is_torch(xp):
        import torch

        return torch.from_numpy(host).to(device if device is not None else "cpu")
    return xp.asarray(host) if device is None else xp.asarray(host, device=device)


#: the torch dtype that holds each hipDNN type's values bit for bit; a type torch lacks (fp4, fp6)
#: is held as float32 values, which every such value is exactly
_TORCH_STORAGE = {"float": "float32", "half": "float16", "bfloat16": "bfloat16", "double": "float64",
                  "uint8": "uint8", "int8": "int8", "int32": "int32", "int64": "int64", "boolean": "bool",
                  "fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2", "fp8_e4m3_fnuz": "float8_e4m3fnuz",
                  "fp8_e5m2_fnuz": "float8_e5m2fnuz", "fp8_e8m0": "float8_e8m0fnu"}
#: same-sized integer types, for moving bits between numpy (ml_dtypes) and torch
_BITS = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}


def torch_storage_dtype(hipdnn_dtype: str) -> Any:
    """The torch dtype a tensor of ``hipdnn_dtype`` is stored in on a torch device (float32 for a
    type torch has no dtype for: its values are exact there)."""
    import torch

    return getattr(torch, _TORCH_STORAGE.get(hipdnn_dtype, "float32"), torch.float32)


def to_storage(a: np.ndarray, hipdnn_dtype: str, device: Any = None) -> Array:
    """Host array ``a`` (in ``hipdnn_dtype``'s numpy dtype) as a torch tensor of its storage dtype on
    ``device``, bit for bit (float32 values for fp4 / fp6)."""
    import torch

    host = np.ascontiguousarray(np.asarray(a, dtype=numpy_dtype(hipdnn_dtype)))
    target = torch_storage_dtype(hipdnn_dtype)
    if target.itemsize == host.itemsize and (target.is_floating_point or host.dtype.kind not in "iub"):
        tensor = torch.from_numpy(host.view(_BITS[host.itemsize])).view(target)
    elif target.itemsize == host.itemsize:
        tensor = torch.from_numpy(host)
    else:
        tensor = torch.from_numpy(host.astype(np.float32))
    return tensor.to(device if device is not None else "cpu")


def bits(t: Array) -> Array:
    """A torch tensor's bits: a view as the integer type of its element size (to copy or compare
    values bit for bit, NaN payloads included)."""
    import torch

    return t.view(getattr(torch, np.dtype(_BITS[t.element_size()]).name))


def storage_to_numpy(t: Array, hipdnn_dtype: str) -> np.ndarray:
    """A torch tensor made by :func:`to_storage` (or a device rounding) back as a host array of
    ``hipdnn_dtype``'s numpy dtype, bit for bit."""
    import torch

    target = numpy_dtype(hipdnn_dtype)
    host = t.detach().cpu()
    if host.dtype == torch.float32 and target.itemsize != 4:   # a type torch lacks, held as values
        return host.numpy().astype(target)
    if host.is_floating_point() and host.dtype not in (torch.float16, torch.float32, torch.float64):
        return bits(host).numpy().view(target)
    return host.numpy().view(target) if host.dtype != torch.bool else host.numpy()


def set_rows(xp: Namespace, out: Array, rows: np.ndarray, values: Array) -> Array:
    """``out[rows] = values`` for distinct host row indices ``rows`` (in place for numpy and torch;
    the standard has no integer-array assignment, so elsewhere it is a gather of ``out`` and
    ``values`` by the inverse map, a new array)."""
    if is_numpy(xp):
        out[rows] = values
        return out
    if is_torch(xp):
        out[index_array(xp, rows, out.device)] = values
        return out
    source = np.arange(out.shape[0], dtype=np.int64)
    source[rows] = out.shape[0] + np.arange(len(rows))
    both = xp.concat([out, values], axis=0)
    return xp.take(both, index_array(xp, source, device_of(out)), axis=0)


def exp2(xp: Namespace, x: Array) -> Array:
    """2 ** x, elementwise (the standard has no exp2; numpy's and torch's are exact at integers)."""
    if is_numpy(xp):
        return np.exp2(x)
    if is_torch(xp):
        import torch

        return torch.exp2(x)
    return xp.pow(2.0, x)


def quiet(xp: Namespace) -> contextlib.AbstractContextManager[Any]:
    """Floating-point warnings off (numpy's errstate; other namespaces do not warn)."""
    return np.errstate(all="ignore") if is_numpy(xp) else contextlib.nullcontext()


def contiguous(xp: Namespace, a: Array) -> Array:
    """``a`` in row-major memory (numpy, torch); other namespaces copy in reshape as needed."""
    if is_numpy(xp):
        return np.ascontiguousarray(a)
    if is_torch(xp):
        return a.contiguous()
    return a


def matmul(xp: Namespace, a: Array, b: Array) -> Array:
    """``a @ b``; numpy's runs in bounded BLAS calls so a signal is honoured (see ``_gemm``)."""
    if is_numpy(xp):
        return bounded_matmul(a, b)
    return xp.matmul(a, b)


def matmul_into(xp: Namespace, a: Array, b: Array, out: Array, index: Any) -> None:
    """``out[index] = a @ b``, written in place by BLAS for numpy (no temporary)."""
    if is_numpy(xp):
        bounded_matmul(a, b, out=out[index])
    else:
        out[index] = xp.matmul(a, b)


def contract_leading(xp: Namespace, a: Array, b: Array) -> Array:
    """``einsum("grc,grd->cd", a, b)``: the sum over the two leading dims of outer products."""
    if is_numpy(xp):
        return np.einsum("grc,grd->cd", a, b)
    if is_torch(xp):
        import torch

        return torch.einsum("grc,grd->cd", a, b)
    return xp.tensordot(a, b, axes=([0, 1], [0, 1]))


_math_erf = np.frompyfunc(math.erf, 1, 1)


@functools.cache
def _scipy_erf() -> Callable[[np.ndarray], np.ndarray] | None:
    """scipy's erf when scipy is installed (optional: only faster; math.erf gives the same values).
    Imported on first use, not with this module: scipy's import took 1.5 s of every fork server's
    set-up on an H200 host (docs/benchmarks.md, issue 36), for graphs that mostly have no GELU."""
    try:
        from scipy.special import erf
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    return erf


def numpy_erf(x: np.ndarray) -> np.ndarray:
    """The error function, elementwise, in float64, on numpy arrays."""
    scipy_erf = _scipy_erf()
    if scipy_erf is not None:
        return np.asarray(scipy_erf(x), dtype=np.float64)
    return _erf_with_math(x)


def _erf_with_math(x: np.ndarray) -> np.ndarray:
    return np.asarray(_math_erf(np.asarray(x, dtype=np.float64)), dtype=np.float64)


def erf(xp: Namespace, x: Array) -> Array:
    """The error function, elementwise, in float64 (the standard has none)."""
    if is_torch(xp):
        import torch

        return torch.special.erf(x)
    if is_numpy(xp):
        return numpy_erf(x)
    # any other namespace: through the host (only the test namespace takes this path)
    return xp.asarray(numpy_erf(np.asarray(to_numpy(x), dtype=np.float64)))


def windows(xp: Namespace, part: Array, kernel: Sequence[int], dilation: Sequence[int],
            out_spatial: Sequence[int], stride: Sequence[int]) -> Array:
    """im2col's strided view of ``part`` [nb, C, *padded]: shape (C, *kernel, nb, *out), element
    (c, r, n, o) = part[n, c, o*stride + r*dilation]. A view for numpy and torch (the caller's
    reshape makes the one copy), a stack of slices elsewhere."""
    nb, c = part.shape[:2]
    shape = (c, *kernel, nb, *out_spatial)
    if is_numpy(xp):
        sn, sc = part.strides[:2]
        sp = part.strides[2:]
        strides = (sc, *(s * d for s, d in zip(sp, dilation)), sn, *(s * t for s, t in zip(sp, stride)))
        return as_strided(part, shape=shape, strides=strides, writeable=False)
    if is_torch(xp):
        sn, sc, *sp = part.stride()
        strides = (sc, *(s * d for s, d in zip(sp, dilation)), sn, *(s * t for s, t in zip(sp, stride)))
        return part.as_strided(shape, strides)
    taps = [part[(slice(None), slice(None), *_tap_slices(r, dilation, stride, out_spatial))]
            for r in _taps(kernel)]                                    # each [nb, C, *out]
    stacked = xp.stack(taps, axis=0)                                  # [R, nb, C, *out]
    nsp = len(kernel)
    moved = xp.permute_dims(stacked, (2, 0, 1, *range(3, 3 + nsp)))  # [C, R, nb, *out]
    return xp.reshape(moved, shape)


def _taps(kernel: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """Kernel taps in row-major order (the order of ``w.reshape``)."""
    for flat in range(math.prod(kernel)):
        tap = []
        for k in reversed(kernel):
            flat, r = divmod(flat, k)
            tap.append(r)
        yield tuple(reversed(tap))


def _tap_slices(r: Sequence[int], dilation: Sequence[int], stride: Sequence[int],
                out_spatial: Sequence[int]) -> tuple[slice, ...]:
    return tuple(slice(ri * d, ri * d + t * (o - 1) + 1, t) for ri, d, t, o in zip(r, dilation, stride, out_spatial))

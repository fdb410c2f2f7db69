"""Round float64 results to a tensor's hipDNN data type.

The reference computes in float64; an output tensor holds its own type, so results
are rounded the way hipDNN's CPU reference stores them (``safeConvert`` in
``hipdnn_test_sdk/utilities/detail/CpuFpReferenceUtilities.hpp``):

* float, double: one IEEE round-to-nearest-even cast (overflow gives inf);
* half, bfloat16, fp8_e4m3, fp8_e5m2: through float first, then to the type
  (hipDNN's path: double -> float -> T; both steps round to nearest even, via
  ml_dtypes); half and bfloat16 overflow to inf;
* fp8 saturates: hipDNN stores HIP's OCP ``__hip_fp8_e4m3`` / ``__hip_fp8_e5m2``, whose
  default conversion is ``__HIP_SATFINITE`` (``amd_hip_fp8.h``), so values beyond the
  largest finite fp8 (448, 57344) become +-that value; NaN stays NaN; infinities are
  clamped too (our reading of "satfinite"; HIP's exact handling of inf is unconfirmed);
* int8, uint8, int32, int64: C++ ``static_cast`` truncates toward zero, and so do we;
  out-of-range values (undefined behaviour in C++) saturate to the type's limits here,
  and NaN has no integer value, so it raises UnsupportedError.

Block-scaled types (mxfp8, mxfp4, ...) have no element-wise host form: UnsupportedError.

On a torch device (``round_in``), the types of :data:`TORCH_EXACT` are rounded there with torch's
conversions, which give the same bits as ``round_to`` (RNE through float32, the same clamps, the
same integer rule; tests/backends/reference/test_ref_device_rounding.py checks every one over ties,
subnormals, overflow and the limits); NaN elements, whose payload and sign rules differ between
libraries, are rounded on the host and written back. fp8_e8m0 (a power of two: exponent bits only)
is computed from the float32 bits by one written-out rule on the host and the device (``_e8m0_codes``:
ml_dtypes 0.7's float32 rule; torch's own cast, ml_dtypes' float64 cast and its older versions differ).
The other types (fp4, fp6, fnuz fp8) are rounded on the host and uploaded.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from hipdnn_trace.backends.reference import xp as shim
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph import dtypes
from hipdnn_trace.graph.dtypes import DTYPES, numpy_dtype

__all__ = ["TORCH_EXACT", "round_in", "round_to", "stored_values"]

_VIA_FLOAT = {"half", "bfloat16", "fp8_e4m3", "fp8_e5m2"}
_SATURATING = {"fp8_e4m3", "fp8_e5m2"}
#: elements rounded at a time through float32 (a 32 MiB temporary, not one as large as the output)
ROUND_CHUNK_ELEMENTS = 8 << 20


def round_to(values: np.ndarray, hipdnn_dtype: str) -> np.ndarray:
    """``values`` (float64) stored as ``hipdnn_dtype``, as a new array of that numpy type."""
    if hipdnn_dtype not in DTYPES:
        raise UnsupportedError(f"unknown data type {hipdnn_dtype!r}")
    try:
        target = numpy_dtype(hipdnn_dtype)
    except ValueError:
        raise UnsupportedError(f"data type {hipdnn_dtype} has no element-wise host form") from None
    arr = np.asarray(values, dtype=np.float64)
    if hipdnn_dtype == "boolean":   # hipDNN's 8-bit boolean: any non-zero value is true
        if np.isnan(arr).any():
            raise UnsupportedError("NaN cannot be stored in a boolean tensor")
        return arr != 0.0
    if not DTYPES[hipdnn_dtype].is_float:
        return _to_integer(arr, target, hipdnn_dtype)
    if hipdnn_dtype == "fp8_e8m0":
        with np.errstate(over="ignore", invalid="ignore"):
            bits = arr.astype(np.float32).view(np.int32)
        return _e8m0_codes(bits, np).astype(np.uint8).view(target)
    if hipdnn_dtype not in _VIA_FLOAT:
        with np.errstate(over="ignore", invalid="ignore"):
            return arr.astype(target)
    if arr.size <= ROUND_CHUNK_ELEMENTS or not arr.flags.c_contiguous:
        return _via_float(arr, target, hipdnn_dtype)
    out = np.empty(arr.shape, dtype=target)
    flat_in, flat_out = arr.reshape(-1), out.reshape(-1)
    for start in range(0, arr.size, ROUND_CHUNK_ELEMENTS):
        flat_out[start:start + ROUND_CHUNK_ELEMENTS] = _via_float(flat_in[start:start + ROUND_CHUNK_ELEMENTS],
                                                                  target, hipdnn_dtype)
    return out


def _via_float(arr: np.ndarray, target: np.dtype, hipdnn_dtype: str) -> np.ndarray:
    """float64 -> float32 -> ``target`` (fp8 clamped to its largest finite value on the way)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if hipdnn_dtype in _SATURATING:
            limit = float(ml_dtypes.finfo(target).max)
            return np.clip(arr.astype(np.float32), -limit, limit).astype(target)
        return arr.astype(np.float32).astype(target)


def _to_integer(arr: np.ndarray, target: np.dtype, name: str) -> np.ndarray:
    try:
        return dtypes.to_integer(arr, name, "truncate")   # one definition, shared with validation
    except ValueError as exc:
        raise UnsupportedError(str(exc)) from None


#: types whose rounding on a torch device gives ``round_to``'s bits (the others round on the host);
#: fp8_e8m0 only where torch has ``float8_e8m0fnu`` (else it rounds on the host too)
TORCH_EXACT = frozenset({"float", "double", "half", "bfloat16", "fp8_e4m3", "fp8_e5m2", "fp8_e8m0", "uint8", "int8",
                         "int32", "int64", "boolean"})


def round_in(values: Any, hipdnn_dtype: str) -> Any:
    """float64 ``values`` stored as ``hipdnn_dtype`` in their own namespace: numpy gives
    :func:`round_to`'s array, torch a tensor of the type's storage dtype on the same device
    (``xp.torch_storage_dtype``) holding the same bits."""
    xp = shim.namespace(values)
    if shim.is_numpy(xp):
        return round_to(values, hipdnn_dtype)
    if not shim.is_torch(xp):
        raise TypeError(f"no stored form of {hipdnn_dtype} in {getattr(xp, '__name__', xp)} (numpy or torch only)")
    if hipdnn_dtype not in TORCH_EXACT or not _torch_has(hipdnn_dtype):   # also raises round_to's errors
        return shim.to_storage(round_to(shim.to_numpy(values), hipdnn_dtype), hipdnn_dtype, values.device)
    if hipdnn_dtype == "fp8_e8m0":
        return _torch_e8m0(values)
    return _torch_round(values, hipdnn_dtype)


def _torch_has(hipdnn_dtype: str) -> bool:
    """Whether torch has the type's own storage dtype (fp8_e8m0 came in torch 2.7)."""
    import torch

    return hipdnn_dtype != "fp8_e8m0" or hasattr(torch, "float8_e8m0fnu")


def stored_values(values: Any, hipdnn_dtype: str) -> Any:
    """float64 ``values`` rounded to ``hipdnn_dtype`` and read back as float64, in their own namespace
    (what a later op reads; numpy: exactly ``round_to(values).astype(float64)``)."""
    xp = shim.namespace(values)
    if shim.is_numpy(xp):
        return round_to(values, hipdnn_dtype).astype(np.float64)
    if shim.is_torch(xp):
        import torch

        return round_in(values, hipdnn_dtype).to(torch.float64)
    host = round_to(np.asarray(shim.to_numpy(values), dtype=np.float64), hipdnn_dtype).astype(np.float64)
    return xp.asarray(host, device=shim.device_of(values))


def _torch_round(values: Any, name: str) -> Any:
    import torch

    v = values.to(torch.float64)
    if name == "double":
        return v
    if name == "boolean" or dtypes.is_integer(name):
        if bool(torch.isnan(v).any()):
            raise UnsupportedError(f"NaN cannot be stored in a {name} tensor")
        return v != 0 if name == "boolean" else _torch_integer(v, name)
    out = v.to(torch.float32)
    if name in _SATURATING:
        limit = float(ml_dtypes.finfo(numpy_dtype(name)).max)
        out = torch.clamp(out, -limit, limit)
    if name != "float":
        out = out.to(shim.torch_storage_dtype(name))
    return _host_nans(v, out, name)


def _e8m0_codes(b: Any, xp: Any) -> Any:
    """fp8_e8m0 codes (int32) of float32 bits ``b``, numpy or torch alike: a normal 2^e * 1.m takes code
    e + 127, one more when m >= 1.5 (ties away from zero); a subnormal m * 2^-149 takes code 0 (2^-127)
    below 1.5 * 2^-127, code 1 from there (the same linear midpoint); zero, a negative, inf, NaN, and a
    code past 254 (from 1.5 * 2^127 up) are NaN (255). This is ml_dtypes 0.7's float32 -> float8_e8m0fnu;
    its float64 cast and older versions' subnormal rule differ, so the rule is written out here, the same
    on the host and on every device."""
    exponent, mantissa = (b >> 23) & 0xFF, b & 0x7FFFFF
    code = xp.where(exponent == 0, (mantissa >= 0x600000) * 1, exponent + ((mantissa >> 22) & 1))
    nan = (b <= 0) | (exponent == 0xFF) | (code > 254)   # sign bit set, +0, inf / NaN, overflow
    return xp.where(nan, 255, code)


def _torch_e8m0(values: Any) -> Any:
    """fp8_e8m0 on the device: float64 -> float32 (round to nearest even), then :func:`_e8m0_codes`
    (torch's own cast differs: it maps 0 and negatives to 2^-127 and rounds ties to even)."""
    import torch

    b = values.to(torch.float64).to(torch.float32).view(torch.int32)
    return _e8m0_codes(b, torch).to(torch.uint8).view(torch.float8_e8m0fnu)


def _torch_integer(v: Any, name: str) -> Any:
    """``dtypes.to_integer``'s rule (truncate, then saturate; int64's limits set explicitly)."""
    info = np.iinfo(numpy_dtype(name))
    whole = v.trunc()
    out = whole.clamp(float(info.min), float(info.max)).to(shim.torch_storage_dtype(name))
    out.masked_fill_(whole >= float(info.max), int(info.max))
    out.masked_fill_(whole <= float(info.min), int(info.min))
    return out


def _host_nans(v: Any, out: Any, name: str) -> Any:
    """``out`` with its NaN elements replaced by the host rounding of theirs (payload and sign rules
    differ between torch, numpy and ml_dtypes, and between a CPU and a GPU)."""
    import torch

    nan = torch.isnan(v)
    if not bool(nan.any()):
        return out
    fixed = shim.to_storage(round_to(v[nan].cpu().numpy(), name), name, out.device)
    shim.bits(out)[nan] = shim.bits(fixed)
    return out

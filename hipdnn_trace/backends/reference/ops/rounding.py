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
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph import dtypes
from hipdnn_trace.graph.dtypes import DTYPES, numpy_dtype

__all__ = ["round_to"]

_VIA_FLOAT = {"half", "bfloat16", "fp8_e4m3", "fp8_e5m2"}
_SATURATING = {"fp8_e4m3", "fp8_e5m2"}


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
    with np.errstate(over="ignore", invalid="ignore"):
        if hipdnn_dtype in _SATURATING:
            limit = float(ml_dtypes.finfo(target).max)
            return np.clip(arr.astype(np.float32), -limit, limit).astype(target)
        if hipdnn_dtype in _VIA_FLOAT:
            return arr.astype(np.float32).astype(target)
        return arr.astype(target)


def _to_integer(arr: np.ndarray, target: np.dtype, name: str) -> np.ndarray:
    try:
        return dtypes.to_integer(arr, name, "truncate")   # one definition, shared with validation
    except ValueError as exc:
        raise UnsupportedError(str(exc)) from None

"""hipDNN data-type strings and their numpy equivalents.

hipDNN's JSON names types with the strings of its ``DataType`` enum
(``utilities/json/Common.hpp``; docs/hipdnn-format.md section 1.5 lists every era). The numpy side uses ml_dtypes for
bfloat16 and fp8 so tensors keep their exact bits on the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np


@dataclass(frozen=True)
class DType:
    """One hipDNN data type."""

    name: str                      # the hipDNN JSON string
    numpy: np.dtype | None         # None: no host representation (block-scaled types)
    is_float: bool
    bits: int

    @property
    def itemsize(self) -> int:
        """Bytes per element on the host (sub-byte types round up)."""
        return max(1, self.bits // 8)


def _dt(name: str, np_type: object, is_float: bool, bits: int) -> DType:
    return DType(name, None if np_type is None else np.dtype(np_type), is_float, bits)


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        _dt("float", np.float32, True, 32),
        _dt("half", np.float16, True, 16),
        _dt("bfloat16", ml_dtypes.bfloat16, True, 16),
        _dt("double", np.float64, True, 64),
        _dt("uint8", np.uint8, False, 8),
        _dt("int8", np.int8, False, 8),
        _dt("int32", np.int32, False, 32),
        _dt("int64", np.int64, False, 64),
        _dt("boolean", np.bool_, False, 8),
        _dt("fp8_e4m3", ml_dtypes.float8_e4m3fn, True, 8),
        _dt("fp8_e5m2", ml_dtypes.float8_e5m2, True, 8),
        _dt("fp8_e4m3_fnuz", ml_dtypes.float8_e4m3fnuz, True, 8),
        _dt("fp8_e5m2_fnuz", ml_dtypes.float8_e5m2fnuz, True, 8),
        _dt("fp8_e8m0", ml_dtypes.float8_e8m0fnu, True, 8),
        # sub-byte floats: one element per byte on the host (ml_dtypes), so values keep their exact
        # bits; device packing (two fp4 per byte) is each backend's business (docs/hipdnn-format.md 1.5)
        _dt("fp4_e2m1", ml_dtypes.float4_e2m1fn, True, 4),
        _dt("fp6_e2m3", ml_dtypes.float6_e2m3fn, True, 6),
        _dt("fp6_e3m2", ml_dtypes.float6_e3m2fn, True, 6),
        _dt("int4", None, False, 4),
        # block-scaled types of older data_sdk versions
        _dt("mxfp8", None, True, 8),
        _dt("mxbfp8", None, True, 8),
        _dt("mxfp6", None, True, 6),
        _dt("mxfp4", None, True, 4),
    )
}

#: Other spellings hipDNN's repositories write for these types, read as the frontend's (docs/hipdnn-format.md
#: 1.6): dnn-providers' golden-bundle generator writes "float16" (ROCm/rocm-libraries
#: dnn-providers/integration-tests/reference_data_scripts/generate_sdpa_fwd_golden.py @ 3005a4b1, DTYPE_MAP).
ALIASES: dict[str, str] = {"float16": "half"}

#: "unset" is legal where a type may be inherited (node compute type, graph types).
UNSET = "unset"


def spelled(name: str) -> str | None:
    """The frontend's string for any spelling of a data type hipDNN's repositories write, or None.

    For enum-valued options that hold a DataType (SDPA ``mma_core_mode``): the frontend's graphs write the
    flatbuffers enum name (``"UNSET"``), dnn-providers' generator the JSON string (``"float"``), so case
    is ignored here (docs/hipdnn-format.md 1.5). Tensor and graph ``data_type`` fields stay exact plus
    :data:`ALIASES`, as hipDNN's reader takes them.
    """
    low = name.strip().lower()
    low = ALIASES.get(low, low)
    return low if low == UNSET or low in DTYPES else None

#: Scalar-tensor value kinds hipDNN writes as ``value_type`` (its ``TensorValue`` union).
VALUE_TYPES: dict[str, str] = {
    "Float32Value": "float",
    "Float16Value": "half",
    "BFloat16Value": "bfloat16",
    "Float8Value": "fp8_e4m3",
    "Int32Value": "int32",
    "Float64Value": "double",
    "Int64Value": "int64",
    "BoolValue": "boolean",
}


def lookup(name: str) -> DType:
    """The DType for a hipDNN string; KeyError if unknown."""
    return DTYPES[name]


def numpy_dtype(name: str) -> np.dtype:
    """numpy dtype for a hipDNN type; ValueError for types without one."""
    dt = DTYPES[name]
    if dt.numpy is None:
        raise ValueError(f"data type {name!r} has no host representation")
    return dt.numpy


def from_numpy(dtype: np.dtype) -> str:
    """hipDNN string for a numpy dtype (inverse of :func:`numpy_dtype`)."""
    for d in DTYPES.values():
        if d.numpy is not None and d.numpy == np.dtype(dtype):
            return d.name
    raise ValueError(f"numpy dtype {dtype} has no hipDNN equivalent")


#: How a float result becomes an integer: hipDNN's CPU reference ``static_cast``s (truncation
#: toward zero); cuDNN's kernels convert round-to-nearest-even and saturate (docs/hipdnn-format.md,
#: "Integer outputs").
INTEGER_ROUNDINGS = ("truncate", "nearest_even")


def is_integer(name: str) -> bool:
    """True for hipDNN's integer types (int8, uint8, int32, int64); boolean and int4 are not."""
    dt = DTYPES.get(name)
    return dt is not None and dt.numpy is not None and dt.numpy.kind in "iu"


def to_integer(values: np.ndarray, name: str, rounding: str = "truncate") -> np.ndarray:
    """``values`` (float64) stored in the integer type ``name``: rounded, then saturated.

    Saturation clamps to the type's limits (infinities included); C++ leaves an out-of-range
    cast undefined, every GPU conversion saturates. NaN has no integer value: ValueError.
    """
    if rounding not in INTEGER_ROUNDINGS:
        raise ValueError(f"rounding must be one of {INTEGER_ROUNDINGS}, not {rounding!r}")
    if not is_integer(name):
        raise ValueError(f"data type {name!r} is not an integer type")
    target = numpy_dtype(name)
    arr = np.asarray(values, dtype=np.float64)
    if np.isnan(arr).any():
        raise ValueError(f"NaN cannot be stored in a {name} tensor")
    whole = np.trunc(arr) if rounding == "truncate" else np.rint(arr)   # rint: ties to even
    info = np.iinfo(target)
    # clip before the cast so out-of-range values never reach C-level conversion; int64's
    # limits are not exact doubles, so values at or past them are set explicitly
    with np.errstate(invalid="ignore"):
        out = np.clip(whole, float(info.min), float(info.max)).astype(target)
    out[whole >= float(info.max)] = info.max
    out[whole <= float(info.min)] = info.min
    return out


def scalar_value(tensor: Any) -> float:
    """The value of a pass-by-value scalar tensor (epsilon, momentum...).

    hipDNN stores ``Float8Value`` as the raw 8-bit pattern of the tensor's fp8 type;
    every other kind is the number itself.
    """
    if tensor.value_type == "Float8Value":
        fp8 = numpy_dtype(tensor.data_type if tensor.data_type.startswith("fp8") else "fp8_e4m3")
        return float(np.array([int(tensor.value)], dtype=np.uint8).view(fp8)[0])  # type: ignore[arg-type]
    return float(tensor.value)  # type: ignore[arg-type]

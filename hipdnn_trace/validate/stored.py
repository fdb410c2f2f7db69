"""Outputs judged in their own type: which stored values an output may hold, given the float64 reference.

Comparing with the unrounded float64 reference (``atol + rtol*|e|``) is right for types fine enough to
hold a result within the tolerance. Some are not: a boolean holds 0 or 1 where a matmul of booleans sums
to 27, and fp4_e2m1 holds 0, 0.5, 1, 1.5, 2, 3, 4, 6 (saturating) where the sum is 109.5, so even the
float64 reference's own stored output "failed" against itself (issue 25). hipDNN's CPU reference writes
every output with ``safeConvert<T>`` and its ``allClose`` compares implementation and reference in the
output type ``T`` (docs/hipdnn-format.md, "Outputs judged in their own type"); so does this module for
those types: an element passes when it is a conversion to the type of some value within the float
tolerance of the reference, i.e. lies between the conversions of ``e - tol`` and ``e + tol``
(conversions are monotone for the float types; a boolean is ``x != 0``). Integer outputs follow the
same idea with two roundings (``integers.py``).
"""

from __future__ import annotations

from typing import Any

import array_api_compat
import numpy as np

from hipdnn_trace.graph.dtypes import is_integer
from hipdnn_trace.validate import integers

__all__ = ["COARSE_FLOATS", "allowed_range", "conversion_words", "judged_in_stored_type"]

#: float types too coarse for the float tolerance (saturating, no inf); their data stays on the host
#: (``bench/graph_run.py`` DEVICE_DATA_TYPES), so their ranges are computed with numpy
COARSE_FLOATS = frozenset({"fp4_e2m1", "fp6_e2m3", "fp6_e3m2"})


def judged_in_stored_type(dtype: str | None) -> bool:
    """True for the output types judged through :func:`allowed_range` (integers, boolean, fp4, fp6)."""
    return dtype is not None and (is_integer(dtype) or dtype == "boolean" or dtype in COARSE_FLOATS)


def conversion_words(dtype: str) -> str:
    """How the reference is converted to ``dtype``, for messages."""
    if dtype == "boolean":
        return "non-zero is true"
    if dtype in COARSE_FLOATS:
        return "rounded to nearest even, saturated"
    return "truncated or rounded to nearest, saturated"


def allowed_range(expected: Any, dtype: str, *, atol: float, rtol: float) -> tuple[Any, Any]:
    """(low, high) float64 arrays in ``expected``'s namespace: the stored values of ``dtype`` an output
    may hold for each expected value; NaN expected values give an empty range (low > high)."""
    if is_integer(dtype):
        return integers.allowed_range(expected, dtype, atol=atol, rtol=rtol)
    xp, e = _float64(expected)
    nan = xp.isnan(e)
    e = xp.where(nan, 0.0, e)
    with np.errstate(invalid="ignore", over="ignore"):
        slack = atol + rtol * xp.abs(e)
        lo, hi = e - slack, e + slack
    del e, slack
    if dtype == "boolean":
        low = 1.0 - xp.astype((lo <= 0.0) & (hi >= 0.0), xp.float64)   # 0 (false) when 0 is within tolerance
        high = xp.astype((lo < 0.0) | (hi > 0.0), xp.float64)          # 1 (true) when a non-zero value is
    elif dtype in COARSE_FLOATS:
        low, high = _converted(lo, dtype, xp), _converted(hi, dtype, xp)
    else:
        raise ValueError(f"{dtype} outputs are judged against the float64 reference, not in their own type")
    return xp.where(nan, np.inf, low), xp.where(nan, -np.inf, high)


def _float64(expected: Any) -> tuple[Any, Any]:
    if isinstance(expected, (np.ndarray, np.generic)) or not array_api_compat.is_array_api_obj(expected):
        return np, np.asarray(expected, dtype=np.float64)
    xp = array_api_compat.array_namespace(expected)
    return xp, xp.astype(expected, xp.float64)


def _converted(values: Any, dtype: str, xp: Any) -> Any:
    """``values`` stored as ``dtype`` the way the reference stores it (``round_to``: hipDNN's
    ``safeConvert``), read back as float64 in ``values``' namespace."""
    from hipdnn_trace.backends.reference.ops.rounding import round_to
    from hipdnn_trace.backends.reference.xp import to_numpy

    host = np.asarray(to_numpy(values), dtype=np.float64)
    stored = round_to(host, dtype).astype(np.float64)
    if xp is np:
        return stored
    return xp.asarray(stored, device=array_api_compat.device(values))

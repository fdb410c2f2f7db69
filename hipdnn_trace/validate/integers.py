"""Which integers an integer output may hold, given the float64 reference's unrounded result.

A kernel writing an int8/uint8/int32/int64 tensor converts its own float result to the type.
The two libraries this tool follows convert differently (docs/hipdnn-format.md, "Integer
outputs"): hipDNN's CPU reference ``static_cast``s (truncation toward zero), cuDNN rounds to
nearest, ties to even, and saturates. Both are accepted, each saturated to the type's range:

* an integral reference value (an int8 conv, an integer add: exact arithmetic) must be matched
  exactly, after saturation; truncation and rounding agree there, and hipDNN's own integer
  check (``CpuIntReferenceValidation``) demands equality;
* a fractional one (an int8 batchnorm) may move by the float tolerance ``atol + rtol*|e|``
  before conversion, because a device computes it in float: the allowed integers run from
  the smallest to the largest conversion of ``[e - tol, e + tol]`` under either rule.

The range is computed in float64 with Array API operations only, so the host (numpy) and the
device comparison (torch on a GPU, ``device_compare.py``) run the same formulas: a conversion
is ``clip(trunc(x) or round(x), min, max)``, the value ``graph.dtypes.to_integer`` stores, read
back as float64 (tests/validate/test_integer_outputs.py holds the two equal).
"""

from __future__ import annotations

from typing import Any

import array_api_compat
import numpy as np

from hipdnn_trace.graph.dtypes import numpy_dtype


def allowed_range(expected: Any, dtype: str, *, atol: float, rtol: float) -> tuple[Any, Any]:
    """(low, high) float64 arrays in ``expected``'s namespace: the integers ``dtype`` may hold
    for each expected value.

    NaN expected values give an empty range (low > high): no integer matches them.
    """
    if isinstance(expected, (np.ndarray, np.generic)) or not array_api_compat.is_array_api_obj(expected):
        xp: Any = np
        e = np.asarray(expected, dtype=np.float64)
    else:
        xp = array_api_compat.array_namespace(expected)
        e = xp.astype(expected, xp.float64)
    nan = xp.isnan(e)
    e = xp.where(nan, 0.0, e)
    info = np.iinfo(numpy_dtype(dtype))
    limits = (float(info.min), float(info.max))
    with np.errstate(invalid="ignore", over="ignore"):
        slack = xp.where(e == xp.trunc(e), 0.0, atol + rtol * xp.abs(e))
        value = e - slack
        low = xp.minimum(_stored(xp.trunc(value), xp, limits), _stored(xp.round(value), xp, limits))
        value = e + slack
        del e, slack          # a chunk's temporaries are the comparison's memory bound
        high = xp.maximum(_stored(xp.trunc(value), xp, limits), _stored(xp.round(value), xp, limits))
        del value
    return xp.where(nan, np.inf, low), xp.where(nan, -np.inf, high)


def _stored(whole: Any, xp: Any, limits: tuple[float, float]) -> Any:
    """An integer-valued float64 array saturated to the type's limits: the integer the type stores,
    as float64 (``+ 0.0`` turns -0.0 into the 0 an integer reads back as)."""
    return xp.clip(whole, limits[0], limits[1]) + 0.0

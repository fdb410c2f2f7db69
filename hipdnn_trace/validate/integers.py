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
"""

from __future__ import annotations

import numpy as np

from hipdnn_trace.graph.dtypes import INTEGER_ROUNDINGS, to_integer


def allowed_range(expected: np.ndarray, dtype: str, *, atol: float, rtol: float) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) float64 arrays: the integers ``dtype`` may hold for each expected value.

    NaN expected values give an empty range (low > high): no integer matches them.
    """
    e = np.asarray(expected, dtype=np.float64)
    nan = np.isnan(e)
    e = np.where(nan, 0.0, e)
    with np.errstate(invalid="ignore", over="ignore"):
        slack = np.where(e == np.trunc(e), 0.0, atol + rtol * np.abs(e))
        low_value, high_value = e - slack, e + slack
    low = np.minimum.reduce([to_integer(low_value, dtype, r).astype(np.float64) for r in INTEGER_ROUNDINGS])
    high = np.maximum.reduce([to_integer(high_value, dtype, r).astype(np.float64) for r in INTEGER_ROUNDINGS])
    low = np.where(nan, np.inf, low)
    high = np.where(nan, -np.inf, high)
    return low, high

"""A second BLAS kernel choice for the numerics tests.

A test that passes only because this machine's BLAS happened to give the same bits twice would fail
for a user whose BLAS picks another kernel. With ``HIPDNN_TRACE_TEST_BLAS=k-split`` (set by
``test_numerics_under_a_second_blas.py`` for a child pytest) every BLAS product the reference makes
through ``_gemm`` is summed as two halves of its reduction dim: a legitimate other rounding of the
same dot products, as another kernel would give, on any machine.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: the environment variable that selects the second kernel choice, and its one value
SECOND_BLAS_VARIABLE = "HIPDNN_TRACE_TEST_BLAS"
K_SPLIT = "k-split"


def k_split_matmul(a: Any, b: Any, out: Any = None) -> Any:
    """``a @ b`` with the reduction dim summed in two halves (another, equally valid rounding)."""
    a, b = np.asarray(a), np.asarray(b)
    k = a.shape[-1]
    if a.ndim < 2 or b.ndim < 2 or k < 2:
        return np.matmul(a, b, out=out)
    half = k // 2
    first = np.matmul(a[..., :half], b[..., :half, :])
    result = np.add(first, np.matmul(a[..., half:], b[..., half:, :]), out=first)
    if out is None:
        return result
    out[...] = result
    return out

"""Central finite differences of a scalar loss, for gradient tests of the float64 reference."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def numeric_grad(loss: Callable[[], float], arr: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """d loss / d arr, perturbing ``arr`` in place one element at a time (restored after)."""
    grad = np.zeros_like(arr)
    for idx in np.ndindex(arr.shape):
        old = arr[idx]
        arr[idx] = old + eps
        up = loss()
        arr[idx] = old - eps
        down = loss()
        arr[idx] = old
        grad[idx] = (up - down) / (2 * eps)
    return grad

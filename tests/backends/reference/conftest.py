"""Numerics tests run under a second BLAS kernel choice when the child run asks for it
(``second_blas.py`` says why)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest
from second_blas import K_SPLIT, SECOND_BLAS_VARIABLE, k_split_matmul

from hipdnn_trace.backends.reference.ops import _gemm


@pytest.fixture(autouse=True)
def second_blas(monkeypatch: pytest.MonkeyPatch) -> None:
    """Route ``_gemm``'s products through :func:`k_split_matmul` when the child run asks for it."""
    if os.environ.get(SECOND_BLAS_VARIABLE) != K_SPLIT:
        return
    names = {k: getattr(np, k) for k in dir(np) if not k.startswith("__")}
    monkeypatch.setattr(_gemm, "np", SimpleNamespace(**{**names, "matmul": k_split_matmul}))

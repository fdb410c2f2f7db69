"""Hypothesis cases for compare_tensor and an equality that treats NaN as equal, shared by the host
(tests/validate/test_fast_compare.py) and device (tests/validate/test_device_compare.py) tests.

A case is an output in one of the types hipDNN stores on the host with expected values drawn from
awkward corners (zeros of both signs, NaN, +-Inf, the largest and smallest doubles, integers past a
type's range, fractions halfway between integers) and actual values that are exact, rounded, off by
a little or a lot, NaN, +-Inf, still poisoned, or tied with each other; tolerances from zero to huge.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

from hipdnn_trace.graph.dtypes import to_integer
from hipdnn_trace.validate.poison import poison

#: numpy type -> the hipDNN name passed as ``dtype`` (None: let compare_tensor infer it)
FLOATS = {np.dtype(np.float16): "half", np.dtype(np.float32): "float", np.dtype(np.float64): "double",
          np.dtype(ml_dtypes.bfloat16): "bfloat16", np.dtype(ml_dtypes.float8_e4m3fn): "fp8_e4m3",
          np.dtype(ml_dtypes.float8_e5m2): "fp8_e5m2", np.dtype(ml_dtypes.float8_e4m3fnuz): "fp8_e4m3_fnuz",
          np.dtype(ml_dtypes.float4_e2m1fn): "fp4_e2m1"}
INTEGERS = {np.dtype(np.int8): "int8", np.dtype(np.uint8): "uint8", np.dtype(np.int32): "int32",
            np.dtype(np.int64): "int64"}
BOOLEAN = {np.dtype(np.bool_): "boolean"}
ALL_TYPES = {**FLOATS, **INTEGERS, **BOOLEAN}

EXPECTED_SPECIALS = (0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0, 0.5, 2.5, -2.5, 1e308, -1e308, 5e-324,
                     127.5, 128.0, -129.0, 255.7, 2.0**31, 2.0**63, -2.0**63, 2.0**64, 1e-3)
ACTUAL_KINDS = ("exact", "noise", "far", "nan", "inf", "-inf", "poison", "tie", "zero")
TOLERANCES = (0.0, 1e-3, 1e-2, 0.5, 1.0, 2.0, 1e300, np.inf)


@dataclasses.dataclass
class Case:
    actual: np.ndarray
    expected: np.ndarray
    kwargs: dict[str, Any]


def _expected_values(draw: Any, n: int) -> np.ndarray:
    special = st.sampled_from(EXPECTED_SPECIALS)
    plain = st.floats(min_value=-300.0, max_value=300.0, allow_nan=False, width=64)
    return np.array(draw(st.lists(st.one_of(special, plain, plain), min_size=n, max_size=n)), dtype=np.float64)


def _cast(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``values`` stored in ``dtype`` the way a kernel would (integers: rounded and saturated)."""
    if dtype.kind in "iu":
        flat = to_integer(np.nan_to_num(values.reshape(-1), nan=0.0), INTEGERS[dtype], "nearest_even")
        return flat.reshape(values.shape)
    if dtype.kind == "b":
        return np.asarray(np.nan_to_num(values, nan=0.0) > 0.5)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(values.astype(dtype))


def _damage(actual: np.ndarray, expected: np.ndarray, kinds: list[str], noise: list[float]) -> None:
    flat, e = actual.reshape(-1), expected.reshape(-1)
    tie = None
    for i, kind in enumerate(kinds):
        if kind == "poison":
            poison(flat[i:i + 1])
            continue
        value = _value(kind, e[i], noise[i], flat.dtype)
        if kind == "tie":
            tie = value if tie is None else tie
            value = tie
        if value is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                flat[i:i + 1] = _cast(np.array([value]), flat.dtype)


def _value(kind: str, expected: float, noise: float, dtype: np.dtype) -> float | None:
    finite = expected if math.isfinite(expected) else 1.0
    if kind in ("nan", "inf", "-inf"):
        return None if dtype.kind in "iub" else float(kind)
    return {"exact": None, "noise": finite * (1 + noise * 1e-3) + noise * 1e-4, "far": finite + 3.0 + 100 * noise,
            "tie": 7.0, "zero": 0.0}[kind]


@st.composite
def cases(draw: Any, types: dict[np.dtype, str] = ALL_TYPES, max_elements: int = 40) -> Case:
    dtype = draw(st.sampled_from(sorted(types, key=str)))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=0, max_size=3)))
    while math.prod(shape) > max_elements:
        shape = shape[1:]
    n = math.prod(shape)
    expected = _expected_values(draw, n).reshape(shape)
    actual = _cast(expected, dtype)
    kinds = draw(st.lists(st.sampled_from(ACTUAL_KINDS), min_size=n, max_size=n))
    noise = draw(st.lists(st.floats(-1.0, 1.0), min_size=n, max_size=n))
    _damage(actual, expected, kinds, noise)
    if n and dtype.kind in "iub" and draw(st.booleans()):
        poison(actual.reshape(-1))                       # a wholly poisoned integer output
    kwargs: dict[str, Any] = {"atol": draw(st.sampled_from(TOLERANCES)), "rtol": draw(st.sampled_from(TOLERANCES)),
                              "top": draw(st.sampled_from((0, 1, 2, 3, 10)))}
    if draw(st.booleans()):
        kwargs["dtype"] = types[dtype]
    if draw(st.booleans()):
        kwargs["reference"] = expected + 0.25
    mask = draw(st.sampled_from(("none", "false", "random", "all", "broadcast")))
    if mask != "none":
        kwargs["ignore"] = _ignore(draw, mask, shape)
    return Case(actual, expected, kwargs)


def _ignore(draw: Any, mask: str, shape: tuple[int, ...]) -> np.ndarray:
    if mask == "false":
        return np.zeros(shape, dtype=bool)
    if mask == "all":
        return np.ones(shape, dtype=bool)
    if mask == "broadcast" and shape:
        rows = shape[:-1] + (1,)
        return np.array(draw(st.lists(st.booleans(), min_size=math.prod(rows), max_size=math.prod(rows))),
                        dtype=bool).reshape(rows)
    n = math.prod(shape)
    return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool).reshape(shape)


def same(x: object, y: object) -> bool:
    """Equality where NaN equals NaN and a dataclass equals another of its type field by field."""
    if isinstance(x, float) and isinstance(y, float):
        return (math.isnan(x) and math.isnan(y)) or (x == y and math.copysign(1, x) == math.copysign(1, y))
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(same(a, b) for a, b in zip(x, y))
    if dataclasses.is_dataclass(x) and dataclasses.is_dataclass(y):
        return type(x) is type(y) and all(same(getattr(x, f.name), getattr(y, f.name))
                                          for f in dataclasses.fields(x))
    return type(x) is type(y) and x == y

"""hipDNN pointwise modes in float64.

Mode names are hipDNN's JSON strings (``PointwiseMode`` in ROCm/rocm-libraries
``projects/hipdnn``: ``relu_fwd``, ``max_op``, ...); upper-case enum names and ``max`` /
``min`` are accepted too. Inputs are ``in_0``, ``in_1``, ``in_2`` in that order:

* backward activations (``*_bwd``) take ``(dy, x)``: hipDNN's test_sdk functors are
  ``op(dy, x)`` with dy = in_0 and x = the forward input (in_1); result dy * f'(x);
* ``binary_select`` takes ``(a, b, mask)`` and returns ``a`` where mask != 0 else ``b``
  (the x / b / t operand order of MIOpen's and cuDNN's BINARY_SELECT);
* comparisons and logical ops return 1.0 / 0.0; logical inputs are true when != 0.

Every input broadcasts to ``out_shape`` the way hipDNN's CPU executor does it (dims
aligned from the right, size-1 dims expand). Formulas follow hipDNN's test_sdk
functors where they exist (relu with clips and slope, sigmoid, tanh, gelu, gelu tanh
approximation, swish) and cuDNN's documented definitions otherwise (elu, softplus,
and the backward modes hipDNN's reference lacks). Non-finite results (1/0, log of a
negative) are the IEEE answers, not errors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from hipdnn_trace.backends.reference import xp as shim
from hipdnn_trace.backends.reference.ops._arrays import as_shape, f64
from hipdnn_trace.backends.reference.xp import _erf_with_math, numpy_erf as erf  # noqa: F401 - re-exported
from hipdnn_trace.errors import UnsupportedError

__all__ = ["pointwise", "POINTWISE_MODES", "pointwise_arity", "erf"]

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_TANH_C = 0.044715
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_DOUBLE_MAX = float(np.finfo(np.float64).max)   # hipDNN's default relu upper clip


@dataclass(frozen=True)
class _Params:
    relu_lower_clip: float | None
    relu_upper_clip: float | None
    relu_lower_clip_slope: float | None
    swish_beta: float
    elu_alpha: float
    softplus_beta: float
    axis: int | None

    @property
    def relu_parameterized(self) -> bool:
        return not (
            self.relu_lower_clip is None
            and self.relu_upper_clip is None
            and self.relu_lower_clip_slope is None
        )

    @property
    def relu_clips(self) -> tuple[float, float, float]:
        """(lower, upper, slope) with hipDNN's defaults 0, max double, 0."""
        lower = 0.0 if self.relu_lower_clip is None else float(self.relu_lower_clip)
        upper = _DOUBLE_MAX if self.relu_upper_clip is None else float(self.relu_upper_clip)
        slope = 0.0 if self.relu_lower_clip_slope is None else float(self.relu_lower_clip_slope)
        return lower, upper, slope


def _ns(x: np.ndarray):   # an Array API namespace
    return shim.namespace(x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + _ns(x).exp(-x))


def _flag(b: np.ndarray) -> np.ndarray:
    xp = _ns(b)
    return xp.astype(b, xp.float64)


# --- activations -------------------------------------------------------------


def _relu_fwd(p: _Params, x: np.ndarray) -> np.ndarray:
    # hipDNN: x <= lower -> slope*(x - lower) + lower; else x >= upper -> upper; else x.
    # Written with one output buffer: relu often runs on the largest tensors of a graph.
    lower, upper, slope = p.relu_clips
    xp = _ns(x)
    out = xp.where(x >= upper, upper, x)
    below = x <= lower
    out[below] = slope * (x[below] - lower) + lower
    return out


def _relu_bwd(p: _Params, dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    if not p.relu_parameterized:
        return dy * _flag(x > 0.0)
    lower, upper, slope = p.relu_clips
    xp = _ns(x)
    local = xp.where(x <= lower, slope, xp.where(x > upper, 0.0, 1.0))
    return dy * local


def _gelu_fwd(p: _Params, x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + shim.erf(_ns(x), x * _INV_SQRT_2))


def _gelu_bwd(p: _Params, dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    cdf = 0.5 * (1.0 + shim.erf(_ns(x), x * _INV_SQRT_2))
    pdf = _INV_SQRT_2PI * _ns(x).exp(-0.5 * x * x)
    return dy * (cdf + x * pdf)


def _gelu_tanh_inner(x: np.ndarray) -> np.ndarray:
    return _SQRT_2_OVER_PI * (x + _GELU_TANH_C * x * x * x)


def _gelu_tanh_fwd(p: _Params, x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _ns(x).tanh(_gelu_tanh_inner(x)))


def _gelu_tanh_bwd(p: _Params, dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    t = _ns(x).tanh(_gelu_tanh_inner(x))
    d_inner = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_TANH_C * x * x)
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * d_inner)


def _swish_fwd(p: _Params, x: np.ndarray) -> np.ndarray:
    return x / (1.0 + _ns(x).exp(-p.swish_beta * x))


def _swish_bwd(p: _Params, dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    s = _sigmoid(p.swish_beta * x)
    return dy * (s + p.swish_beta * x * s * (1.0 - s))


def _elu_fwd(p: _Params, x: np.ndarray) -> np.ndarray:
    xp = _ns(x)
    return xp.where(x > 0.0, x, p.elu_alpha * xp.expm1(xp.minimum(x, xp.zeros_like(x))))


def _elu_bwd(p: _Params, dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    xp = _ns(x)
    return dy * xp.where(x > 0.0, 1.0, p.elu_alpha * xp.exp(xp.minimum(x, xp.zeros_like(x))))


def _softplus_fwd(p: _Params, x: np.ndarray) -> np.ndarray:
    y = p.softplus_beta * x
    xp = _ns(y)
    return xp.logaddexp(xp.zeros_like(y), y) / p.softplus_beta


def _softplus_bwd(p: _Params, dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    return dy * _sigmoid(p.softplus_beta * x)


def _sigmoid_bwd(p: _Params, dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    s = _sigmoid(x)
    return dy * s * (1.0 - s)


def _tanh_bwd(p: _Params, dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    t = _ns(x).tanh(x)
    return dy * (1.0 - t * t)


def _gen_index(p: _Params, x: np.ndarray) -> np.ndarray:
    if p.axis is None:
        raise UnsupportedError("pointwise gen_index needs an axis")
    ndim = x.ndim
    if not -ndim <= p.axis < ndim:
        raise UnsupportedError(f"pointwise gen_index axis {p.axis} is outside a rank-{ndim} output")
    axis = p.axis % ndim
    shape = [1] * ndim
    shape[axis] = x.shape[axis]
    xp = _ns(x)
    index = xp.arange(x.shape[axis], dtype=xp.float64, device=shim.device_of(x))
    return xp.broadcast_to(xp.reshape(index, tuple(shape)), tuple(x.shape))


def _unary(f: Callable[[np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    return lambda p, x: f(x)


def _binary(f: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    return lambda p, a, b: f(a, b)


def _fn(name: str) -> Callable[..., np.ndarray]:
    """The namespace's elementwise function ``name`` of the first operand's namespace."""
    return lambda *arrays: getattr(_ns(arrays[0]), name)(*arrays)


_MODES: dict[str, Callable[..., np.ndarray]] = {
    # unary
    "abs": _unary(_fn("abs")),
    "ceil": _unary(_fn("ceil")),
    "elu_fwd": _elu_fwd,
    "erf": _unary(lambda x: shim.erf(_ns(x), x)),
    "exp": _unary(_fn("exp")),
    "floor": _unary(_fn("floor")),
    "gelu_approx_tanh_fwd": _gelu_tanh_fwd,
    "gelu_fwd": _gelu_fwd,
    "gen_index": _gen_index,
    "identity": _unary(lambda x: x),
    "log": _unary(_fn("log")),
    "logical_not": _unary(lambda x: _flag(x == 0.0)),
    "neg": _unary(_fn("negative")),
    "reciprocal": _unary(lambda x: 1.0 / x),
    "relu_fwd": _relu_fwd,
    "rsqrt": _unary(lambda x: 1.0 / _ns(x).sqrt(x)),
    "sigmoid_fwd": _unary(_sigmoid),
    "sin": _unary(_fn("sin")),
    "softplus_fwd": _softplus_fwd,
    "sqrt": _unary(_fn("sqrt")),
    "swish_fwd": _swish_fwd,
    "tan": _unary(_fn("tan")),
    "tanh_fwd": _unary(_fn("tanh")),
    # binary
    "add": _binary(_fn("add")),
    "add_square": _binary(lambda a, b: a + b * b),
    "cmp_eq": _binary(lambda a, b: _flag(a == b)),
    "cmp_ge": _binary(lambda a, b: _flag(a >= b)),
    "cmp_gt": _binary(lambda a, b: _flag(a > b)),
    "cmp_le": _binary(lambda a, b: _flag(a <= b)),
    "cmp_lt": _binary(lambda a, b: _flag(a < b)),
    "cmp_neq": _binary(lambda a, b: _flag(a != b)),
    "div": _binary(_fn("divide")),
    "logical_and": _binary(lambda a, b: _flag((a != 0.0) & (b != 0.0))),
    "logical_or": _binary(lambda a, b: _flag((a != 0.0) | (b != 0.0))),
    "max_op": _binary(_fn("maximum")),
    "min_op": _binary(_fn("minimum")),
    "mul": _binary(_fn("multiply")),
    "sub": _binary(_fn("subtract")),
    # backward activations: (dy, x)
    "elu_bwd": _elu_bwd,
    "gelu_approx_tanh_bwd": _gelu_tanh_bwd,
    "gelu_bwd": _gelu_bwd,
    "relu_bwd": _relu_bwd,
    "sigmoid_bwd": _sigmoid_bwd,
    "softplus_bwd": _softplus_bwd,
    "swish_bwd": _swish_bwd,
    "tanh_bwd": _tanh_bwd,
    # ternary
    "binary_select": lambda p, a, b, mask: _ns(a).where(mask != 0.0, a, b),
}

_ALIASES = {"max": "max_op", "min": "min_op"}

#: hipDNN mode string -> number of tensor inputs.
POINTWISE_MODES: dict[str, int] = {
    name: fn.__code__.co_argcount - 1 for name, fn in _MODES.items()
}


def _canonical(mode: str) -> str:
    name = str(mode).strip().lower()
    name = _ALIASES.get(name, name)
    if name not in _MODES:
        raise UnsupportedError(f"unsupported pointwise mode {mode}")
    return name


def pointwise_arity(mode: str) -> int:
    """How many tensor inputs ``mode`` takes (1, 2 or 3)."""
    return POINTWISE_MODES[_canonical(mode)]


def pointwise(
    mode: str,
    inputs: Sequence[np.ndarray],
    *,
    relu_lower_clip: float | None = None,
    relu_upper_clip: float | None = None,
    relu_lower_clip_slope: float | None = None,
    swish_beta: float | None = None,
    elu_alpha: float | None = None,
    softplus_beta: float | None = None,
    axis: int | None = None,
    out_shape: Sequence[int],
) -> np.ndarray:
    """Apply hipDNN pointwise ``mode`` to ``inputs`` (in_0, in_1, in_2), float64 out."""
    name = _canonical(mode)
    arity = POINTWISE_MODES[name]
    if len(inputs) != arity:
        raise UnsupportedError(f"pointwise mode {name} takes {arity} inputs, got {len(inputs)}")
    shape = as_shape(out_shape, f"pointwise {name} output")
    operands = []
    for i, inp in enumerate(inputs):
        arr = f64(inp)
        try:
            operands.append(shim.namespace(arr).broadcast_to(arr, shape))
        except (ValueError, RuntimeError):   # torch says RuntimeError
            raise UnsupportedError(
                f"pointwise {name}: in_{i} of shape {arr.shape} does not broadcast to {shape}"
            ) from None
    params = _Params(
        relu_lower_clip=relu_lower_clip,
        relu_upper_clip=relu_upper_clip,
        relu_lower_clip_slope=relu_lower_clip_slope,
        swish_beta=1.0 if swish_beta is None else float(swish_beta),
        elu_alpha=1.0 if elu_alpha is None else float(elu_alpha),
        softplus_beta=1.0 if softplus_beta is None else float(softplus_beta),
        axis=None if axis is None else int(axis),
    )
    xp = shim.namespace(*operands)
    with shim.quiet(xp):
        out = _MODES[name](params, *operands)
    if not shim.is_numpy(xp):   # a fresh float64 array of the output's shape, in its namespace
        return xp.asarray(xp.broadcast_to(xp.astype(out, xp.float64), shape), copy=True)
    out = np.asarray(out, dtype=np.float64)
    if out.shape != shape or not out.flags.writeable or out.base is not None:
        out = np.array(np.broadcast_to(out, shape))   # own, writable memory for the caller
    return out

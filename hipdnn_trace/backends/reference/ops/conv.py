"""N-dimensional grouped convolution (fprop, dgrad, wgrad) in float64.

Semantics follow hipDNN's CPU reference (``CpuReferenceConvolution.hpp`` and
``ConvolutionValidation.hpp`` in ROCm/rocm-libraries ``projects/hipdnn``):

* x is [N, C, *spatial], w is [K, C/groups, *kernel], y is [N, K, *out]; the group
  count is ``C // w.shape[1]`` and output channel ``k`` belongs to group ``k // (K/groups)``.
* out = (in + pre + post - dilation*(kernel-1) - 1) // stride + 1 per spatial dim.
* Padding must be >= 0, stride and dilation > 0 (hipDNN rejects anything else).
* ``CROSS_CORRELATION`` is what hipDNN computes; ``CONVOLUTION`` flips the kernel
  spatially first (hipDNN's CPU reference does not implement it; the math is the
  textbook one).

Why this shape of code: it must be fast enough to be the oracle for real layer sizes,
so each batch chunk is one im2col copy plus one BLAS matmul, and dgrad/wgrad reuse the
same column layout so they are the exact adjoints of fprop. Chunking over the batch
keeps the column buffer near the size of the input tensor; each GEMM runs in bounded BLAS
calls (``_gemm.bounded_matmul``) so a signal is honoured within about a second.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np

from hipdnn_trace.backends.reference import xp as shim
from hipdnn_trace.backends.reference.ops._arrays import as_array, as_shape, f64
from hipdnn_trace.errors import UnsupportedError

__all__ = ["conv_fwd", "conv_dgrad", "conv_wgrad", "conv_output_shape"]

_MODES = ("CROSS_CORRELATION", "CONVOLUTION")
_MIN_CHUNK_BYTES = 8 << 20   # column budget floor, so small tensors still batch well
_GEMM_COLUMNS = 2048          # GEMM width (images x output positions) worth folding up to


@dataclass(frozen=True)
class _Geometry:
    """Everything about one convolution that does not depend on the data."""

    n: int
    c: int
    k: int
    groups: int
    in_spatial: tuple[int, ...]
    kernel: tuple[int, ...]
    out_spatial: tuple[int, ...]
    pre: tuple[int, ...]
    post: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]

    @property
    def cg(self) -> int:
        return self.c // self.groups

    @property
    def kg(self) -> int:
        return self.k // self.groups

    @property
    def kernel_size(self) -> int:
        return math.prod(self.kernel)

    @property
    def out_size(self) -> int:
        return math.prod(self.out_spatial)

    @property
    def padded_spatial(self) -> tuple[int, ...]:
        return tuple(s + a + b for s, a, b in zip(self.in_spatial, self.pre, self.post))

    @property
    def has_padding(self) -> bool:
        return any(self.pre) or any(self.post)

    @property
    def interior(self) -> tuple[slice, ...]:
        """Where x sits in a padded [N, C, *padded_spatial] tensor."""
        return (slice(None), slice(None)) + tuple(slice(a, a + s) for a, s in zip(self.pre, self.in_spatial))

    @property
    def x_shape(self) -> tuple[int, ...]:
        return (self.n, self.c, *self.in_spatial)

    @property
    def w_shape(self) -> tuple[int, ...]:
        return (self.k, self.cg, *self.kernel)

    @property
    def y_shape(self) -> tuple[int, ...]:
        return (self.n, self.k, *self.out_spatial)


def _int_list(values: Sequence[int], count: int, name: str) -> tuple[int, ...]:
    try:
        out = tuple(int(v) for v in values)
    except (TypeError, ValueError):
        raise UnsupportedError(f"convolution {name} {values!r} is not a list of integers") from None
    if len(out) != count:
        raise UnsupportedError(
            f"convolution {name} has {len(out)} values, expected {count} (one per spatial dim)"
        )
    return out


def _geometry(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    pre_padding: Sequence[int],
    post_padding: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
) -> _Geometry:
    xs = as_shape(x_shape, "convolution x")
    ws = as_shape(w_shape, "convolution w")
    if len(xs) < 3:
        raise UnsupportedError(f"convolution needs x of rank >= 3 (N, C, spatial...), got {xs}")
    if len(ws) != len(xs):
        raise UnsupportedError(f"convolution w rank {len(ws)} differs from x rank {len(xs)}")
    nsp = len(xs) - 2
    pre = _int_list(pre_padding, nsp, "pre_padding")
    post = _int_list(post_padding, nsp, "post_padding")
    st = _int_list(stride, nsp, "stride")
    dil = _int_list(dilation, nsp, "dilation")
    if any(v < 0 for v in pre + post):
        raise UnsupportedError(f"convolution padding must be >= 0 (hipDNN rejects negative), got {pre}/{post}")
    if any(v <= 0 for v in st + dil):
        raise UnsupportedError(f"convolution stride and dilation must be > 0, got {st}/{dil}")
    n, c = xs[0], xs[1]
    k, cg = ws[0], ws[1]
    if cg <= 0 or c % cg != 0:
        raise UnsupportedError(f"convolution: x has {c} channels, not a multiple of w.shape[1] = {cg}")
    groups = c // cg
    if k % groups != 0:
        raise UnsupportedError(f"convolution: {k} output channels do not split into {groups} groups")
    kernel = ws[2:]
    if any(d <= 0 for d in kernel):
        raise UnsupportedError(f"convolution kernel dims must be > 0, got {kernel}")
    out = []
    for i, (s, kd) in enumerate(zip(xs[2:], kernel)):
        span = s + pre[i] + post[i] - dil[i] * (kd - 1) - 1
        if span < 0:
            raise UnsupportedError(
                f"convolution spatial dim {i}: dilated kernel {dil[i] * (kd - 1) + 1} is larger "
                f"than the padded input {s + pre[i] + post[i]}"
            )
        out.append(span // st[i] + 1)
    return _Geometry(n, c, k, groups, xs[2:], kernel, tuple(out), pre, post, st, dil)


def _check_mode(mode: str) -> bool:
    """True when the kernel must be flipped (CONVOLUTION)."""
    m = str(mode).upper()
    if m not in _MODES:
        raise UnsupportedError(f"unsupported convolution mode {mode!r} (expected one of {_MODES})")
    return m == "CONVOLUTION"


def _flip(w: np.ndarray) -> np.ndarray:
    """w reversed along its spatial dims (a view for numpy; torch has no negative steps)."""
    nsp = w.ndim - 2
    if isinstance(w, np.ndarray):
        return w[(slice(None), slice(None)) + (slice(None, None, -1),) * nsp]
    return shim.namespace(w).flip(w, axis=tuple(range(2, 2 + nsp)))


def conv_output_shape(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    *,
    pre_padding: Sequence[int],
    post_padding: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
) -> tuple[int, ...]:
    """The y shape [N, K, *out] hipDNN expects for these shapes and options."""
    return _geometry(x_shape, w_shape, pre_padding, post_padding, stride, dilation).y_shape


# --------------------------------------------------------------------------- helpers


def _padded(x: np.ndarray, g: _Geometry) -> np.ndarray:
    """x with zero padding around the spatial dims, as float64 (one copy at most)."""
    if not g.has_padding:
        return f64(x)
    xp = shim.namespace(x)
    padded = xp.zeros((g.n, g.c, *g.padded_spatial), dtype=xp.float64, device=shim.device_of(x))
    padded[g.interior] = x
    return padded


def _chunks(g: _Geometry) -> Iterator[tuple[int, int]]:
    """Batch ranges for the GEMMs.

    Images are folded into the GEMM columns only until a chunk has about
    ``_GEMM_COLUMNS`` columns (small outputs, e.g. 7x7, need it to keep BLAS busy;
    large ones, e.g. 56x56, run one image at a time and skip the fold copy), and never
    beyond a column buffer the size of the largest activation tensor.
    """
    per_image = 8 * g.c * g.kernel_size * g.out_size
    budget = max(8 * max(math.prod(g.x_shape), math.prod(g.y_shape)), _MIN_CHUNK_BYTES)
    by_budget = max(1, budget // max(per_image, 1))
    by_width = max(1, -(-_GEMM_COLUMNS // max(g.out_size, 1)))
    step = min(by_budget, by_width)
    for start in range(0, g.n, step):
        yield start, min(g.n, start + step)


def _columns(xp: np.ndarray, g: _Geometry, n0: int, n1: int) -> np.ndarray:
    """im2col of images n0..n1 with the batch folded into the columns:
    shape (groups, Cg*prod(kernel), nb*prod(out)).

    Rows are (channel, kernel tap) like ``w.reshape``; columns are (image, output
    position), so one GEMM per group covers the whole chunk even when the output
    is small (late CNN layers).
    """
    ns = shim.namespace(xp)
    view = shim.windows(ns, xp[n0:n1, ...], g.kernel, g.dilation, g.out_spatial, g.stride)
    return ns.reshape(view, (g.groups, g.cg * g.kernel_size, (n1 - n0) * g.out_size))


def _fold_batch(t4: np.ndarray, g: _Geometry) -> np.ndarray:
    """(nb, groups, Kg, O) -> (groups, Kg, nb*O), the column order of :func:`_columns`."""
    nb = t4.shape[0]
    xp = shim.namespace(t4)
    return xp.reshape(shim.contiguous(xp, xp.permute_dims(t4, (1, 2, 0, 3))), (g.groups, g.kg, nb * g.out_size))


def _w_matrix(w: np.ndarray, g: _Geometry, flip: bool) -> np.ndarray:
    """w as (groups, K/groups, Cg*prod(kernel)), flipped for CONVOLUTION mode."""
    wf = f64(w)
    if flip:
        wf = _flip(wf)
    xp = shim.namespace(wf)
    return xp.reshape(shim.contiguous(xp, wf), (g.groups, g.kg, g.cg * g.kernel_size))


def _window_slices(g: _Geometry, r: tuple[int, ...]) -> tuple[slice, ...]:
    """Where kernel tap ``r`` reads from in the padded input, over all outputs."""
    return tuple(
        slice(ri * d, ri * d + t * (o - 1) + 1, t)
        for ri, d, t, o in zip(r, g.dilation, g.stride, g.out_spatial)
    )


def _dgrad_as_fprop(g: _Geometry) -> bool:
    """Stride 1 and padding within the dilated kernel: dgrad is then a plain fprop."""
    return all(t == 1 for t in g.stride) and all(
        0 <= d * (k - 1) - p for d, k, a, b in zip(g.dilation, g.kernel, g.pre, g.post) for p in (a, b)
    )


def _dgrad_by_fprop(dy: np.ndarray, w: np.ndarray, g: _Geometry, flip: bool) -> np.ndarray:
    """dx as the fprop of dy with the spatially flipped, channel-transposed kernel.

    For stride 1 this is the same sum as col2im, but it runs as the well-shaped fprop
    GEMM (inner dim K*R instead of K) with no scatter-add pass.
    """
    wf = f64(w)
    if not flip:                      # CONVOLUTION already flipped once: flips cancel
        wf = _flip(wf)
    nsp = len(g.kernel)
    xp = shim.namespace(wf)
    w5 = xp.reshape(wf, (g.groups, g.kg, g.cg, *g.kernel))
    wt = xp.reshape(xp.permute_dims(w5, (0, 2, 1, *range(3, 3 + nsp))), (g.c, g.kg, *g.kernel))
    pad_pre = [d * (k - 1) - a for d, k, a in zip(g.dilation, g.kernel, g.pre)]
    pad_post = [d * (k - 1) - b for d, k, b in zip(g.dilation, g.kernel, g.post)]
    return conv_fwd(dy, wt, pre_padding=pad_pre, post_padding=pad_post,
                    stride=[1] * nsp, dilation=list(g.dilation))


def _check_same(arr: np.ndarray, shape: tuple[int, ...], what: str) -> None:
    if tuple(arr.shape) != shape:
        raise UnsupportedError(f"convolution {what} has shape {arr.shape}, expected {shape}")


# --------------------------------------------------------------------------- public ops


def conv_fwd(
    x: np.ndarray,
    w: np.ndarray,
    *,
    pre_padding: Sequence[int],
    post_padding: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
    mode: str = "CROSS_CORRELATION",
) -> np.ndarray:
    """y[n, k, o] = sum over c in k's group and kernel taps r of x[n, c, o*stride + r*dilation - pre] * w[k, c, r]."""
    x, w = as_array(x), as_array(w)   # x is cast while padding: no extra float64 copy
    ns = shim.namespace(x, w)
    g = _geometry(x.shape, w.shape, pre_padding, post_padding, stride, dilation)
    flip = _check_mode(mode)
    wmat = _w_matrix(w, g, flip)
    xp = _padded(x, g)
    y4 = ns.empty((g.n, g.groups, g.kg, g.out_size), dtype=ns.float64, device=shim.device_of(x))
    for n0, n1 in _chunks(g):
        cols = _columns(xp, g, n0, n1)                               # (groups, Cg*R, nb*O)
        if n1 - n0 == 1:
            shim.matmul_into(ns, wmat, cols, y4, (n0, ...))
        else:
            chunk = ns.reshape(shim.matmul(ns, wmat, cols), (g.groups, g.kg, n1 - n0, g.out_size))
            y4[n0:n1, ...] = ns.permute_dims(chunk, (2, 0, 1, 3))
            del chunk
        del cols   # free this chunk's columns before the next chunk allocates its own
    return ns.reshape(y4, g.y_shape)


def conv_dgrad(
    dy: np.ndarray,
    w: np.ndarray,
    *,
    x_shape: Sequence[int],
    pre_padding: Sequence[int],
    post_padding: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
    mode: str = "CROSS_CORRELATION",
) -> np.ndarray:
    """dx, the exact adjoint of :func:`conv_fwd` in x (col2im of w^T dy)."""
    dy, w = f64(dy), f64(w)
    ns = shim.namespace(dy, w)
    g = _geometry(x_shape, w.shape, pre_padding, post_padding, stride, dilation)
    flip = _check_mode(mode)
    _check_same(dy, g.y_shape, "dy")
    if _dgrad_as_fprop(g):
        return _dgrad_by_fprop(dy, w, g, flip)
    wmat_t = shim.contiguous(ns, ns.permute_dims(_w_matrix(w, g, flip), (0, 2, 1)))   # (groups, Cg*R, Kg)
    dy4 = ns.reshape(dy, (g.n, g.groups, g.kg, g.out_size))
    dxp = ns.zeros((g.n, g.c, *g.padded_spatial), dtype=ns.float64, device=shim.device_of(dy))
    taps = list(product(*(range(kd) for kd in g.kernel)))
    nsp = len(g.kernel)
    for n0, n1 in _chunks(g):
        cols = shim.matmul(ns, wmat_t, _fold_batch(dy4[n0:n1, ...], g))       # (groups, Cg*R, nb*O)
        cols = ns.reshape(cols, (g.c, *g.kernel, n1 - n0, *g.out_spatial))
        for r in taps:
            target = (slice(n0, n1), slice(None)) + _window_slices(g, r)
            dxp[target] += ns.permute_dims(cols[(slice(None),) + r + (Ellipsis,)], (1, 0, *range(2, 2 + nsp)))
        del cols
    return dxp[g.interior] if g.has_padding else dxp


def conv_wgrad(
    x: np.ndarray,
    dy: np.ndarray,
    *,
    w_shape: Sequence[int],
    pre_padding: Sequence[int],
    post_padding: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
    mode: str = "CROSS_CORRELATION",
) -> np.ndarray:
    """dw, the exact adjoint of :func:`conv_fwd` in w (sum over the batch of dy im2col(x)^T)."""
    x, dy = as_array(x), f64(dy)
    ns = shim.namespace(x, dy)
    g = _geometry(x.shape, w_shape, pre_padding, post_padding, stride, dilation)
    flip = _check_mode(mode)
    _check_same(dy, g.y_shape, "dy")
    dy4 = ns.reshape(dy, (g.n, g.groups, g.kg, g.out_size))
    xp = _padded(x, g)
    dw = ns.zeros((g.groups, g.kg, g.cg * g.kernel_size), dtype=ns.float64, device=shim.device_of(x))
    for n0, n1 in _chunks(g):
        cols = _columns(xp, g, n0, n1)                               # (groups, Cg*R, nb*O)
        dw += shim.matmul(ns, _fold_batch(dy4[n0:n1, ...], g), ns.permute_dims(cols, (0, 2, 1)))
        del cols
    dw = ns.reshape(dw, g.w_shape)
    return shim.contiguous(ns, _flip(dw)) if flip else dw

"""MoE grouped matmul in float64, forward and weight gradient (hipDNN's routing rules).

Follows test_sdk ``CpuFpReferenceMoeGroupedMatmul.hpp``: a routing pass maps every output
row to (source token row, expert) and refuses out-of-range or duplicate destinations, then
each expert's rows are one matrix product. The backward follows
``CpuFpReferenceMoeGroupedMatmulBwd.hpp`` (NONE routing; offsets start at 0). Arrays are
logical: token ``[1, T, K]``, weight ``[E, K, N]``, offsets ``[G, 1, 1]``, routing ``[1, R, 1]``.

Namespace-generic: the offsets and routing tensors (a few int32 per row) are read on the host,
where the routing is checked; token, weight and the products stay in their namespace (a GPU).
Each group is one matrix product written straight into its output rows (NONE and GATHER write
consecutive rows, SCATTER distinct ones through ``xp.set_rows``), so nothing beyond the output and
one group's gathered tokens is allocated; numpy's products are bounded BLAS calls (``_gemm``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hipdnn_trace.backends.reference import xp as shim
from hipdnn_trace.backends.reference.ops._arrays import f64
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.moe import group_bounds, route

__all__ = ["moe_grouped_matmul", "moe_grouped_matmul_backward"]

Array = Any


def _host_ints(a: Array | None) -> np.ndarray | None:
    """A small integer tensor (offsets, routing) as host int64 values, flattened."""
    if a is None:
        return None
    return np.asarray(shim.to_numpy(a)).reshape(-1).astype(np.int64)


def _checked_route(mode: str, top_k: int, g: int, start: int, end: int, index: np.ndarray | None,
                   ks: np.ndarray | None, rows: int, out_rows: int,
                   written: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(source rows, destination rows) of group ``g``, refused when out of range or written twice."""
    src, dst = route(mode, top_k, start, end, index, ks)
    for what, v, limit in (("source", src, rows), ("destination", dst, out_rows)):
        if ((v < 0) | (v >= limit)).any():
            raise UnsupportedError(f"routed {what} row {int(v[(v < 0) | (v >= limit)][0])} is out of range "
                                   f"[0, {limit})")
    if written[dst].any() or len(np.unique(dst)) != len(dst):
        raise UnsupportedError(f"duplicate {mode} destination row in group {g}")
    written[dst] = True
    return src, dst


def moe_grouped_matmul(token: np.ndarray, weight: np.ndarray, offsets: np.ndarray, *, mode: str = "NONE",
                       top_k: int = 0, token_index: np.ndarray | None = None, token_ks: np.ndarray | None = None,
                       output_rows: int | None = None) -> np.ndarray:
    """output[0, dst] = token[0, src] @ weight[g % E] for each routed row; unwritten rows are 0."""
    tok, w = f64(token)[0, :, :], f64(weight)
    xp = shim.namespace(tok, w)
    device = shim.device_of(tok)
    experts, n = w.shape[0], w.shape[2]
    index, ks = _host_ints(token_index), _host_ints(token_ks)
    total = len(index) if mode == "GATHER" else tok.shape[0]
    out_rows = output_rows if output_rows is not None else total
    out = xp.zeros((out_rows, n), dtype=xp.float64, device=device)
    written = np.zeros(out_rows, dtype=bool)
    for g, (start, end) in enumerate(group_bounds(_host_ints(offsets), total)):
        if end <= start:
            continue
        src, dst = _checked_route(mode, top_k, g, start, end, index, ks, tok.shape[0], out_rows, written)
        rows = tok[start:end, :] if mode != "GATHER" else xp.take(tok, shim.index_array(xp, src, device), axis=0)
        if mode == "SCATTER":
            out = shim.set_rows(xp, out, dst, shim.matmul(xp, rows, w[g % experts, :, :]))
        else:   # consecutive destination rows start..end
            shim.matmul_into(xp, rows, w[g % experts, :, :], out, (slice(start, end), slice(None)))
    return xp.reshape(out, (1, out_rows, n))


def moe_grouped_matmul_backward(doutput: np.ndarray, token: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """dweight[e] = token[rows of e]^T @ doutput[rows of e] (float64, [E, K, N])."""
    dout, tok = f64(doutput)[0, :, :], f64(token)[0, :, :]
    xp = shim.namespace(dout, tok)
    bounds = group_bounds(_host_ints(offsets), tok.shape[0])
    if bounds and bounds[0][0] != 0:
        raise UnsupportedError(f"first_token_offset[0] must be 0, got {bounds[0][0]} (rows before the first "
                               "expert would be dropped)")
    out = xp.zeros((len(bounds), tok.shape[1], dout.shape[1]), dtype=xp.float64, device=shim.device_of(tok))
    for e, (s, t) in enumerate(bounds):
        if t > s:   # an expert without rows keeps its zero gradient
            shim.matmul_into(xp, xp.matrix_transpose(tok[s:t, :]), dout[s:t, :], out, (e, slice(None), slice(None)))
    return out

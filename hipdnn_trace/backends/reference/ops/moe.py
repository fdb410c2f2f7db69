"""MoE grouped matmul in float64, forward and weight gradient (hipDNN's routing rules).

Follows test_sdk ``CpuFpReferenceMoeGroupedMatmul.hpp``: a routing pass maps every output
row to (source token row, expert) and refuses out-of-range or duplicate destinations, then
each expert's rows are one matrix product. The backward follows
``CpuFpReferenceMoeGroupedMatmulBwd.hpp`` (NONE routing; offsets start at 0). Arrays are
logical: token ``[1, T, K]``, weight ``[E, K, N]``, offsets ``[G, 1, 1]``, routing ``[1, R, 1]``.
"""

from __future__ import annotations

import numpy as np

from hipdnn_trace.backends.reference.ops._arrays import f64
from hipdnn_trace.backends.reference.ops._gemm import bounded_matmul
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.moe import group_bounds, route

__all__ = ["moe_grouped_matmul", "moe_grouped_matmul_backward"]


def moe_grouped_matmul(token: np.ndarray, weight: np.ndarray, offsets: np.ndarray, *, mode: str = "NONE",
                       top_k: int = 0, token_index: np.ndarray | None = None, token_ks: np.ndarray | None = None,
                       output_rows: int | None = None) -> np.ndarray:
    """output[0, dst] = token[0, src] @ weight[g % E] for each routed row; unwritten rows are 0."""
    tok, w = f64(token)[0], f64(weight)
    experts, n = w.shape[0], w.shape[2]
    index = None if token_index is None else np.asarray(token_index).reshape(-1).astype(np.int64)
    ks = None if token_ks is None else np.asarray(token_ks).reshape(-1).astype(np.int64)
    total = len(index) if mode == "GATHER" else tok.shape[0]
    out_rows = output_rows if output_rows is not None else total
    out = np.zeros((out_rows, n))
    written = np.zeros(out_rows, dtype=bool)
    for g, (start, end) in enumerate(group_bounds(offsets, total)):
        if end <= start:
            continue
        src, dst = route(mode, top_k, start, end, index, ks)
        for what, v, limit in (("source", src, tok.shape[0]), ("destination", dst, out_rows)):
            if ((v < 0) | (v >= limit)).any():
                raise UnsupportedError(f"routed {what} row {int(v[(v < 0) | (v >= limit)][0])} is out of range "
                                       f"[0, {limit})")
        if written[dst].any() or len(np.unique(dst)) != len(dst):
            raise UnsupportedError(f"duplicate {mode} destination row in group {g}")
        written[dst] = True
        out[dst] = bounded_matmul(tok[src], w[g % experts])
    return out[None]


def moe_grouped_matmul_backward(doutput: np.ndarray, token: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """dweight[e] = token[rows of e]^T @ doutput[rows of e] (float64, [E, K, N])."""
    dout, tok = f64(doutput)[0], f64(token)[0]
    bounds = group_bounds(offsets, tok.shape[0])
    if bounds and bounds[0][0] != 0:
        raise UnsupportedError(f"first_token_offset[0] must be 0, got {bounds[0][0]} (rows before the first "
                               "expert would be dropped)")
    return np.stack([bounded_matmul(tok[s:e].T, dout[s:e]) for s, e in bounds])

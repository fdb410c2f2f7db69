"""MoE grouped matmul (``MoeGroupedMatmulAttributes`` / ``MoeGroupedMatmulBwdAttributes``).

An expert layer's GEMMs in one node: rows of ``token`` ``[1, T, K]`` are grouped by expert by
``first_token_offset`` ``[G, 1, 1]`` (int32, non-decreasing; group ``g`` uses expert ``g % E``
and owns rows ``[offset[g], offset[g+1])``, the last group up to the row total), each group is
multiplied by its expert's ``weight`` ``[E, K, N]`` into ``output`` ``[1, rows, N]``. Routing:

* ``NONE``: routed row r reads token row r and writes output row r;
* ``GATHER``: reads token row ``token_index[r]``, writes output row r (rows = index length);
* ``SCATTER``: reads token row r, writes output row ``token_index[r] * top_k + token_ks[r]``.

Output rows no group writes are zero. The backward (NONE routing only) is
``dweight[e] = token[rows of e]^T @ doutput[rows of e]`` with ``first_token_offset`` ``[E, 1, 1]``
starting at 0. Sources: hipDNN test_sdk ``CpuFpReferenceMoeGroupedMatmul.hpp`` /
``CpuFpReferenceMoeGroupedMatmulBwd.hpp`` and flatbuffers_sdk ``MoeGroupedMatmulValidation.hpp``
(the routing contract); docs/hipdnn-format.md 2.11 and 3.11.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.opspec import OpSpec, option_path, port_path, port_tensor
from hipdnn_trace.graph.option_types import INT, NAME_OR_NUMBER

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Graph, Node

MOE = "MoeGroupedMatmulAttributes"
MOE_BACKWARD = "MoeGroupedMatmulBwdAttributes"
MODES = ("NONE", "GATHER", "SCATTER")


def mode(node: Node) -> str:
    """The routing mode as NONE/GATHER/SCATTER (hipDNN writes the name or the enum number)."""
    raw = node.params.get("mode", "NONE")
    if isinstance(raw, int) and not isinstance(raw, bool):
        return MODES[raw] if 0 <= raw < len(MODES) else str(raw)
    return str(raw).strip().upper() or "NONE"


def top_k(node: Node) -> Any:
    return node.params.get("top_k", 0)


def _dims(node: Node, graph: Graph, port: str) -> tuple[int, ...] | None:
    t = port_tensor(node, graph, port)
    return tuple(t.dims) if t is not None else None


def _routing_contract(node: Node, graph: Graph, experts: int) -> list[tuple[str, str]]:
    """hipDNN's checkMoeGroupedMatmulRouting: which routing tensors and top_k each mode takes."""
    m, k = mode(node), top_k(node)
    where_mode, where_k = option_path(node, "mode", "node"), option_path(node, "top_k", "node")
    if m not in MODES:
        return [(where_mode, f"unknown mode {node.params.get('mode')!r} (hipDNN: {', '.join(MODES)})")]
    if not isinstance(k, int) or isinstance(k, bool):
        return [(where_k, f"must be an integer, got {k!r}")]
    has_index = port_tensor(node, graph, "token_index") is not None
    has_ks = port_tensor(node, graph, "token_ks") is not None
    wants = {"NONE": (False, False), "GATHER": (True, False), "SCATTER": (True, True)}[m]
    problems = []
    for port, has, want in (("token_index", has_index, wants[0]), ("token_ks", has_ks, wants[1])):
        if has != want:
            problems.append((port_path(node, port) if has else where_mode,
                             f"{m} mode {'requires' if want else 'forbids'} the {port} tensor"))
    if m == "SCATTER" and not 1 <= k <= experts:
        problems.append((where_k, f"SCATTER needs 1 <= top_k <= {experts} experts, got {k}"))
    elif m != "SCATTER" and k != 0:
        problems.append((where_k, f"{m} mode requires top_k 0, got {k}"))
    for port in ("first_token_offset", "token_index", "token_ks"):
        t = port_tensor(node, graph, port)
        if t is not None and t.data_type != "int32":
            problems.append((port_path(node, port), f"must be int32 (hipDNN's routing contract), is {t.data_type}"))
    return problems


def _check(node: Node, graph: Graph) -> list[tuple[str, str]]:
    tok, w, fto, out = (_dims(node, graph, p) for p in ("token", "weight", "first_token_offset", "output"))
    if tok is None or w is None or fto is None or out is None:
        return []
    if not (len(tok) == len(w) == len(fto) == len(out) == 3):
        return [(port_path(node, "token"), "token, weight, first_token_offset and output must all be rank 3")]
    problems: list[tuple[str, str]] = []
    if tok[0] != 1:
        problems.append((port_path(node, "token"), f"dims {list(tok)}: the leading dim must be 1 ([1, T, K])"))
    if out[0] != 1:
        problems.append((port_path(node, "output"), f"dims {list(out)}: the leading dim must be 1 ([1, rows, N])"))
    if fto[1:] != (1, 1) or w[0] < 1 or fto[0] % w[0]:
        problems.append((port_path(node, "first_token_offset"),
                         f"dims {list(fto)} must be [G, 1, 1] with G a multiple of the {w[0]} experts"))
    if tok[2] != w[1]:
        problems.append((port_path(node, "weight"), f"dims {list(w)}: K {w[1]} differs from token's {tok[2]}"))
    if out[2] != w[2]:
        problems.append((port_path(node, "output"), f"dims {list(out)}: N {out[2]} differs from weight's {w[2]}"))
    problems += _routing_contract(node, graph, w[0])
    if problems:
        return problems
    m = mode(node)
    for port in ("token_index", "token_ks"):
        d = _dims(node, graph, port)
        if d is not None and (len(d) != 3 or d[0] != 1 or d[2] != 1):
            problems.append((port_path(node, port), f"dims {list(d)} must be [1, rows, 1]"))
    if problems:
        return problems
    index = _dims(node, graph, "token_index")
    if m == "SCATTER":
        if index[1] != tok[1] or _dims(node, graph, "token_ks")[1] != tok[1]:
            problems.append((port_path(node, "token_index"), f"SCATTER needs token_index and token_ks with one "
                             f"row per token row ({tok[1]})"))
    if m == "GATHER" and out[1] != index[1]:
        problems.append((port_path(node, "output"), f"GATHER writes one row per token_index row ({index[1]}), "
                         f"output has {out[1]}"))
    elif m != "GATHER" and out[1] != tok[1]:
        problems.append((port_path(node, "output"), f"{m} writes one row per token row ({tok[1]}), output has "
                         f"{out[1]}"))
    return problems


def _bwd_check(node: Node, graph: Graph) -> list[tuple[str, str]]:
    dout, tok, fto, dw = (_dims(node, graph, p) for p in ("doutput", "token", "first_token_offset", "dweight"))
    if dout is None or tok is None or fto is None or dw is None:
        return []
    if not (len(dout) == len(tok) == len(fto) == len(dw) == 3):
        return [(port_path(node, "token"), "doutput, token, first_token_offset and dweight must all be rank 3")]
    problems: list[tuple[str, str]] = []
    if tok[0] != 1 or dout[0] != 1:
        problems.append((port_path(node, "token"), "token and doutput need a leading dim of 1"))
    if fto != (dw[0], 1, 1):
        problems.append((port_path(node, "first_token_offset"), f"dims {list(fto)} must be [E, 1, 1] with E = "
                         f"dweight's {dw[0]} experts"))
    if tok[2] != dw[1] or dout[2] != dw[2]:
        problems.append((port_path(node, "dweight"), f"dims {list(dw)} must be [E, K {tok[2]}, N {dout[2]}]"))
    if dout[1] != tok[1]:
        problems.append((port_path(node, "doutput"), f"{dout[1]} rows differ from token's {tok[1]}"))
    t = port_tensor(node, graph, "first_token_offset")
    if t is not None and t.data_type != "int32":
        problems.append((port_path(node, "first_token_offset"), f"must be int32, is {t.data_type}"))
    return problems


def rows_total(node: Node, graph: Graph) -> int:
    """Rows the offsets range over: the index length under GATHER, else the token rows."""
    if node.type == MOE and mode(node) == "GATHER":
        return int(port_tensor(node, graph, "token_index").dims[1])
    return int(port_tensor(node, graph, "token").dims[1])


def routed_rows(node: Node, graph: Graph, values: dict[int, Any] | None = None) -> int:
    """Rows actually multiplied: from the first group's offset to the row total (all rows
    when the offsets are not known yet)."""
    total = rows_total(node, graph)
    uid = node.inputs.get("first_token_offset")
    if values and isinstance(uid, int) and uid in values:
        first = int(values[uid].reshape(-1)[0])   # numpy or a device tensor: one element read
        return max(0, total - first)
    return total


def flops(node: Node, graph: Graph, values: dict[int, Any] | None = None) -> float:
    """2 K N per routed row: the real per-expert row counts summed, when the offsets are bound."""
    w = port_tensor(node, graph, "weight" if node.type == MOE else "dweight")
    if w is None:
        return 0.0
    return 2.0 * w.dims[1] * w.dims[2] * routed_rows(node, graph, values)


def group_bounds(offsets: np.ndarray, rows_total: int) -> list[tuple[int, int]]:
    """[start, end) of each group; the offsets must be non-decreasing within [0, rows_total]."""
    first = [int(v) for v in np.asarray(offsets).reshape(-1)]
    for g, v in enumerate(first):
        if not 0 <= v <= rows_total:
            raise UnsupportedError(f"first_token_offset[{g}] = {v} is out of range [0, {rows_total}]")
        if g and v < first[g - 1]:
            raise UnsupportedError(f"first_token_offset must be non-decreasing (violated at group {g})")
    return [(v, first[g + 1] if g + 1 < len(first) else rows_total) for g, v in enumerate(first)]


def route(mode: str, top_k: int, start: int, end: int, index: np.ndarray | None, ks: np.ndarray | None
          ) -> tuple[np.ndarray, np.ndarray]:
    """(source token rows, destination output rows) of routed rows [start, end) under hipDNN's modes."""
    rows = np.arange(start, end)
    if mode == "GATHER":
        return index[rows], rows
    if mode == "SCATTER":
        bad = (ks[rows] < 0) | (ks[rows] >= top_k)
        if bad.any():
            r = int(rows[bad][0])
            raise UnsupportedError(f"token_ks[{r}] = {ks[r]} is out of range [0, {top_k})")
        return rows, index[rows] * top_k + ks[rows]
    if mode == "NONE":
        return rows, rows
    raise UnsupportedError(f"unknown MoE routing mode {mode!r}")


def _notes(node: Node, graph: Graph) -> list[str]:
    w = port_tensor(node, graph, "weight" if node.type == MOE else "dweight")
    fto = port_tensor(node, graph, "first_token_offset")
    if w is None or fto is None:
        return []
    groups = fto.dims[0]
    routing = f"mode {mode(node)}" + (f", top_k {top_k(node)}" if mode(node) == "SCATTER" else "")
    return [f"{w.dims[0]} experts, {groups} group(s) (group g uses expert g % {w.dims[0]}), {routing}",
            "FLOPs = 2 K N x routed rows, counted from the bound first_token_offset at run time"]


#: hipDNN writes mode (lower case) and top_k on the node itself (flatbuffers_sdk json/MoeGroupedMatmulAttributes.hpp)
_FWD_OPTIONS = {"mode": "node", "top_k": "node"}

SPECS = (
    OpSpec(MOE, ("token", "weight", "first_token_offset"), ("output",),
           optional_inputs=("token_index", "token_ks"), options=_FWD_OPTIONS,
           option_kinds={"mode": NAME_OR_NUMBER, "top_k": INT},
           check=_check, flops=flops, notes=_notes, flops_use_values=True),
    OpSpec(MOE_BACKWARD, ("doutput", "token", "first_token_offset"), ("dweight",),
           check=_bwd_check, flops=flops, notes=_notes, flops_use_values=True),
)

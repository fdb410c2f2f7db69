"""hipDNN's ragged tensors (RFC 0014): per-sequence offsets into a packed ``[B, S, H, D]`` buffer.

A ragged attention tensor is declared ``[B, H, S_max, D]`` with token-major strides (one token,
``H x D`` elements, every ``strides[2]``) and names an int32/int64 ``[B + 1, 1, 1, 1]`` offset
tensor (``ragged_offset_tensor_uid``): sequence b's first element is ``offset[b] * multiplier``
(``ragged_offset_multiplier``, default 1) and its length in tokens is the offset difference over
the token stride; the batch stride is not used. Sources: hipDNN ``RaggedTokenBoundaries.hpp``
and ``GpuFpReferenceSdpaRagged.hpp``; cudnn-frontend ``docs/operations/Attention.md``, "Ragged
Offset Tensor" (docs/hipdnn-format.md 3.10).

The harness holds every tensor as its logical array, so a ragged one is the dense upper bound
``[B, H, S_max, D]`` whose rows past a sequence's length have no meaning; :func:`pack` and
:func:`unpack` move between that and the packed buffer a library reads, at the binding boundary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hipdnn_trace.graph.model import RAGGED_SUFFIX, Tensor
from hipdnn_trace.graph.opspec import port_path, port_tensor

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Graph, Node

#: Ports whose tensors share the query's packing, and those sharing the keys'.
QUERY_PORTS = ("q", "o", "do", "dq", "stats")
KEY_PORTS = ("k", "v", "dk", "dv")


def offset_port(port: str) -> str:
    """The pseudo-port a node reads ``port``'s offset tensor through (``Graph.reads``)."""
    return port + RAGGED_SUFFIX


def token_stride(t: Tensor) -> int:
    """Elements from one token to the next: the stride of the S axis of [B, H, S, D]."""
    return int(t.strides[2])


def is_token_major(t: Tensor) -> bool:
    """hipDNN's rule (``isTokenMajorRaggedLayout``): the S stride covers a whole token's H x D block."""
    if len(t.dims) != 4 or len(t.strides) != 4:
        return False
    span = 1 + sum((t.dims[i] - 1) * t.strides[i] for i in (1, 3) if t.dims[i] > 0)
    return t.strides[2] >= span


def _flat_ints(values: Any) -> list[int]:
    if hasattr(values, "detach"):   # a torch tensor (any device)
        values = values.detach().cpu().reshape(-1).tolist()
    elif hasattr(values, "reshape"):
        values = values.reshape(-1).tolist()
    return [int(v) for v in values]


def tokens(values: Any, t: Tensor, batch: int) -> list[int]:
    """Token boundaries (B + 1 of them) of ``t`` from its offset tensor's values, checked as hipDNN
    checks them: offset[0] 0, whole tokens, non-decreasing, no sequence longer than S_max."""
    stride, s_max = token_stride(t), t.dims[2]
    elements = [v * t.ragged_offset_multiplier for v in _flat_ints(values)[: batch + 1]]
    if len(elements) != batch + 1:
        raise ValueError(f"tensor {t.name!r}: its ragged offsets hold {len(elements)} values, need B + 1 = {batch + 1}")
    if elements[0] != 0:
        raise ValueError(f"tensor {t.name!r}: ragged offset[0] must be 0, got {elements[0]}")
    out = []
    for b, e in enumerate(elements):
        if e % stride:
            raise ValueError(f"tensor {t.name!r}: ragged offset[{b}] = {e} elements is not a whole number of "
                             f"tokens ({stride} elements)")
        out.append(e // stride)
        if b and not 0 <= out[b] - out[b - 1] <= s_max:
            raise ValueError(f"tensor {t.name!r}: sequence {b - 1} has {out[b] - out[b - 1]} tokens "
                             f"(ragged offsets must not decrease, nor pass S_max = {s_max})")
    return out


def lengths(bounds: Sequence[int]) -> list[int]:
    """Per-sequence lengths from token boundaries."""
    return [b - a for a, b in zip(bounds, bounds[1:])]


def offsets_for(lens: Sequence[int], t: Tensor) -> list[int]:
    """The values ``t``'s offset tensor holds for sequences of ``lens`` tokens packed from element 0:
    cumulative tokens x token stride / multiplier (the inverse of :func:`tokens`)."""
    stride, mult = token_stride(t), t.ragged_offset_multiplier
    out, total = [0], 0
    for n in lens:
        total += n
        elements = total * stride
        if elements % mult:
            raise ValueError(f"tensor {t.name!r}: {elements} elements is not a multiple of its "
                             f"ragged_offset_multiplier {mult}")
        out.append(elements // mult)
    return out


def _window(flat: Any, start: int, shape: tuple[int, int, int], strides: tuple[int, int, int]) -> Any:
    """A strided [H, L, D] view of ``flat`` from element ``start`` (numpy or torch)."""
    if hasattr(flat, "as_strided"):
        return flat.as_strided(shape, strides, start)
    from numpy.lib.stride_tricks import as_strided

    return as_strided(flat[start:], shape, tuple(s * flat.itemsize for s in strides), writeable=True)


def _check_fits(t: Tensor, bounds: Sequence[int], size: int) -> None:
    if not bounds or bounds[-1] == 0:
        return
    h, d = t.dims[1], t.dims[3]
    last = (bounds[-1] - 1) * t.strides[2] + (h - 1) * t.strides[1] + (d - 1) * t.strides[3]
    if last >= size:
        raise ValueError(f"tensor {t.name!r}: its {bounds[-1]} packed tokens need {last + 1} elements, "
                         f"its buffer holds {size}")


def pack(logical: Any, t: Tensor, bounds: Sequence[int], flat: Any) -> Any:
    """Write ``logical`` [B, H, S_max, D] into ``flat`` (``t.storage_elements`` long, numpy or torch) as
    the packed buffer: sequence b's rows 0..len-1 from token ``bounds[b]`` on. Returns ``flat``."""
    _check_fits(t, bounds, int(flat.shape[0]))
    h, d = t.dims[1], t.dims[3]
    for b, n in enumerate(lengths(bounds)):
        if n:
            view = _window(flat, bounds[b] * t.strides[2], (h, n, d), (t.strides[1], t.strides[2], t.strides[3]))
            view[...] = logical[b, :, :n, :]
    return flat


def unpack(flat: Any, t: Tensor, bounds: Sequence[int], logical: Any) -> Any:
    """Inverse of :func:`pack`: each sequence's rows into ``logical`` [B, H, S_max, D] (rows past a
    length keep what ``logical`` held). Returns ``logical``."""
    _check_fits(t, bounds, int(flat.shape[0]))
    h, d = t.dims[1], t.dims[3]
    for b, n in enumerate(lengths(bounds)):
        if n:
            logical[b, :, :n, :] = _window(flat, bounds[b] * t.strides[2], (h, n, d),
                                           (t.strides[1], t.strides[2], t.strides[3]))
    return logical


# ---------------------------------------------------------------- one attention node's ragged form

def ragged_ports(node: Node, graph: Graph) -> tuple[str, ...]:
    """The node's ports whose tensors name a ragged offset tensor."""
    out = []
    for port in (*QUERY_PORTS, *KEY_PORTS):
        t = port_tensor(node, graph, port)
        if t is not None and t.ragged_offset_tensor_uid is not None:
            out.append(port)
    return tuple(out)


def _required(node: Node, graph: Graph, paged: bool) -> tuple[str, ...]:
    """hipDNN's ragged SDPA packs q, k, v and o together (GpuSdpaRaggedFwdPlan.hpp), and the backward
    their gradients with them; with paged K/V only the query side is packed (cuDNN's paged ragged Q/O)."""
    ports = ("q", "o", "do", "dq") if paged else ("q", "o", "do", "dq", "k", "v", "dk", "dv")
    return tuple(p for p in ports if port_tensor(node, graph, p) is not None)


def _offset_problems(node: Node, graph: Graph, port: str, batch: int) -> list[tuple[str, str]]:
    t = port_tensor(node, graph, port)
    assert t is not None
    path, uid = port_path(node, port), t.ragged_offset_tensor_uid
    off = graph.by_uid.get(uid) if isinstance(uid, int) else None
    if off is None:
        return [(path, f"tensor {t.name!r}: ragged_offset_tensor_uid {uid} is not a tensor of the graph")]
    problems = []
    if off.data_type not in ("int32", "int64"):
        problems.append((path, f"ragged offset tensor {off.name!r} must be int32 or int64, not {off.data_type}"))
    if off.virtual or off.is_value or uid in graph.produced_uids:
        problems.append((path, f"ragged offset tensor {off.name!r} must be a plain graph input (not virtual, "
                         "by value or a node's output)"))
    if off.numel != batch + 1 or not off.dims or off.dims[0] != batch + 1:
        problems.append((path, f"ragged offset tensor {off.name!r} has dims {list(off.dims)}: expected "
                         f"[B + 1, 1, 1, 1] = [{batch + 1}, 1, 1, 1]"))
    if not is_token_major(t):
        problems.append((path, f"tensor {t.name!r} is ragged but its strides {list(t.strides)} are not token-major "
                         "([B, H, S, D] stored [B, S, H, D]: strides[2] must cover one token's H x D block)"))
    return problems


def _shared_problems(node: Node, graph: Graph, ports: Sequence[str]) -> list[tuple[str, str]]:
    """Tensors that share one offset tensor must need the same values from it (same elements per
    token / multiplier), or no content could serve both."""
    seen: dict[int, tuple[str, Tensor]] = {}
    for port in ports:
        t = port_tensor(node, graph, port)
        assert t is not None and t.ragged_offset_tensor_uid is not None
        first = seen.setdefault(t.ragged_offset_tensor_uid, (port, t))
        a = first[1]
        if token_stride(a) * t.ragged_offset_multiplier != token_stride(t) * a.ragged_offset_multiplier:
            mine, theirs = (f"{token_stride(x)}/{x.ragged_offset_multiplier}" for x in (t, a))
            return [(port_path(node, port), f"{port} and {first[0]} share ragged offset tensor "
                     f"{t.ragged_offset_tensor_uid} but need different offsets (elements per token / multiplier "
                     f"{mine} vs {theirs})")]
    return []


def problems(node: Node, graph: Graph, batch: int) -> list[tuple[str, str]]:
    """(JSON path, problem) for a node whose tensors carry ragged offsets; [] when none does."""
    ports = ragged_ports(node, graph)
    if not ports:
        return []
    paged = node.inputs.get("page_table_k") is not None
    why = ("paged K/V packs only the query side (q, o and their gradients)" if paged else
           "hipDNN's ragged SDPA packs q, k, v and o (and the backward's dO, dQ, dK, dV) together; "
           "GpuSdpaRaggedFwdPlan.hpp")
    out = [(port_path(node, p), f"{p} must carry ragged_offset_tensor_uid like {ports[0]} ({why})")
           for p in _required(node, graph, paged) if p not in ports]
    if paged:
        out += [(port_path(node, p), f"{p} is a page container with paged K/V and cannot be ragged")
                for p in ports if p in KEY_PORTS]
    for port in ("seq_len_q", "seq_len_kv"):
        if node.inputs.get(port) is not None and not (paged and port == "seq_len_kv"):
            out.append((port_path(node, port), "lengths of ragged tensors come from their offsets: hipDNN's "
                        f"ragged SDPA takes no {port} (GpuSdpaRaggedFwdPlan.hpp)"))
    stats = port_tensor(node, graph, "stats")
    if "stats" in ports and stats is not None and len(stats.dims) != 4:
        out.append((port_path(node, "stats"), f"a ragged stats tensor is [B, H, Sq, 1], got {list(stats.dims)}"))
        ports = tuple(p for p in ports if p != "stats")
    for port in ports:
        out += _offset_problems(node, graph, port, batch)
    return out or _shared_problems(node, graph, ports)


def linked(node: Node, graph: Graph) -> bool:
    """True when a key-side tensor shares its offset tensor with a query-side one: one set of lengths."""
    uids = {p: t.ragged_offset_tensor_uid for p in (*QUERY_PORTS, *KEY_PORTS)
            if (t := port_tensor(node, graph, p)) is not None and t.ragged_offset_tensor_uid is not None}
    return bool({uids[p] for p in QUERY_PORTS if p in uids} & {uids[p] for p in KEY_PORTS if p in uids})


def side_lengths(node: Node, graph: Graph, values: Mapping[int, Any], ports: Sequence[str],
                 batch: int) -> list[int] | None:
    """Per-sequence lengths of one side (query or key ports) from whichever of its offset tensors
    ``values`` holds; every one given must agree (hipDNN's requireMatchingTokenBoundaries). None
    when no offset tensor of the side is in ``values``."""
    found: tuple[str, list[int]] | None = None
    for port in ports:
        t = port_tensor(node, graph, port)
        if t is None or t.ragged_offset_tensor_uid not in values:
            continue
        lens = lengths(tokens(values[t.ragged_offset_tensor_uid], t, batch))
        if found is not None and lens != found[1]:
            raise ValueError(f"{node.op} {node.name!r}: {port} and {found[0]} ragged offsets give different "
                             f"sequence lengths ({lens} vs {found[1]})")
        found = found or (port, lens)
    return None if found is None else found[1]


def tensor_bounds(graph: Graph, values: Mapping[int, Any]) -> dict[int, list[int]]:
    """uid -> token boundaries of every ragged tensor of ``graph`` whose offset tensor ``values`` holds:
    what a session needs to pack its inputs and unpack its outputs."""
    out = {}
    for t in graph.tensors:
        uid = t.ragged_offset_tensor_uid
        if uid is not None and uid in values and len(t.dims) == 4:
            out[t.uid] = tokens(values[uid], t, t.dims[0])
    return out

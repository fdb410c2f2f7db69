"""Routing tensors with meaning for MoE grouped matmuls.

Random int32 offsets would break hipDNN's contract (non-decreasing, in range) and random
indices would collide, so the routing of each MoE node is drawn as a router would make it:
every token picks ``top_k`` distinct experts with skewed popularity (a few hot experts, some
left empty), routed rows are sorted by expert, ``first_token_offset`` marks where each
expert's rows start (monotone, first 0, counts summing to the routed rows), ``token_index``
names each routed row's token and ``token_ks`` which of its k choices it is. Deterministic
per (seed, graph, node): the three tensors of one node always agree.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hipdnn_trace.graph import moe
from hipdnn_trace.graph.model import Graph, Node, Tensor

RngFor = Callable[[int], np.random.Generator]
#: Share of experts a router leaves without tokens in the generated routing (at least one when E >= 4).
EMPTY_SHARE = 0.125
#: Zipf-like skew of expert popularity (weight of the r-th most popular expert ~ 1 / r**SKEW).
SKEW = 1.2


def moe_nodes(graph: Graph) -> list[Node]:
    return [n for n in graph.nodes if n.type in (moe.MOE, moe.MOE_BACKWARD)]


def _popularity(rng: np.random.Generator, groups: int) -> np.ndarray:
    p = 1.0 / np.arange(1, groups + 1) ** SKEW
    if groups >= 4:
        p[-max(1, int(groups * EMPTY_SHARE)):] = 0.0
    p = p[rng.permutation(groups)]
    return p / p.sum()


def routing(node: Node, graph: Graph, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """first_token_offset (and token_index / token_ks where the mode takes them) for ``node``."""
    groups = graph.by_uid[node.inputs["first_token_offset"]].dims[0]
    m = moe.mode(node) if node.type == moe.MOE else "NONE"
    rows = moe.rows_total(node, graph)
    p = _popularity(rng, groups)
    if m == "NONE":
        counts = rng.multinomial(rows, p)
        return {"first_token_offset": np.concatenate([[0], np.cumsum(counts)[:-1]])}
    k = int(moe.top_k(node)) if m == "SCATTER" else 0
    if m == "GATHER":
        tokens = graph.by_uid[node.inputs["token"]].dims[1]
        k = rows // tokens if rows % tokens == 0 and 1 <= rows // tokens <= groups else 0
    if k:   # every token picks k distinct groups (Gumbel top-k of the skewed popularity)
        tokens = rows // k
        with np.errstate(divide="ignore"):
            keys = np.log(p)[None, :] + rng.gumbel(size=(tokens, groups))
        chosen = np.argsort(-keys, axis=1)[:, :k]
        group = chosen.reshape(-1)
        token = np.repeat(np.arange(tokens), k)
        which = np.tile(np.arange(k), tokens)
    else:   # GATHER whose rows are no whole multiple of the tokens: each row draws a token
        group = rng.choice(groups, size=rows, p=p)
        token = rng.integers(0, graph.by_uid[node.inputs["token"]].dims[1], size=rows)
        which = np.zeros(rows, dtype=np.int64)
    order = np.argsort(group, kind="stable")
    counts = np.bincount(group, minlength=groups)
    out = {"first_token_offset": np.concatenate([[0], np.cumsum(counts)[:-1]]), "token_index": token[order]}
    if m == "SCATTER":
        out["token_ks"] = which[order]
    return out


def metadata_value(graph: Graph, tensor: Tensor, rng_for: RngFor) -> np.ndarray | None:
    """The value of ``tensor`` when an MoE node routes with it, else None."""
    for node in moe_nodes(graph):
        port = next((p for p, u in node.inputs.items()
                     if u == tensor.uid and p in ("first_token_offset", "token_index", "token_ks")), None)
        if port is None:
            continue
        values = routing(node, graph, rng_for(node.inputs["first_token_offset"]))
        if port in values:
            return values[port].reshape(tensor.dims).astype(np.float64)
    return None

"""Dims and strides as cuDNN wants them: equal ranks, collapsed batches, channel-last views."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from hipdnn_trace.backends.cudnn_graph.plan_types import CONV_TYPES
from hipdnn_trace.graph.model import Graph


def _extent(dims: Sequence[int], strides: Sequence[int]) -> int:
    return max([d * s for d, s in zip(dims, strides)] + [1])


def lift(dims: Sequence[int], strides: Sequence[int], rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Prepend size-1 dims up to ``rank`` (their strides span the whole tensor)."""
    extra = rank - len(dims)
    if extra <= 0:
        return tuple(dims), tuple(strides)
    step = _extent(dims, strides)
    return (1,) * extra + tuple(dims), (step,) * extra + tuple(strides)


def collapse_batch(dims: Sequence[int], strides: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """[..batch.., M, N] -> [B, M, N] when the batch dims address memory as one dim."""
    batch_d, batch_s = list(dims[:-2]), list(strides[:-2])
    total = 1
    for d in batch_d:
        total *= d
    live = [(d, s) for d, s in zip(batch_d, batch_s) if d > 1]
    for (_, s_out), (d_in, s_in) in zip(live, live[1:]):
        if s_out != s_in * d_in:
            return None
    stride = live[-1][1] if live else _extent(dims[-2:], strides[-2:])
    return (total, *dims[-2:]), (stride, *strides[-2:])


#: Node types whose semantics do not depend on which logical axis is which, as long as every
#: tensor is permuted the same way (batchnorm inference is lowered to pointwise ops here).
ELEMENTWISE_TYPES = {"PointwiseAttributes", "ReductionAttributes", "BatchnormInferenceAttributesVarianceExt"}


def channels_last_permutation(dims: Sequence[int], strides: Sequence[int]) -> tuple[int, ...]:
    """Axis order that makes a tensor look N-spatial-C packed to cuDNN (innermost axis as dim 1).

    cuDNN's pointwise and reduction engines accept "NHWC"-ordered tensors with C = dim 1 > 1;
    an elementwise graph means the same under any axis permutation applied to all its
    tensors, so a row-major [.., H, W] or NCHW graph is shown to cuDNN with its innermost
    axis in the channel slot. Memory and results are unchanged.
    """
    order = sorted(range(len(dims)), key=lambda a: (-strides[a] if dims[a] > 1 else 1, a))
    live = [a for a in order if dims[a] > 1]
    inner = live[-1] if live else order[-1]
    rest = [a for a in order if a != inner]
    return (rest[0], inner, *rest[1:]) if rest else (inner,)


def coalesce(shapes: Mapping[int, tuple[Sequence[int], Sequence[int]]]
             ) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]] | None:
    """Merge axes (equal-rank tensors keyed by uid) that every tensor addresses as one.

    Axes are walked in the memory order of the largest tensor; the next axis joins the
    current group when, in every tensor, both are size 1, or both are full-size and
    the group's innermost stride equals the axis's stride times its size. Axes of
    size 1 everywhere are dropped. None when the tensors do not share one axis order.
    """
    items = list(shapes.items())
    rank = len(items[0][1][0])
    full = [max(d[a] for _, (d, _) in items) for a in range(rank)]
    anchor = max(items, key=lambda kv: np.prod(kv[1][0]))[1]
    order = [a for a in sorted(range(rank), key=lambda a: (-anchor[1][a], a)) if full[a] > 1]
    if not order:
        return None
    groups: list[list[int]] = [[order[0]]]
    for b in order[1:]:
        a = groups[-1][-1]
        ok = True
        for _, (dims, strides) in items:
            both_one = all(dims[x] == 1 for x in groups[-1]) and dims[b] == 1
            both_full = all(dims[x] == full[x] for x in groups[-1]) and dims[b] == full[b] \
                and strides[a] == strides[b] * dims[b]
            if not (both_one or both_full):
                ok = False
                break
        if ok:
            groups[-1].append(b)
        else:
            groups.append([b])
    out = {}
    for uid, (dims, strides) in items:
        nd, ns = [], []
        for grp in groups:
            inner = grp[-1]
            if all(dims[x] == 1 for x in grp):
                nd.append(1)
                ns.append(1)
            elif all(dims[x] == full[x] for x in grp):
                nd.append(int(np.prod([full[x] for x in grp])))
                ns.append(int(strides[inner]))
            else:
                return None
        out[uid] = (tuple(nd), tuple(ns))
    return out


def unit_strides_packed(dims: Sequence[int], strides: Sequence[int]) -> tuple[int, ...]:
    """Strides of size-1 axes rewritten as a packed N-spatial-C tensor would have them.

    A size-1 axis addresses nothing, so its stride is free; cuDNN's layout checks still
    compare it ("fully packed"), so give it the value packing implies in the storage
    order N, spatial..., C (C = dim 1 innermost).
    """
    rank = len(dims)
    storage = [0, *range(2, rank), 1] if rank >= 3 else list(range(rank))
    out = list(strides)
    span = 1
    for axis in reversed(storage):
        if dims[axis] == 1:
            out[axis] = span
        else:
            span = out[axis] * dims[axis]
    return tuple(out)


def target_rank(graph: Graph) -> int:
    types = {n.type for n in graph.nodes}
    top = max((len(t.dims) for t in graph.tensors if not t.is_value), default=1)
    if types & set(CONV_TYPES):
        return top
    if "MatmulAttributes" in types or types & {"MoeGroupedMatmulAttributes", "MoeGroupedMatmulBwdAttributes"}:
        return max(3, top)   # cuDNN's MoE takes hipDNN's rank-3 tensors as they are
    return max(4, top)

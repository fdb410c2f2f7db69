"""The normalization family (batchnorm, layernorm, RMSNorm, forward and backward): specs and the
shape rules every backend shares.

Batchnorm normalizes per channel (dim 1 of x [N, C, ...]; docs/hipdnn-format.md 2.5, 3.4). For
layernorm and RMSNorm, hipDNN states the normalized axes three ways: ``normalized_dim_count``, scale's shape (the
trailing dims where scale matches x: test_sdk ``CpuReferenceRMSNorm.hpp``, frontend
``validateScaleNormalizedShape``) and the saved statistics' shape (x's leading dims, 1s over
the normalized ones). One module derives them, so the loader, inspect, the reference, torch
and cuDNN refuse and accept the same graphs with the same words (docs/hipdnn-format.md 3.5,
3.6, 3.6b).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import TYPE_CHECKING, Any

from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.opspec import (
    OpSpec,
    ShapeCheck,
    all_of,
    elementwise_flops,
    option_path,
    port_path,
    port_tensor,
    same_dims,
)
from hipdnn_trace.graph.option_types import INT_OR_NULL, NAME_OR_NUMBER_OR_NULL

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Graph, Node

__all__ = ["SPECS", "layernorm_forward_check", "norm_backward_check", "norm_backward_start", "norm_forward_phase",
           "rmsnorm_count", "rmsnorm_forward_check", "rmsnorm_refusal", "rmsnorm_start", "rmsnorm_start_axis"]

RMSNORM_RULE = ("hipDNN normalizes the trailing dims where scale matches x, and inv_rms keeps x's leading dims: "
                "test_sdk CpuReferenceRMSNorm.hpp, frontend validateScaleNormalizedShape")


def rmsnorm_start_axis(
    x_shape: tuple[int, ...], scale_shape: tuple[int, ...], normalized_dim_count: int | None = None
) -> int:
    """The first normalized axis of x, from normalized_dim_count or from scale's shape."""
    rank = len(x_shape)
    if rank < 2:
        raise UnsupportedError(f"rmsnorm needs x of rank >= 2, got shape {x_shape}")
    if normalized_dim_count is not None:
        k = int(normalized_dim_count)
        if not 1 <= k <= rank:
            raise UnsupportedError(f"rmsnorm: normalized_dim_count {k} must be between 1 and rank {rank}")
        return rank - k
    if len(scale_shape) != rank:
        raise UnsupportedError(
            f"rmsnorm: scale rank {len(scale_shape)} must equal x rank {rank} to derive the normalized dims"
        )
    matching = 0
    for xd, sd in zip(reversed(x_shape), reversed(scale_shape)):
        if xd != sd:
            break
        matching += 1
    start = 1 if matching >= rank else rank - matching
    if start == rank:
        raise UnsupportedError(
            f"rmsnorm: scale {tuple(scale_shape)} shares no trailing dims with x {tuple(x_shape)}"
        )
    return start



def _dims(node: Node, graph: Graph, port: str) -> tuple[int, ...]:
    t = port_tensor(node, graph, port)
    return tuple(t.dims) if t is not None else ()


def rmsnorm_count(node: Node, graph: Graph) -> Any:
    """normalized_dim_count, or the one inv_rms's shape states (docs/hipdnn-format.md 3.6: hipDNN's
    references disagree; inv_rms's shape is the unambiguous statement of the trailing axes)."""
    count = node.params.get("normalized_dim_count")
    inv_rms = port_tensor(node, graph, "inv_rms")
    if count is None and inv_rms is not None:
        x_dims = _dims(node, graph, "x")
        start = stat_start(x_dims, tuple(inv_rms.dims))
        if start is None and _reduces_any(x_dims, tuple(inv_rms.dims)):
            raise UnsupportedError(f"rmsnorm inv_rms {list(inv_rms.dims)} reduces non-trailing axes of x "
                                   f"{list(x_dims)}")
        if start is not None:
            count = len(x_dims) - start
    return count


def _reduces_any(x_dims: tuple[int, ...], stat_dims: tuple[int, ...]) -> bool:
    return len(x_dims) == len(stat_dims) and any(s == 1 and x > 1 for x, s in zip(x_dims, stat_dims))


def stat_start(x_dims: tuple[int, ...], stat_dims: tuple[int, ...]) -> int | None:
    """The first normalized axis a saved statistic's shape states (inv_rms, mean, inv_variance: 1 from
    that axis on), or None when it states none (another rank, nothing reduced) or reduces an axis before
    one it keeps. An axis where x is 1 fits either side and does not decide: of the starts that fit, the
    earliest is taken, but not the batch axis 0 while a later one fits (hipDNN's
    ``validateScaleNormalizedShape``, Utilities.hpp @ 95d66084, normalizes the longest trailing run and dims
    1.. when every dim matches). x ``[N, C, 1, 1]`` with inv_rms ``[N, 1, 1, 1]`` starts at 1. The kept
    axes' sizes are not checked here: the per-row count check names a wrong one."""
    if not _reduces_any(x_dims, stat_dims):
        return None
    after_last_kept = max((i + 1 for i, s in enumerate(stat_dims) if s != 1), default=0)
    first_reduced = next(i for i, (x, s) in enumerate(zip(x_dims, stat_dims)) if s == 1 and x > 1)
    if first_reduced < after_last_kept:
        return None   # a reduced axis before a kept one
    return max(after_last_kept, min(1, first_reduced))


def rmsnorm_start(node: Node, graph: Graph) -> int:
    """First normalized axis of an RMSNorm forward node (UnsupportedError when hipDNN's rule fails)."""
    return rmsnorm_start_axis(_dims(node, graph, "x"), _dims(node, graph, "scale"), rmsnorm_count(node, graph))


def rmsnorm_refusal(node: Node, graph: Graph) -> str | None:
    """Why hipDNN's rule cannot normalize this RMSNorm node (one line naming the rule), or None."""
    x_dims, scale_dims = _dims(node, graph, "x"), _dims(node, graph, "scale")
    try:
        start = rmsnorm_start(node, graph)
    except UnsupportedError as exc:
        return f"RMSNorm node {node.name!r}: {exc} ({RMSNORM_RULE})"
    if prod(scale_dims) != prod(x_dims[start:]):
        return (f"RMSNorm node {node.name!r}: scale {list(scale_dims)} does not span the normalized dims "
                f"{list(x_dims[start:])} of x {list(x_dims)} ({RMSNORM_RULE})")
    return None


def _same_dims_as_x(node: Node, graph: Graph, ports: tuple[str, ...]) -> list[tuple[str, str]]:
    x = port_tensor(node, graph, "x")
    return [(port_path(node, p), f"dims {list(t.dims)} differ from x's {list(x.dims)}")
            for p in ports if x is not None and (t := port_tensor(node, graph, p)) is not None
            and tuple(t.dims) != tuple(x.dims)]


def norm_backward_start(node: Node, graph: Graph) -> int | None:
    """First normalized axis of a layernorm/RMSNorm backward: from normalized_dim_count, else
    from the saved statistic's shape (1s over the normalized trailing axes)."""
    x = port_tensor(node, graph, "x")
    if x is None:
        return None
    count = node.params.get("normalized_dim_count")
    if isinstance(count, int) and not isinstance(count, bool):
        return len(x.dims) - count if 1 <= count <= len(x.dims) else None
    stat = (port_tensor(node, graph, "inv_rms") or port_tensor(node, graph, "inv_variance")
            or port_tensor(node, graph, "mean"))
    if stat is None:
        return None
    return stat_start(tuple(x.dims), tuple(stat.dims))


def _per_row_and_feature(node: Node, graph: Graph, start: int) -> list[tuple[str, str]]:
    """Saved statistics hold one value per normalized row, scale/bias/dscale/dbias one per element."""
    x = port_tensor(node, graph, "x")
    assert x is not None
    problems = []
    per_row, per_feature = prod(x.dims[:start]), prod(x.dims[start:])
    for port in ("mean", "inv_variance", "inv_rms"):
        t = port_tensor(node, graph, port)
        if t is not None and t.numel != per_row:
            problems.append((port_path(node, port), f"has {t.numel} values, expected one per normalized "
                             f"row ({per_row})"))
    for port in ("scale", "bias", "dscale", "dbias"):
        t = port_tensor(node, graph, port)
        if t is not None and t.numel != per_feature:
            problems.append((port_path(node, port), f"has {t.numel} values, expected one per normalized "
                             f"element ({per_feature}, dims {list(x.dims[start:])})"))
    return problems


def one_value(node: Node, graph: Graph, ports: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(port_path(node, p), f"{p} is one value, this tensor has {t.numel}")
            for p in ports if (t := port_tensor(node, graph, p)) is not None and t.numel != 1]


def saved_pair(node: Node, graph: Graph) -> list[tuple[str, str]]:
    """Saved mean and inv_variance come together (the reference and hipDNN's recompute both or neither)."""
    mean, inv = (port_tensor(node, graph, p) for p in ("mean", "inv_variance"))
    if (mean is None) != (inv is None):
        given, missing = ("mean", "inv_variance") if mean is not None else ("inv_variance", "mean")
        return [(port_path(node, given), f"{given} is given without {missing}: give both saved statistics "
                 "or neither")]
    return []


def norm_backward_check(node: Node, graph: Graph) -> list[tuple[str, str]]:
    x = port_tensor(node, graph, "x")
    if x is None:
        return []
    problems = _same_dims_as_x(node, graph, ("dy", "dx")) + saved_pair(node, graph) + \
        one_value(node, graph, ("epsilon",))
    if node.type == "LayernormBackwardAttributes" and port_tensor(node, graph, "mean") is None \
            and port_tensor(node, graph, "epsilon") is None:
        problems.append(("inputs", "LayernormBackward without saved mean/inv_variance needs epsilon to "
                         "recompute them"))
    start = norm_backward_start(node, graph)
    if start is None or start == 0:
        where = option_path(node, "normalized_dim_count", "attributes") if "normalized_dim_count" in node.params \
            else port_path(node, "inv_rms" if "inv_rms" in node.inputs else "inv_variance")
        return problems + [(where, f"cannot tell the normalized dims of x {list(x.dims)}: give "
                            "normalized_dim_count, or saved statistics shaped like x with 1s over them")]
    return problems + _per_row_and_feature(node, graph, start)


def layernorm_forward_check(node: Node, graph: Graph) -> list[tuple[str, str]]:
    """Layernorm forward: scale/bias over the normalized trailing dims, mean/inv_variance one per row
    (when normalized_dim_count or the statistics' shape says which dims those are)."""
    x = port_tensor(node, graph, "x")
    if x is None:
        return []
    problems = one_value(node, graph, ("epsilon",))
    start = norm_backward_start(node, graph)
    if start is None:
        return problems   # the reference refuses it (no normalized_dim_count): not a malformed file
    return problems + _per_row_and_feature(node, graph, start)


def rmsnorm_forward_check(node: Node, graph: Graph) -> list[tuple[str, str]]:
    """RMSNorm forward: one epsilon, bias like scale, and inv_rms one per row when
    normalized_dim_count says which dims are normalized (scale's shape rule is the reference's
    business: older hipDNN normalized per channel, see rmsnorm_refusal)."""
    problems = one_value(node, graph, ("epsilon",))
    scale, bias, x = (port_tensor(node, graph, p) for p in ("scale", "bias", "x"))
    if scale is not None and bias is not None and bias.numel != scale.numel:
        problems.append((port_path(node, "bias"), f"has {bias.numel} values, scale has {scale.numel}"))
    count = node.params.get("normalized_dim_count")
    inv_rms = port_tensor(node, graph, "inv_rms")
    if x is not None and inv_rms is not None and isinstance(count, int) and not isinstance(count, bool) \
            and 1 <= count <= len(x.dims) and inv_rms.numel != prod(x.dims[:len(x.dims) - count]):
        problems.append((port_path(node, "inv_rms"), f"has {inv_rms.numel} values, expected one per normalized "
                         f"row ({prod(x.dims[:len(x.dims) - count])})"))
    return problems


#: hipDNN's NormFwdPhase names (JSON strings in any case, or the enum numbers 0..2)
FORWARD_PHASES = ("NOT_SET", "INFERENCE", "TRAINING")


def norm_options_check(node: Node, graph: Graph) -> list[tuple[str, str]]:
    """normalized_dim_count an integer within x's rank, forward_phase one of hipDNN's phases."""
    problems: list[tuple[str, str]] = []
    x = port_tensor(node, graph, "x")
    count = node.params.get("normalized_dim_count")
    if count is not None and x is not None and (
            not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= len(x.dims)):
        problems.append((option_path(node, "normalized_dim_count", "attributes"),
                         f"must be an integer from 1 to x's rank {len(x.dims)}, got {count!r}"))
    phase = node.params.get("forward_phase")
    if phase is not None:
        ok = (phase in (0, 1, 2) and not isinstance(phase, bool)) if not isinstance(phase, str) else \
            phase.strip().upper() in FORWARD_PHASES
        if not ok:
            problems.append((option_path(node, "forward_phase", "attributes"),
                             f"unknown forward_phase {phase!r} (hipDNN: {', '.join(FORWARD_PHASES)})"))
    return problems


#: hipDNN's NormFwdPhase enum values, for graphs that write the number instead of the name.
_NORM_PHASES = {0: "NOT_SET", 1: "INFERENCE", 2: "TRAINING"}


def norm_forward_phase(node: Node) -> str:
    """A layernorm/rmsnorm node's forward_phase: INFERENCE, TRAINING or NOT_SET (int or any-case string)."""
    raw = node.params.get("forward_phase", "NOT_SET")
    if isinstance(raw, int) and not isinstance(raw, bool):
        return _NORM_PHASES.get(raw, "NOT_SET")
    return str(raw).strip().upper()


def _per_channel(ports: Sequence[str], like: str) -> ShapeCheck:
    """Batchnorm parameters: one value per channel (dim 1) of ``like``."""
    def check(node: Node, graph: Graph) -> list[tuple[str, str]]:
        ref = port_tensor(node, graph, like)
        if ref is None or len(ref.dims) < 2:
            return []
        c = ref.dims[1]
        return [
            (port_path(node, p), f"has {prod(t.dims)} elements, expected one per channel ({c})")
            for p in ports if (t := port_tensor(node, graph, p)) is not None and not t.is_value
            and prod(t.dims) != c
        ]
    return check


def _batchnorm_rules(node: Node, graph: Graph) -> list[tuple[str, str]]:
    """x is [N, C, ...]; epsilon and momentum are one value each; a backward's saved mean and
    inv_variance come together (hipDNN's reference recomputes both or neither)."""
    x = port_tensor(node, graph, "x")
    if x is not None and len(x.dims) < 2:
        return [(port_path(node, "x"), f"batchnorm needs x of rank >= 2 [N, C, ...], got {list(x.dims)}")]
    problems = one_value(node, graph, ("epsilon", "momentum"))
    if node.type == "BatchnormBackwardAttributes":
        problems += saved_pair(node, graph)
    return problems


_BN_STATS = ("mean", "inv_variance", "scale", "bias")
_NORM_FWD_KINDS = {"normalized_dim_count": INT_OR_NULL, "forward_phase": NAME_OR_NUMBER_OR_NULL}

SPECS: tuple[OpSpec, ...] = (
    OpSpec(
        "BatchnormInferenceAttributes", ("x", *_BN_STATS), ("y",),
        check=all_of(_batchnorm_rules, same_dims(("y",), "x"), _per_channel(_BN_STATS, "x")),
        flops=elementwise_flops(4.0, "x"),
    ),
    OpSpec(
        "BatchnormInferenceAttributesVarianceExt",
        ("x", "mean", "variance", "scale", "bias", "epsilon"), ("y",),
        check=all_of(_batchnorm_rules, same_dims(("y",), "x"),
                     _per_channel(("mean", "variance", "scale", "bias"), "x")),
        flops=elementwise_flops(4.0, "x"),
    ),
    OpSpec(
        "BatchnormAttributes", ("x", "scale", "bias", "epsilon"), ("y",),
        optional_inputs=("prev_running_mean", "prev_running_variance", "momentum"),
        optional_outputs=("mean", "inv_variance", "next_running_mean", "next_running_variance"),
        list_inputs=("peer_stats",),
        check=all_of(_batchnorm_rules, same_dims(("y",), "x"),
                     _per_channel(("scale", "bias", "prev_running_mean", "prev_running_variance",
                                   "mean", "inv_variance", "next_running_mean",
                                   "next_running_variance"), "x")),
        flops=elementwise_flops(8.0, "x"),
    ),
    OpSpec(
        "BatchnormBackwardAttributes", ("dy", "x", "scale"), ("dx",),
        optional_inputs=("mean", "inv_variance"),
        optional_outputs=("dscale", "dbias"),
        list_inputs=("peer_stats",),
        check=all_of(_batchnorm_rules, same_dims(("dx", "dy"), "x"),
                     _per_channel(("scale", "mean", "inv_variance", "dscale", "dbias"), "x")),
        flops=elementwise_flops(10.0, "x"),
    ),
    OpSpec(
        "LayernormAttributes", ("x", "scale", "epsilon"), ("y",),
        optional_inputs=("bias",), optional_outputs=("mean", "inv_variance"),
        options={"normalized_dim_count": "attributes", "forward_phase": "attributes"}, option_kinds=_NORM_FWD_KINDS,
        check=all_of(same_dims(("y",), "x"), norm_options_check, layernorm_forward_check),
        flops=elementwise_flops(8.0, "x"),
    ),
    OpSpec(
        "RMSNormAttributes", ("x", "scale", "epsilon"), ("y",),
        optional_inputs=("bias",), optional_outputs=("inv_rms",),
        options={"normalized_dim_count": "attributes", "forward_phase": "attributes"}, option_kinds=_NORM_FWD_KINDS,
        check=all_of(same_dims(("y",), "x"), norm_options_check, rmsnorm_forward_check),
        flops=elementwise_flops(6.0, "x"),
    ),
    OpSpec(
        "LayernormBackwardAttributes", ("dy", "x", "scale"), ("dx",),
        optional_inputs=("mean", "inv_variance", "epsilon"), optional_outputs=("dscale", "dbias"),
        options={"normalized_dim_count": "attributes"}, option_kinds={"normalized_dim_count": INT_OR_NULL},
        check=norm_backward_check, flops=elementwise_flops(10.0, "x"),
    ),
    OpSpec(
        "RMSNormBackwardAttributes", ("dy", "x", "scale", "inv_rms"), ("dx",),
        optional_outputs=("dscale", "dbias"),
        check=norm_backward_check, flops=elementwise_flops(8.0, "x"),
    ),
)

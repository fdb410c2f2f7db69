"""Graph-wide rules every backend and ``inspect`` share: refusals no backend may run past, and notes
on attributes that are legal but dubious.

A refusal here is something the upstream sources define as not produced (a layernorm's saved
statistics in INFERENCE); a note is a value the sources allow but that is most likely a mistake
(an empty relu clip range, a negative epsilon), said once, in the same words by ``inspect`` and
``run`` (``bench/verdict.py`` asks both). docs/hipdnn-format.md ("Shared verdict") cites the sources.
"""

from __future__ import annotations

import math

from hipdnn_trace.graph.dtypes import scalar_value
from hipdnn_trace.graph.model import Graph, Node
from hipdnn_trace.graph.norms import norm_forward_phase

__all__ = ["dubious_attributes", "refusal"]

#: outputs a forward layernorm writes only in TRAINING (hipDNN's reference and Python ``layernorm()``
#: leave them null in INFERENCE; cuDNN's frontend creates them only for TRAINING)
_TRAINING_ONLY_OUTPUTS = {"LayernormAttributes": ("mean", "inv_variance")}


def refusal(graph: Graph) -> str | None:
    """Why no backend can run ``graph`` as written (one line), or None."""
    for node in graph.nodes:
        wanted = [p for p in _TRAINING_ONLY_OUTPUTS.get(node.type, ()) if node.outputs.get(p) is not None]
        if wanted and norm_forward_phase(node) == "INFERENCE":
            return (f"{node.op} node {node.name!r}: forward_phase INFERENCE writes no {' or '.join(wanted)} "
                    f"(saved statistics exist in TRAINING only), but the graph asks for "
                    f"output{'s' if len(wanted) > 1 else ''} {', '.join(wanted)}")
    return None


def _value(graph: Graph, uid: object) -> float | None:
    """A pass-by-value scalar's number, or None (a seeded tensor, or a uid that is not a value)."""
    tensor = graph.by_uid.get(uid) if isinstance(uid, int) else None
    if tensor is None or not tensor.is_value:
        return None
    try:
        return scalar_value(tensor)
    except (TypeError, ValueError, OverflowError):
        return None


def _relu_note(node: Node) -> str | None:
    lower, upper = node.params.get("relu_lower_clip"), node.params.get("relu_upper_clip")
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (lower, upper))
    if not numbers or not lower > upper:   # type: ignore[operator]
        return None
    return (f"{node.op}({node.params.get('operation')}) node {node.name!r}: relu_lower_clip {lower:g} > "
            f"relu_upper_clip {upper:g}: the clip range is empty (hipDNN's functor gives {lower:g} at or "
            f"below {lower:g} and {upper:g} above; a clamp would give {upper:g} everywhere)")


def _epsilon_note(node: Node, graph: Graph) -> str | None:
    eps = _value(graph, node.inputs.get("epsilon"))
    if eps is None or (eps >= 0 and math.isfinite(eps)):
        return None
    return (f"{node.op} node {node.name!r}: epsilon {eps:g} is {'negative' if eps < 0 else 'not finite'}: "
            f"variance + epsilon can be zero or negative, so outputs can be NaN or Inf "
            f"(epsilon is the small positive constant of 1/sqrt(variance + epsilon))")


def dubious_attributes(graph: Graph) -> list[str]:
    """One note per attribute value the sources allow but that is most likely a mistake."""
    notes: list[str] = []
    for node in graph.nodes:
        mode = str(node.params.get("operation", "")).lower() if node.type == "PointwiseAttributes" else ""
        found = _relu_note(node) if mode in ("relu_fwd", "relu_bwd") else None
        notes += [n for n in (found, _epsilon_note(node, graph)) if n]
    return notes

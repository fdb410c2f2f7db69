"""Pointwise inputs with a domain: a log/sqrt/rsqrt argument is positive, a divisor nonzero.

Drawn values span both signs and several binary orders (``counter_rng``); these modes would
turn a negative or zero operand into NaN or infinity, which no comparison can judge.
"""

from __future__ import annotations

from hipdnn_trace.graph.model import Node
from hipdnn_trace.graph.pointwise import pointwise_mode

POSITIVE_MODES = {"log", "sqrt", "rsqrt"}
NONZERO_MODES = {"div", "reciprocal"}


def domain(node: Node, port: str) -> str | None:
    """The domain of ``port`` of a pointwise node ("positive", "nonzero"), or None."""
    mode = pointwise_mode(node)   # hipDNN accepts any case
    if mode in POSITIVE_MODES and port == "in_0":
        return "positive"
    if mode in NONZERO_MODES and (port == "in_1" or mode == "reciprocal"):
        return "nonzero"
    return None

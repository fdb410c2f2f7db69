"""Attention -> ``sdpa`` / ``sdpa_backward`` (filled in below)."""

from __future__ import annotations

from hipdnn_trace.backends.cudnn_graph.builder import _Builder
from hipdnn_trace.errors import UnsupportedError
from hipdnn_trace.graph.model import Node


def sdpa(b: _Builder, node: Node) -> None:
    raise UnsupportedError("not yet")


def sdpa_backward(b: _Builder, node: Node) -> None:
    raise UnsupportedError("not yet")

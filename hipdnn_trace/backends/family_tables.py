"""One backend's view of the op-family registry (graph/families.py), built the same way for each.

The registry names each backend's module per family by dotted path and never imports it; the
reference executor, ``torch_ops`` and ``cudnn_graph`` each turn their field of every entry into a
dispatch table here, so the three build their tables by one rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from hipdnn_trace.graph.families import FAMILIES, Absent
from hipdnn_trace.graph.ops import family_types


@dataclass(frozen=True)
class LayerTables:
    """node type -> the backend's function for it; -> its family's refusal check (where the module has
    ``check``); and the node types of the families this backend lacks, with the entry's reason."""

    ops: dict[str, Any]
    checks: dict[str, Callable[..., Any]]
    absent: dict[str, Absent]


def layer_tables(field: str, table: str) -> LayerTables:
    """The tables from the ``field`` entry of every family: its module's ``table`` (e.g. ``HANDLERS``,
    ``OPS``) and optional ``check``, or the family's :class:`Absent` reason for its node types."""
    ops: dict[str, Any] = {}
    checks: dict[str, Callable[..., Any]] = {}
    absent: dict[str, Absent] = {}
    for family in FAMILIES:
        piece = getattr(family, field)
        if isinstance(piece, Absent):
            absent.update(dict.fromkeys(family_types(family), piece))
            continue
        module = import_module(piece)
        functions = getattr(module, table)
        ops.update(functions)
        if hasattr(module, "check"):
            checks.update(dict.fromkeys(functions, module.check))
    return LayerTables(ops, checks, absent)

"""The JSON type of every option of every modelled node type, checked at load.

A string where hipDNN's reader wants a number (``"relu_upper_clip": "6"``) or a number where it
wants a flag would otherwise reach an op as a default or as a Python ``ValueError`` at run time,
with no JSON path. Values (enum names, ranges, list lengths) are each family's shape rule's job;
each family's spec says what JSON type each of its options is (``OpSpec.option_kinds``, made of
the kinds below), so ``inspect`` and ``run`` refuse the same files with the same words. Every
option a spec declares has a kind (a test holds that).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hipdnn_trace.graph.opspec import OpSpec, OptionKind, option_path

if TYPE_CHECKING:
    from hipdnn_trace.graph.model import Node

#: value -> None when it is of the kind, else what was expected (for the message)
Kind = OptionKind


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _kind(test: Callable[[Any], bool], expected: str, *, nullable: bool = False) -> Kind:
    def check(value: Any) -> str | None:
        if value is None and nullable:
            return None
        return None if test(value) else expected + (" or null" if nullable else "")
    return check


INT = _kind(_is_int, "an integer")
INT_OR_NULL = _kind(_is_int, "an integer", nullable=True)
NUMBER_OR_NULL = _kind(_is_number, "a finite number", nullable=True)
BOOL_OR_NULL = _kind(lambda v: isinstance(v, bool), "true or false", nullable=True)
STRING = _kind(lambda v: isinstance(v, str), "a string")
STRING_OR_NULL = _kind(lambda v: isinstance(v, str), "a string", nullable=True)
NAME_OR_NUMBER = _kind(lambda v: isinstance(v, str) or _is_int(v), "an enum name or number")
NAME_OR_NUMBER_OR_NULL = _kind(lambda v: isinstance(v, str) or _is_int(v), "an enum name or number", nullable=True)
INT_LIST = _kind(lambda v: isinstance(v, list) and all(_is_int(x) for x in v), "a list of integers")
INT_OR_INT_LIST = _kind(lambda v: _is_int(v) or (isinstance(v, list) and all(_is_int(x) for x in v)),
                        "an integer or a list of integers")
ANY: Kind = lambda value: None   # opaque to hipDNN too: a test-generation marker

def option_problems(node: Node, spec: OpSpec) -> list[tuple[str, str]]:
    """(JSON path inside the node, problem) for each option whose JSON type is not the kind its spec
    says; options are placed in the section the file put them in, else the spec's."""
    kinds, sections = spec.option_kinds, spec.options
    problems = []
    for key, value in node.params.items():
        kind = kinds.get(key)
        expected = kind(value) if kind is not None else None
        if expected is not None:
            shown = (repr(value) if not isinstance(value, (list, dict)) or len(repr(value)) < 40
                     else type(value).__name__)
            problems.append((option_path(node, key, sections.get(key, "attributes")),
                             f"{node.op} option {key} must be {expected}, got {shown}"))
    return problems

"""No function in the package is over 80 lines (the project's standard): a longer one is where
decisions pile up unseen (``run``'s old ``main`` was 152 lines). Counted from the source with ast,
decorators and docstring included, nested functions counted on their own and inside their parent."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "hipdnn_trace"
MAX_LINES = 80


def long_functions(source: str, name: str) -> list[str]:
    """``file:line name (N lines)`` for every function in ``source`` longer than MAX_LINES."""
    found = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines = (node.end_lineno or node.lineno) - first + 1
            if lines > MAX_LINES:
                found.append(f"{name}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_the_counter_finds_a_long_function() -> None:
    body = "".join(f"    x = {i}\n" for i in range(MAX_LINES))
    assert long_functions(f"def f():\n{body}", "m.py") == [f"m.py:1 f ({MAX_LINES + 1} lines)"]
    assert long_functions(f"def f():\n{body[: -len('    x = 79' + chr(10))]}", "m.py") == []


def test_no_function_in_the_package_is_over_80_lines() -> None:
    found = [hit for path in sorted(PACKAGE.rglob("*.py"))
             for hit in long_functions(path.read_text(), str(path.relative_to(PACKAGE.parent)))]
    assert not found, "split these (docs/architecture.md: small functions):\n" + "\n".join(found)

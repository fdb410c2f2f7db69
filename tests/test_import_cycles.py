"""No import circles inside the package, checked from the source with the stdlib (ast).

Every ``import`` statement counts, module-level or deferred inside a function: a deferred
import hides a circle from the interpreter, not from a reader, and it is how the
markers <-> markers_roctx circle stayed in place. Imports under ``if TYPE_CHECKING:`` never
run and are skipped. An edge to a module's own parent package is dropped: Python always
imports the parent first.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hipdnn_trace

PACKAGE = Path(hipdnn_trace.__file__).resolve().parent
ROOT = PACKAGE.parent

#: Circles still allowed, each with its reason. A circle found must lie inside one of these.
ALLOWED: dict[frozenset[str], str] = {
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement outside ``if TYPE_CHECKING:`` blocks."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
                continue
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                prefix = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:   # `from pkg import sub` imports the submodule, not pkg's body alone
                sub = f"{prefix}.{alias.name}"
                targets.add(sub if sub in files else prefix)
        graph[module] = {t for t in targets if t in files and t != module and not module.startswith(t + ".")}
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_circle_finder_finds_a_circle_through_a_deferred_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [{"a", "b", "c"}]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_outside_the_allow_list() -> None:
    graph = import_graph()
    assert "hipdnn_trace.markers" in graph and len(graph) > 50
    unexpected = [sorted(c) for c in circles(graph) if not any(c <= allowed for allowed in ALLOWED)]
    assert unexpected == [], f"import circles: {unexpected}"


def test_markers_modules_share_constants_through_markers_base() -> None:
    graph = import_graph()
    assert "hipdnn_trace.markers" not in graph["hipdnn_trace.markers_roctx"]
    assert "hipdnn_trace.markers_base" in graph["hipdnn_trace.markers_roctx"]
    assert "hipdnn_trace.markers_base" in graph["hipdnn_trace.markers"]


@pytest.mark.parametrize("module", ["hipdnn_trace.markers_roctx", "hipdnn_trace.markers", "hipdnn_trace.markers_base"])
def test_each_markers_module_imports_fresh_on_its_own(module: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = (f"import sys, {module}; "
            "print(sorted(m for m in sys.modules if m.startswith('hipdnn_trace.markers')))")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = set(eval(done.stdout))   # our own printed list
    if module == "hipdnn_trace.markers_roctx":
        assert "hipdnn_trace.markers" not in loaded   # the roctx side needs only the shared base
    assert module in loaded

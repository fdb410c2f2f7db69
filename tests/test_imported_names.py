"""Every name a module imports exists in its target, wherever the import sits (issue 33: a deferred
``from ...xp import resolve_device`` inside a function made every GPU backend 'cannot run' on every
machine with torch, and no test imported that path). Two checks over hipdnn_trace/:

* every module imports here (torch, numpy, polars and the other CPU-installable dependencies present);
* every ``from X import Y`` — module level or deferred inside a function — names a Y that X defines (or a
  submodule X.Y), for the project's own modules and for every third-party module installed here. Imports
  inside ``try`` blocks that catch ImportError are alternatives by design and are left out; modules that
  cannot be installed on a CPU machine (cuDNN's frontend, CUPTI, ...) are checked on the GPU machine,
  where the same test runs.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "hipdnn_trace"
CATCHES_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(_module_name(p) for p in PACKAGE.rglob("*.py") if p.name != "__main__.py")   # __main__ runs the CLI


def _guarded(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Inside a ``try`` whose handlers catch an ImportError (an optional or version-dependent import)."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.Try):
            for handler in node.handlers:
                names = [handler.type] if not isinstance(handler.type, ast.Tuple) else list(handler.type.elts)
                if handler.type is None or any(getattr(n, "id", getattr(n, "attr", "")) in CATCHES_IMPORT_ERRORS
                                               for n in names):
                    return True
    return False


def _imports(path: Path, here: str | None = None) -> list[tuple[int, str, str]]:
    """(line, module, name) for every unguarded ``from module import name`` in ``path`` (module ``here``)."""
    tree = ast.parse(path.read_text(), str(path))
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    here = here or _module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or _guarded(node, parents):
            continue
        module = importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level \
            else node.module or ""
        found += [(node.lineno, module, alias.name) for alias in node.names if alias.name != "*"]
    return found


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module.split(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def _submodule(module: str, name: str) -> bool:
    try:
        return importlib.util.find_spec(f"{module}.{name}") is not None
    except (ImportError, AttributeError, ValueError):   # ``module`` is no package
        return False


@pytest.mark.parametrize("module", MODULES)
def test_every_module_imports_with_its_dependencies_present(module: str) -> None:
    importlib.import_module(module)


def test_every_imported_name_exists_in_its_target() -> None:
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, module, name in _imports(path):
            if module == "__future__" or not _installed(module):
                continue
            target = importlib.import_module(module)
            if hasattr(target, name):
                continue
            if not _submodule(module, name):
                missing.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {module} has no {name}")
    assert not missing, "\n".join(missing)


def test_the_check_finds_a_missing_name_in_a_deferred_import(tmp_path: Path) -> None:
    """The check itself can fail: a deferred (relative) import of a name its target lacks is found, one
    guarded by ``except ImportError`` is not."""
    bad = tmp_path / "probe.py"
    bad.write_text("def f():\n    from .reference.xp import no_such_function\n"
                   "try:\n    from .reference.xp import other_missing\nexcept ImportError:\n    pass\n")
    found = [(m, n) for _, m, n in _imports(bad, here="hipdnn_trace.backends.probe")]
    assert found == [("hipdnn_trace.backends.reference.xp", "no_such_function")]
    assert not hasattr(importlib.import_module("hipdnn_trace.backends.reference.xp"), "no_such_function")

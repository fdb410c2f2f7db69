"""The docs name only files and folders that exist.

README.md, docs/*.md and the other Markdown files point readers at modules and tests by path
(``hipdnn_trace/bench/loop.py``, ``bench/loop.py``, ``tests/results/``). Code moves; a doc that still
names the old place sends a newcomer nowhere. Checked here:

* a path starting ``hipdnn_trace/`` or ``tests/`` (any file or folder), from the checkout, and one
  starting ``benchmarks/`` or ``graphs/`` that ends in ``.py`` or ``/`` (upstream repos have a
  ``graphs/`` of their own);
* a ``.py`` path starting with a folder of the package (``bench/loop.py``,
  ``reference/ops/rounding.py``, ``torch_ops/conv.py``), which must end some module's path.

Paths in upstream repositories (``source/bin/rocprofv3.py``, ``python/.../test_x.py``) start with a
folder of theirs, or follow a ``/``, and are not checked; nor are URLs, or patterns with ``<``, ``*``
or ``{``.
"""

from __future__ import annotations

import re
from pathlib import Path

from repo_paths import REPO

PACKAGE = REPO / "hipdnn_trace"
#: folders whose every path named in a doc must exist (files of any kind, folders)
CHECKOUT = ("hipdnn_trace", "tests")
#: folders whose ``.py`` files and ``/``-ended folders must exist
ROOTS = ("benchmarks", "graphs")

#: a path-like token: not preceded by a path character, a URL's host, or a word
_TOKEN = re.compile(r"(?<![\w./:-])([A-Za-z_][\w.-]*(?:/[\w.<>{}*-]+)+/?)")


def markdown_files() -> list[Path]:
    """Every Markdown file of the checkout that a reader lands on (not the tests' data sources)."""
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "tests" / "README.md",
             REPO / "profiles" / "README.md"]
    return [f for f in files if f.is_file()]


def package_folders() -> set[str]:
    """The names of the package's folders (``bench``, ``reference``, ``torch_ops``, ...)."""
    return {p.name for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__"}


def module_paths() -> list[str]:
    """Every module of the package, as a path relative to the package."""
    return [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")]


def _missing(token: str, folders: set[str], modules: list[str]) -> bool:
    """Whether ``token`` is a path of ours that names nothing."""
    path = token.rstrip(".,;:)")
    if any(c in path for c in "<>{}*") or "//" in path:
        return False
    first = path.split("/", 1)[0]
    if first in CHECKOUT:
        return not (REPO / path).exists()
    if first in ROOTS:   # upstream repos have graphs/ too: only our code and folders named as such
        return path.endswith((".py", "/")) and not (REPO / path).exists()
    if first in folders and path.endswith(".py"):
        return not any(m == path or m.endswith("/" + path) for m in modules)
    return False


def missing_paths(text: str, folders: set[str], modules: list[str]) -> list[str]:
    """The paths of ours ``text`` names that exist nowhere."""
    return [t for t in _TOKEN.findall(text) if _missing(t, folders, modules)]


def test_the_finder_catches_a_moved_module_and_skips_upstream_paths() -> None:
    folders, modules = package_folders(), module_paths()
    text = ("see `hipdnn_trace/bench/loop.py`, `bench/loop.py`, `reference/ops/rounding.py`, `tests/results/`; "
            "gone: `results/stats.py`, `tests/reliability/`, `hipdnn_trace/trace/gpu.py`; upstream: "
            "`source/bin/rocprofv3.py`, `python/hipdnn_frontend/test/test_x.py`, https://x.org/bench/y.py, "
            "`tests/<package path>/`, `tests/reliability`")
    assert missing_paths(text, folders, modules) == ["results/stats.py", "tests/reliability/",
                                                     "hipdnn_trace/trace/gpu.py", "tests/reliability"]


def test_docs_name_only_files_that_exist() -> None:
    folders, modules = package_folders(), module_paths()
    found = [f"{doc.relative_to(REPO)}:{n}: {token}"
             for doc in markdown_files()
             for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
             for token in missing_paths(line, folders, modules)]
    assert not found, "docs name paths that do not exist (moved or gone?):\n" + "\n".join(found)


def _expand(text: str) -> set[str]:
    """Every path ``text`` names, with ``dir/{a,b}.py`` read as ``dir/a.py`` and ``dir/b.py``."""
    names: set[str] = set()
    for token in re.findall(r"`([^`\s]+)`", text):
        m = re.fullmatch(r"(.*)\{([^{}]+)\}(.*)", token)
        names.update(f"{m[1]}{part}{m[3]}" for part in m[2].split(",")) if m else names.add(token)
    return names


def _defines_something(path: Path) -> bool:
    """Whether a module holds code of its own (a package ``__init__`` with only a docstring does not)."""
    import ast

    return any(not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
               for node in ast.parse(path.read_text(encoding="utf-8")).body)


def test_architecture_names_every_module() -> None:
    named = _expand((REPO / "docs" / "architecture.md").read_text(encoding="utf-8"))
    unnamed = [m for m in sorted(module_paths())
               if m not in named and (not m.endswith("__init__.py") or _defines_something(PACKAGE / m))]
    assert not unnamed, "give these a row in docs/architecture.md's module tables:\n" + "\n".join(unnamed)

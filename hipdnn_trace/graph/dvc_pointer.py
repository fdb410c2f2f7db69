"""A bundle's DVC pointer read as a manifest: which ``.bin`` files it names, with their md5 and size.

dnn-providers keeps golden tensors in S3 and commits only the pointer (``{Name}.tensors.dvc``; a sweep
case's ``golden/{id}/tensors.dvc``; the older tree one ``{Name}.tensor{uid}.bin.dvc`` per file), a YAML
list of ``outs`` each with ``path``, ``md5``, ``size``, ``hash: md5`` and maybe ``remote``
(``dnn-providers/integration-tests/docs/file-formats.md`` @ 6ed0dc19, "Golden data"). The md5s let a run
prove two things without the data: that a ``.bin`` beside the graph is the file the pointer names (a
stale or edited pull is not golden), and that inputs remade by the bundle's generator are byte for byte
the ones its golden outputs were computed from (else those outputs judge other inputs).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hipdnn_trace import read_gate
from hipdnn_trace.errors import GraphError

__all__ = ["PointerEntry", "PointerError", "read_pointer"]

#: a pointer is a few lines per tensor file
POINTER = read_gate.Kind("DVC pointers", 1024 * 1024)
_FIELDS = ("path", "md5", "size", "hash", "remote")


class PointerError(GraphError):
    """A DVC pointer that cannot be read as DVC writes it: names the file and line."""


@dataclass(frozen=True)
class PointerEntry:
    """One ``outs`` entry: the file (a name beside the pointer), its md5 and size when recorded."""

    path: str
    md5: str | None = None
    size: int | None = None


def read_pointer(path: Path) -> dict[str, PointerEntry]:
    """The pointer's entries by file name. DVC writes a flat ``outs:`` list of ``key: value`` maps
    (``dvc commit``; the README's hand-written ``- path: X`` lines before it, without md5, too)."""
    try:
        text = read_gate.read_bytes(path, POINTER).decode("utf-8")
    except (read_gate.ReadRefused, UnicodeDecodeError) as exc:
        raise PointerError(str(path), "", getattr(exc, "problem", str(exc))) from None
    entries: list[dict[str, str]] = []
    seen_outs = False
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if line == "outs:":
            seen_outs = True
            continue
        item = line.lstrip()
        if item.startswith("- "):
            entries.append({})
            item = item[2:]
        key, sep, value = item.partition(":")
        if not seen_outs or not entries or not sep or key.strip() not in _FIELDS:
            raise PointerError(str(path), f"line {number}", f"{raw.strip()!r}: not an outs entry as DVC writes it")
        entries[-1][key.strip()] = value.strip().strip("'\"")
    out: dict[str, PointerEntry] = {}
    for i, entry in enumerate(entries):
        name = entry.get("path")
        if not name:
            raise PointerError(str(path), f"outs[{i}].path", "missing")
        size = entry.get("size")
        if size is not None and not size.isdigit():
            raise PointerError(str(path), f"outs[{i}].size", f"{size!r}: must be a byte count")
        out[Path(name).name] = PointerEntry(name, entry.get("md5") or None, int(size) if size else None)
    return out

"""The exact bytes a run read for one graph, found again and checked against the row's graph_id.

A run records each graph's source (summary ``source``: a file path as the command line gave it, or
``archive:member``) and the folder it started in (run.json ``environment.cwd``). The bytes are read
again through the graph readers every command uses (size gate, regular files only, archives
checked whole) and must still hash to the row's graph_id: a file edited since the run would make a
bundle of something else, so it is refused in one line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hipdnn_trace.errors import UserError
from hipdnn_trace.graph.load import load_bytes, read_graph_file
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.graph.sources import ARCHIVE_SUFFIXES, expand

#: the top-level keys of a hipDNN graph file (graph/load.py)
GRAPH_KEYS = frozenset({"name", "compute_data_type", "io_data_type", "intermediate_data_type", "tensors", "nodes"})
_MEMBER = re.compile(r"^(.*?(?:" + "|".join(re.escape(s) for s in ARCHIVE_SUFFIXES) + r")):(.+)$")


@dataclass(frozen=True)
class GraphBytes:
    data: bytes
    origin: str                 # the file (or archive:member) read now
    graph: Graph | None         # None: the bytes do not load (the row's own error may be why)
    verified: bool              # the bytes hash to the row's graph_id


def _candidates(source: str, cwd: str | None) -> list[Path]:
    path = Path(source).expanduser()
    if path.is_absolute():
        return [path]
    return [Path(cwd) / path, path] if cwd else [path]


def _read(source: str, cwd: str | None) -> tuple[bytes, str]:
    """The bytes of ``source``: a file, or a member of an archive (read with its archive checked)."""
    member = _MEMBER.match(source)
    if member is not None and not Path(source).exists():
        archive, name = member.groups()
        for path in _candidates(archive, cwd):
            if path.is_file():
                found = [s for s in expand([str(path)]) if s.name == f"{path}:{name}"]
                if found:
                    return found[0].read(), found[0].name
                raise UserError(f"{source}: the archive {path} no longer holds {name}")
    for path in _candidates(source, cwd):
        if path.exists():
            return read_graph_file(path), str(path)
    where = f" (the run started in {cwd})" if cwd else " (run.json records no starting folder: run repro there)"
    raise UserError(f"{source}: the run's graph file is gone{where}")


def _graph_shaped(data: bytes) -> bool:
    """The bytes are a hipDNN graph file that may still fail to load: one JSON object whose every top-level
    key is the format's (graph/load.py ``_TOP_KEYS``) and with its ``tensors`` and ``nodes`` lists. Any
    other JSON file (a credentials file, a config) is not copied into a bundle meant to be shared."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return (isinstance(doc, dict) and set(doc) <= GRAPH_KEYS and isinstance(doc.get("tensors"), list)
            and isinstance(doc.get("nodes"), list))


def graph_bytes(meta: Mapping[str, Any], row: Mapping[str, Any], *, allow_unknown: bool = False) -> GraphBytes:
    """The bytes ``row``'s graph was read from; UserError when gone or changed since the run."""
    source = str(row.get("source") or "")
    if not source:
        raise UserError(f"{row.get('graph')}: the run recorded no source for this graph")
    environment = meta.get("environment") if isinstance(meta.get("environment"), dict) else {}
    cwd = environment.get("cwd") if isinstance(environment.get("cwd"), str) else None
    data, origin = _read(source, cwd)
    want = row.get("graph_id") or None
    try:
        graph = load_bytes(data, origin, allow_unknown=allow_unknown)
    except UserError:
        if want:
            raise UserError(f"{origin}: no longer the graph the run read (it does not load now; the run's "
                            f"graph_id was {want})") from None
        if not _graph_shaped(data):   # a bundle is shared: only a graph file (a broken one too) goes in it
            raise UserError(f"{origin}: the row records no graph_id and the file is not a JSON graph file; "
                            "not copied into a bundle") from None
        return GraphBytes(data, origin, None, verified=False)
    if want and graph.graph_id != want:
        raise UserError(f"{origin}: no longer the graph the run read (graph_id {graph.graph_id}, the run's {want})")
    return GraphBytes(data, origin, graph, verified=bool(want))

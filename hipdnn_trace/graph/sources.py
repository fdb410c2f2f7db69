"""Where graphs come from: files, folders, globs and tarballs, mixed on one command line.

Everything is expanded up front into :class:`GraphSource` items (a name for
messages and a way to read the bytes), so a suite knows its size before it starts
and one unreadable item becomes one failed row, not a crash. Archives are read in
memory after every member has been checked: an archive with a member that would
land outside its folder (absolute path, ``..``, a link out) is refused whole.
"""

from __future__ import annotations

import glob
import os
import tarfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from hipdnn_trace.errors import GraphError, UserError
from hipdnn_trace.graph.load import MAX_FILE_BYTES, read_graph_file

ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2")
#: An archive unpacking to more than this (in JSON members) is treated as a bomb.
MAX_ARCHIVE_BYTES = 1024 * 1024 * 1024
MAX_ARCHIVE_MEMBERS = 100_000


@dataclass(frozen=True)
class GraphSource:
    """One graph to load: ``name`` is what messages and result rows show.

    ``read()`` returns the bytes, or raises GraphError (a UserError naming the
    source) when they cannot be had: too big, vanished, unreadable.
    """

    name: str
    read: Callable[[], bytes]
    path: Path | None = None          # the file on disk, when there is one


def is_archive(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def _file_source(path: Path) -> GraphSource:
    return GraphSource(str(path), lambda: read_graph_file(path), path)


def _too_big(name: str, size: int) -> Callable[[], bytes]:
    def read() -> bytes:
        raise GraphError(name, "", f"member is {size} bytes; graphs over {MAX_FILE_BYTES} are refused")
    return read


def _json_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.json") if p.is_file() and not _is_bundle_sidecar(p))


def _is_bundle_sidecar(path: Path) -> bool:
    """Result files a run writes beside graphs are not graphs."""
    return path.name in {"run.json", "summary.json"}


def check_archive_members(path: Path, members: Iterable[tarfile.TarInfo]) -> list[tarfile.TarInfo]:
    """All members, or UserError naming the first one that would escape the folder."""
    checked = []
    total = 0
    for m in members:
        name = m.name
        pure = PurePosixPath(name)
        if name.startswith(("/", "\\")) or pure.is_absolute() or (len(name) > 1 and name[1] == ":"):
            raise UserError(f"{path}: refused: member {name!r} has an absolute path")
        if ".." in pure.parts:
            raise UserError(f"{path}: refused: member {name!r} climbs out with '..'")
        if m.issym() or m.islnk():
            target = PurePosixPath(m.linkname)
            base = pure.parent if m.issym() else PurePosixPath()
            if target.is_absolute() or _escapes(base / target):
                raise UserError(f"{path}: refused: member {name!r} links out of the archive "
                                f"(to {m.linkname!r})")
        elif not (m.isfile() or m.isdir()):
            raise UserError(f"{path}: refused: member {name!r} is a device, fifo or other special file")
        if m.isfile():
            total += m.size
        checked.append(m)
        if len(checked) > MAX_ARCHIVE_MEMBERS:
            raise UserError(f"{path}: refused: more than {MAX_ARCHIVE_MEMBERS} members")
        if total > MAX_ARCHIVE_BYTES:
            raise UserError(f"{path}: refused: unpacks to more than {MAX_ARCHIVE_BYTES} bytes")
    return checked


def _escapes(p: PurePosixPath) -> bool:
    depth = 0
    for part in p.parts:
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in ("", "."):
            depth += 1
    return False


def archive_sources(path: Path) -> list[GraphSource]:
    """The JSON graphs inside a tarball, read into memory (nothing is extracted)."""
    try:
        with tarfile.open(path, "r:*") as tar:
            members = check_archive_members(path, tar)
            blobs: list[tuple[str, Callable[[], bytes]]] = []
            for m in members:
                if m.isfile() and m.name.endswith(".json") and not _is_bundle_sidecar(Path(m.name)):
                    if m.size > MAX_FILE_BYTES:   # refused from its header, never read
                        blobs.append((m.name, _too_big(f"{path}:{m.name}", m.size)))
                        continue
                    fh = tar.extractfile(m)
                    data = fh.read() if fh is not None else b""
                    blobs.append((m.name, (lambda d=data: d)))
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise UserError(f"{path}: not a readable tar archive ({exc})") from None
    return [GraphSource(f"{path}:{name}", read) for name, read in sorted(blobs, key=lambda b: b[0])]


def expand(args: Iterable[str], *, skip_dirs: Iterable[str] = ()) -> list[GraphSource]:
    """Command-line arguments -> graph sources, in order, without duplicates.

    A missing path or a glob matching nothing is a UserError: a typo should not
    silently shrink a suite. ``skip_dirs`` names sub-folders that folder recursion
    passes over (e.g. ``perf`` for CPU runs); naming such a folder directly still
    includes it.
    """
    return expand_counting_skipped(args, skip_dirs=skip_dirs)[0]


def expand_counting_skipped(args: Iterable[str], *,
                            skip_dirs: Iterable[str] = ()) -> tuple[list[GraphSource], int]:
    """:func:`expand`, and how many more graphs there would be without ``skip_dirs``
    (for a note saying what was left out), in one pass over the files and archives."""
    skip = frozenset(skip_dirs)
    out: list[GraphSource] = []
    kept: set[str] = set()
    found: set[str] = set()

    def add(src: GraphSource, skipped: bool) -> None:
        key = str(src.path.resolve()) if src.path else src.name
        found.add(key)
        if not skipped and key not in kept:
            kept.add(key)
            out.append(src)

    for arg in args:
        path = Path(arg)
        if any(ch in arg for ch in "*?[") and not path.exists():
            matches = sorted(glob.glob(arg, recursive=True))
            if not matches:
                raise UserError(f"{arg}: glob matches no files")
            for m in matches:
                for src, skipped in _expand_path(Path(m), skip):
                    add(src, skipped)
            continue
        if not path.exists():
            raise UserError(f"{arg}: no such file or folder")
        for src, skipped in _expand_path(path, skip):
            add(src, skipped)
    return out, len(found) - len(kept)


def _skipped(path: Path, root: Path, skip: frozenset[str]) -> bool:
    return bool(skip) and any(part in skip for part in path.relative_to(root).parts[:-1])


def _expand_path(path: Path, skip: frozenset[str]) -> list[tuple[GraphSource, bool]]:
    """The graphs under ``path``, each with whether it sits in a skipped sub-folder."""
    if path.is_dir():
        files = _json_files(path)
        archives = sorted(p for p in path.rglob("*") if p.is_file() and is_archive(p))
        return ([(_file_source(f), _skipped(f, path, skip)) for f in files]
                + [(s, _skipped(a, path, skip)) for a in archives for s in archive_sources(a)])
    if is_archive(path):
        return [(s, False) for s in archive_sources(path)]
    if not os.access(path, os.R_OK):
        raise UserError(f"{path}: not readable")
    return [(_file_source(path), False)]

"""Where graphs come from: files, folders, globs and tarballs, mixed on one command line.

Everything is expanded up front into :class:`GraphSource` items (a name for
messages and a way to read the bytes), so a suite knows its size before it starts
and one unreadable item becomes one failed row, not a crash. Archives are read in
memory after every member has been checked: an archive with a member that would
land outside its folder (absolute path, ``..``, a link out) is refused whole, and
all archives of one command together may unpack to at most
:data:`MAX_TOTAL_ARCHIVE_BYTES`. Folders and ``**`` globs are walked following a
link to a folder only into a folder not walked yet, so link loops end.

A source's reader is a small picklable object, so an isolated child can be handed
the source and read it itself (a read that hangs then hangs the child, not the suite).
"""

from __future__ import annotations

import fnmatch
import glob
import os
import tarfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from lzma import LZMAError
from pathlib import Path, PurePosixPath

from hipdnn_trace import read_gate
from hipdnn_trace.errors import GraphError, UserError
from hipdnn_trace.graph import sweeps
from hipdnn_trace.graph.bundles import BundleRef, bundle_ref, case_ref, is_sidecar
from hipdnn_trace.graph.load import MAX_FILE_BYTES, read_graph_file

ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2")
#: An archive unpacking to more than this (in JSON members) is treated as a bomb.
MAX_ARCHIVE_BYTES = 1024 * 1024 * 1024
MAX_ARCHIVE_MEMBERS = 100_000
#: All archives of one command together may unpack to at most this: their graphs are held in
#: memory for the whole suite (a suite this big belongs in a folder, read one file at a time).
MAX_TOTAL_ARCHIVE_BYTES = 2 * 1024 * 1024 * 1024
#: Zero bytes an archive may hold after its end-of-archive marker (tar pads to its record size:
#: 10 KiB by default, 1 MiB with ``tar -b 2048``).
MAX_TRAILING_ZEROS = 16 * 1024 * 1024
#: The archive file itself (compressed or not) may be at most this big.
ARCHIVE = read_gate.Kind("graph archives", 2 * MAX_ARCHIVE_BYTES)
#: Folder entries one command may walk through (folders and ``**`` globs together).
MAX_WALK_ENTRIES = 1_000_000


@dataclass(frozen=True)
class GraphSource:
    """One graph to load: ``name`` is what messages and result rows show.

    ``read()`` returns the bytes, or raises GraphError (a UserError naming the
    source) when they cannot be had: too big, vanished, unreadable, not a regular file.
    """

    name: str
    read: Callable[[], bytes]
    path: Path | None = None          # the file on disk, when there is one
    bundle: BundleRef | None = None   # an integration-test bundle's golden tensors and meta (graph/bundles.py)


@dataclass(frozen=True)
class FileReader:
    """Reads a graph file when called (picklable: a child process can do the reading)."""

    path: Path

    def __call__(self) -> bytes:
        return read_graph_file(self.path)


@dataclass(frozen=True)
class MemberBytes:
    """An archive member's bytes, already read and checked with its archive."""

    data: bytes

    def __call__(self) -> bytes:
        return self.data


@dataclass(frozen=True)
class Refusal:
    """A source that could not be had (a broken or refused archive): reading it raises its error."""

    name: str
    problem: str

    def __call__(self) -> bytes:
        raise GraphError(self.name, "", self.problem)

    @classmethod
    def of(cls, exc: GraphError, case: str = "") -> Refusal:
        """The refusal an error raised while finding a source becomes: its file, field and problem."""
        where = f"{exc.path}{case}: " if exc.path or case else ""
        return cls(exc.source, f"{where}{exc.problem}")


class ArchiveBudgetError(GraphError):
    """The command's archives together would unpack to more than the budget."""


class ArchiveBudget:
    """Bytes the archives of one command may still unpack to (see MAX_TOTAL_ARCHIVE_BYTES)."""

    def __init__(self, total: int | None = None) -> None:
        self.total = MAX_TOTAL_ARCHIVE_BYTES if total is None else total
        self.used = 0

    def check(self, path: Path, unpacked: int) -> None:
        if self.used + unpacked > self.total:
            raise ArchiveBudgetError(
                str(path), "", f"refused: the archives of this command would unpack to more than "
                f"{self.total} bytes in all ({self.used} from earlier archives, over {unpacked} from this one); "
                "run the archives in separate commands or unpack them into a folder")


def is_archive(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def _file_source(path: Path) -> GraphSource:
    """A graph file; an upstream bundle's graph carries its bundle (a bad meta: an error row)."""
    try:
        ref = bundle_ref(path)
    except GraphError as exc:
        return GraphSource(str(path), Refusal.of(exc), path)
    return GraphSource(str(path), FileReader(path), path, ref)


def sweep_sources(folder: Path) -> list[GraphSource]:
    """One source per case of the template sweep in ``folder`` (graph/sweeps.py), named
    ``.../sweep.json#<case id>``; a case that cannot be expanded is its own error source, a sweep that
    cannot be read one error source."""
    sweep = folder / sweeps.SWEEP_FILE
    try:
        cases = sweeps.read_sweep(folder)
    except GraphError as exc:
        return [GraphSource(str(sweep), Refusal.of(exc))]
    out = []
    for case in cases:
        name = f"{sweep}#{case.case_id}"
        if case.problem is not None:
            out.append(GraphSource(name, Refusal.of(case.problem, f" (case {case.case_id})")))
            continue
        try:
            ref = case_ref(name, case.golden_dir, case.dvc, case.metadata, folder / "support.json", case.case_id)
        except GraphError as exc:
            out.append(GraphSource(name, Refusal.of(exc, f" (case {case.case_id})")))
            continue
        out.append(GraphSource(name, MemberBytes(case.graph), None, ref))
    return out


def _too_big(name: str, size: int) -> Refusal:
    return Refusal(name, f"member is {size} bytes; graphs over {MAX_FILE_BYTES} are refused")


def _is_bundle_sidecar(path: Path) -> bool:
    """Result files a run writes beside graphs, bundle meta / support files and sweep files
    (expanded per folder) are not graphs."""
    return path.name in {"run.json", "summary.json"} or is_sidecar(path) or sweeps.is_sweep_file(path)


class _Walker:
    """Walks folders for one command: a link to a folder is followed only into a real folder
    (device, inode) this walk has not been in yet, so link loops end; at most MAX_WALK_ENTRIES
    entries in all, so a mistaken ``/`` ends too."""

    def __init__(self) -> None:
        self.entries = 0

    def walk(self, root: Path) -> Iterator[tuple[Path, bool]]:
        """(path, is a folder) for everything under ``root``, ``root`` itself excluded."""
        try:
            info = os.stat(root)
        except OSError:
            return
        seen = {(info.st_dev, info.st_ino)}
        stack = [root]
        while stack:
            folder = stack.pop()
            try:
                with os.scandir(folder) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError:   # unreadable or vanished: nothing to find there
                continue
            for entry in entries:
                self.entries += 1
                if self.entries > MAX_WALK_ENTRIES:
                    raise UserError(f"{root}: more than {MAX_WALK_ENTRIES} files and folders to search; "
                                    "name a smaller folder")
                path = folder / entry.name
                try:
                    is_dir = entry.is_dir()
                    info = entry.stat() if is_dir else None
                except OSError:   # a dangling link, a file gone meanwhile
                    continue
                if info is not None:
                    key = (info.st_dev, info.st_ino)
                    if key in seen:   # a link back into a folder already walked: a loop ends here
                        continue
                    seen.add(key)
                    stack.append(path)
                yield path, is_dir

    def files(self, root: Path) -> list[Path]:
        """Everything under ``root`` that is not a folder, sorted: a FIFO, a device or a dangling link
        with a graph's name is kept, so loading it gives its error row instead of a suite one graph
        short without a word."""
        return sorted(p for p, is_dir in self.walk(root) if not is_dir)

    def glob(self, pattern: str) -> list[str]:
        """``glob.glob(pattern, recursive=True)``, with ``**`` walked by :meth:`walk` (no loops)."""
        parts = Path(pattern).parts
        if "**" not in parts:
            return sorted(glob.glob(pattern))
        k = parts.index("**")
        prefix = str(Path(*parts[:k])) if k else "."
        bases = sorted(glob.glob(prefix)) if glob.has_magic(prefix) else [prefix]
        out: list[str] = []
        for base in bases:
            if not os.path.isdir(base):
                continue
            root = Path(base)
            if _match((), parts[k:]):
                out.append(base)
            for path, _ in self.walk(root):
                if _match(path.relative_to(root).parts, parts[k:]):
                    out.append(str(path))
        return sorted(dict.fromkeys(out))


def _match(names: tuple[str, ...], patterns: tuple[str, ...]) -> bool:
    """Path components against glob components, ``**`` matching any number of them (like glob:
    wildcards and ``**`` do not match names starting with a dot)."""
    if not patterns:
        return not names
    head, rest = patterns[0], patterns[1:]
    if head == "**":
        for i in range(len(names) + 1):
            if i and names[i - 1].startswith("."):
                return False
            if _match(names[i:], rest):
                return True
        return False
    if not names:
        return False
    name = names[0]
    if glob.has_magic(head) and name.startswith(".") and not head.startswith("."):
        return False
    return fnmatch.fnmatchcase(name, head) and _match(names[1:], rest)


def check_archive_members(path: Path, members: Iterable[tarfile.TarInfo],
                          budget: ArchiveBudget | None = None) -> list[tarfile.TarInfo]:
    """All members, or GraphError naming the first one that would escape the folder (or the
    size that makes the archive a bomb, or pass the command's ``budget``), from the headers alone."""
    checked = []
    total = 0
    for m in members:
        name = m.name
        pure = PurePosixPath(name)
        if name.startswith(("/", "\\")) or pure.is_absolute() or (len(name) > 1 and name[1] == ":"):
            raise GraphError(str(path), "", f"refused: member {name!r} has an absolute path")
        if ".." in pure.parts:
            raise GraphError(str(path), "", f"refused: member {name!r} climbs out with '..'")
        if m.issym() or m.islnk():
            target = PurePosixPath(m.linkname)
            base = pure.parent if m.issym() else PurePosixPath()
            if target.is_absolute() or _escapes(base / target):
                raise GraphError(str(path), "", f"refused: member {name!r} links out of the archive "
                                 f"(to {m.linkname!r})")
        elif not (m.isfile() or m.isdir()):
            raise GraphError(str(path), "", f"refused: member {name!r} is a device, fifo or other special file")
        if m.isfile():
            total += m.size
        checked.append(m)
        if len(checked) > MAX_ARCHIVE_MEMBERS:
            raise GraphError(str(path), "", f"refused: more than {MAX_ARCHIVE_MEMBERS} members")
        if total > MAX_ARCHIVE_BYTES:
            raise GraphError(str(path), "", f"refused: unpacks to more than {MAX_ARCHIVE_BYTES} bytes")
        if budget is not None:   # checked as the headers come: a late archive costs no decompression
            budget.check(path, total)
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


def _check_archive_end(path: Path, tar: tarfile.TarFile) -> None:
    """GraphError unless the members end at the end-of-archive marker (two zero blocks) followed by
    zeros only. tarfile stops at the first header it cannot read and at the end of the data, as if
    the archive ended there: a corrupt second header or an archive cut at a block boundary would
    otherwise run as a smaller suite. Reading to the end also makes a compressed stream check its
    own trailer (gzip's CRC and length)."""
    stream = tar.fileobj
    assert stream is not None
    stream.seek(tar.offset)
    marker = stream.read(2 * tarfile.BLOCKSIZE)
    if len(marker) < 2 * tarfile.BLOCKSIZE or marker.count(0) != len(marker):
        what = "ends without the end-of-archive marker (cut short?)" if not marker.strip(b"\0") else \
            "has a damaged header"
        raise GraphError(str(path), "", f"refused: the archive {what} at byte {tar.offset} after "
                         f"{len(tar.getmembers())} member(s); later members would be lost")
    seen = 0
    while chunk := stream.read(1 << 20):
        seen += len(chunk)
        if chunk.count(0) != len(chunk):
            raise GraphError(str(path), "", f"refused: data after the end-of-archive marker at byte {tar.offset} "
                             "(concatenated archives?); its members would be lost")
        if seen > MAX_TRAILING_ZEROS:
            raise GraphError(str(path), "", f"refused: more than {MAX_TRAILING_ZEROS} bytes after the "
                             "end-of-archive marker")


def archive_sources(path: Path, budget: ArchiveBudget | None = None) -> list[GraphSource]:
    """The JSON graphs inside a tarball, read into memory (nothing is extracted).

    GraphError (a UserError) naming the archive when it is not a regular file, not a
    readable tarball, unsafe, a bomb or beyond ``budget``; ``budget`` is charged with what
    the archive unpacks to.
    """
    name = str(path)
    try:
        with read_gate.open_file(path, ARCHIVE) as fh, tarfile.open(name, "r:*", fileobj=fh) as tar:
            members = check_archive_members(path, tar, budget)
            blobs: list[tuple[str, Callable[[], bytes]]] = []
            for m in members:
                if m.isfile() and m.name.endswith(".json") and not _is_bundle_sidecar(Path(m.name)):
                    if m.size > MAX_FILE_BYTES:   # refused from its header, never read
                        blobs.append((m.name, _too_big(f"{path}:{m.name}", m.size)))
                        continue
                    member = tar.extractfile(m)
                    blobs.append((m.name, MemberBytes(member.read() if member is not None else b"")))
            _check_archive_end(path, tar)
    except read_gate.ReadRefused as exc:
        raise GraphError(name, "", exc.problem) from None
    except (tarfile.TarError, OSError, EOFError, zlib.error, LZMAError) as exc:
        raise GraphError(name, "", f"not a readable tar archive ({exc})") from None
    if budget is not None:
        budget.used += sum(m.size for m in members if m.isfile())
    return [GraphSource(f"{path}:{member}", read) for member, read in sorted(blobs, key=lambda b: b[0])]


def expand(args: Iterable[str], *, skip_dirs: Iterable[str] = ()) -> list[GraphSource]:
    """Command-line arguments -> graph sources, in order, without duplicates.

    A missing path or a glob matching nothing is a UserError: a typo should not
    silently shrink a suite. ``skip_dirs`` names sub-folders that folder recursion
    passes over (e.g. ``perf`` for CPU runs); naming such a folder directly still
    includes it.
    """
    return expand_counting_skipped(args, skip_dirs=skip_dirs)[0]


def glob_matches(pattern: str) -> list[str]:
    """What a glob argument of ``run`` matches (``**`` walked without following link loops)."""
    return _Walker().glob(pattern)


def expand_counting_skipped(args: Iterable[str], *,
                            skip_dirs: Iterable[str] = ()) -> tuple[list[GraphSource], int]:
    """:func:`expand`, and how many more graphs there would be without ``skip_dirs``
    (for a note saying what was left out), in one pass over the files and archives.

    An archive named on the command line that is broken or unsafe stops the command (a
    UserError); one found in a folder or by a glob, or one past the command's archive
    budget, is one source whose reading raises that error (an error row), and the rest run.
    """
    expansion = _Expansion(frozenset(skip_dirs))
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
            matches = expansion.walker.glob(arg)
            if not matches:
                raise UserError(f"{arg}: glob matches no files")
            for m in matches:
                for src, skipped in expansion.path(Path(m), named=False):
                    add(src, skipped)
            continue
        if not path.exists():
            raise UserError(f"{arg}: no such file or folder")
        for src, skipped in expansion.path(path, named=True):
            add(src, skipped)
    return out, len(found) - len(kept)


class _Expansion:
    """The state of expanding one command's arguments: the folder walker and the archive budget."""

    def __init__(self, skip: frozenset[str]) -> None:
        self.skip = skip
        self.walker = _Walker()
        self.budget = ArchiveBudget()

    def _skipped(self, path: Path, root: Path) -> bool:
        return bool(self.skip) and any(part in self.skip for part in path.relative_to(root).parts[:-1])

    def archive(self, path: Path, *, named: bool) -> list[GraphSource]:
        try:
            return archive_sources(path, self.budget)
        except GraphError as exc:
            if named and not isinstance(exc, ArchiveBudgetError):
                raise   # the user named this archive: a broken one stops the command
            return [GraphSource(exc.source, Refusal(exc.source, exc.problem))]

    def path(self, path: Path, *, named: bool) -> list[tuple[GraphSource, bool]]:
        """The graphs under ``path``, each with whether it sits in a skipped sub-folder."""
        if path.is_dir():
            files = self.walker.files(path)
            graphs = [f for f in files if f.suffix == ".json" and not _is_bundle_sidecar(f)]
            archives = [f for f in files if is_archive(f)]
            swept = sorted({f.parent for f in files if sweeps.is_sweep_file(f)})
            return ([(_file_source(f), self._skipped(f, path)) for f in graphs]
                    + [(s, self._skipped(d / sweeps.SWEEP_FILE, path)) for d in swept for s in sweep_sources(d)]
                    + [(s, self._skipped(a, path)) for a in archives for s in self.archive(a, named=False)])
        if sweeps.is_sweep_file(path):
            return [(s, False) for s in sweep_sources(path.parent)]
        if is_archive(path):
            return [(s, False) for s in self.archive(path, named=named)]
        if not os.access(path, os.R_OK):
            raise UserError(f"{path}: not readable")
        return [(_file_source(path), False)]

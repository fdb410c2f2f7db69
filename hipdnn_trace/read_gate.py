"""One gate for every file the tool reads: a regular file, within its kind's size budget, read
without a way to block or grow without end.

A path on a command line or in a run folder can be anything: ``/dev/zero`` (never ends: a
reader that trusts it grows until the OOM killer comes), a FIFO (an ``open`` blocks until a
writer comes, forever), a socket, a folder, or a regular file far bigger than any real one of
its kind. Every reader therefore asks this module, which refuses by the *target's* type (a
link to ``/dev/zero`` is a character device here) before anything is opened, opens with
``O_NONBLOCK`` (so even a path swapped for a FIFO after the check cannot block the open) and
checks the opened file's type again, refuses a size over the kind's budget from ``fstat``
before a byte is read, and reads at most one byte past the budget (a file growing meanwhile
is refused too). Each refusal is one :class:`ReadRefused` line (a UserError: exit 1) naming
the file and why.

Readers that hand a path to a library (polars, sqlite, ``np.load(mmap_mode=...)``) call
:func:`check` first: the same type and size rules, from ``stat``.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from hipdnn_trace.errors import UserError

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class Kind:
    """A kind of file the tool reads: what messages call it, and the most bytes one may hold."""

    what: str
    budget: int


#: the budgets: far above any real file of the kind, far below what would exhaust a node
GRAPH = Kind("graphs", 64 * MIB)
RECIPE = Kind("recipes", 1 * MIB)
RUN_JSON = Kind("run.json files", 256 * MIB)
TABLE_TEXT = Kind("run tables in CSV or JSON (summary, breakdown...)", 4 * GIB)
TABLE_PARQUET = Kind("run tables in Parquet", 16 * GIB)
DNB_RESULTS = Kind("dnn-benchmarking results files", 1 * GIB)
PROFILER_CAPTURE = Kind("profiler captures", 16 * GIB)
PROFILER_DATABASE = Kind("profiler databases", 256 * GIB)
PROFILE = Kind("counter profiles", 1 * MIB)
PEAKS = Kind("peaks files", 1 * MIB)
TRACE = Kind("traces", 64 * GIB)
CACHE_MANIFEST = Kind("reference-cache manifests", 1 * MIB)
CACHED_TENSOR = Kind("reference-cache tensors", 1 << 40)
GOLDEN_META = Kind("golden bundle metadata", 1 * MIB)
GOLDEN_TENSOR = Kind("golden tensors", 1 << 40)
CHECKSUMS = Kind("checksum manifests", 16 * MIB)
RATE_CACHE = Kind("float64 rate caches", 64 * KIB)


class ReadRefused(UserError):
    """A file the gate will not read: ``name`` (how messages call it) and ``problem``."""

    def __init__(self, name: str, problem: str) -> None:
        self.name = name
        self.problem = problem
        super().__init__(f"{name}: {problem}")


def special_file_kind(mode: int) -> str | None:
    """What a file that is not a regular file is ("a FIFO (named pipe)", ...); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, kind in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "a special file"


def _judge(info: os.stat_result, kind: Kind, name: str) -> None:
    special = special_file_kind(info.st_mode)
    if special:
        raise ReadRefused(name, f"not a regular file but {special}; only regular files are read as {kind.what}")
    if info.st_size > kind.budget:
        raise ReadRefused(name, f"file is {info.st_size} bytes; {kind.what} over {kind.budget} are refused")


def _cannot(name: str, exc: OSError) -> ReadRefused:
    return ReadRefused(name, f"cannot read: {exc.strerror or exc}")


def check(path: str | Path, kind: Kind, name: str | None = None) -> os.stat_result:
    """``path``'s stat (links followed) when it may be read as ``kind``, else ReadRefused.

    For readers that hand the path to a library; readers that read the bytes themselves use
    :func:`open_file` or :func:`read_bytes`, which also guard the open itself."""
    name = str(path) if name is None else name
    try:
        info = os.stat(path)
    except OSError as exc:
        raise _cannot(name, exc) from None
    _judge(info, kind, name)
    return info


@contextmanager
def open_file(path: str | Path, kind: Kind, name: str | None = None) -> Iterator[BinaryIO]:
    """The file opened for binary reading once it passed the gate."""
    name = str(path) if name is None else name
    check(path, kind, name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise _cannot(name, exc) from None
    with os.fdopen(fd, "rb") as fh:
        try:
            _judge(os.fstat(fd), kind, name)   # the path may have been swapped since the check
        except OSError as exc:
            raise _cannot(name, exc) from None
        yield fh   # type: ignore[misc]


def read_bytes(path: str | Path, kind: Kind, name: str | None = None) -> bytes:
    """All of a file's bytes, at most ``kind.budget`` of them (one more is a refusal)."""
    name = str(path) if name is None else name
    with open_file(path, kind, name) as fh:
        chunks, got = [], 0
        try:
            while got <= kind.budget:
                chunk = fh.read(min(kind.budget + 1 - got, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
        except OSError as exc:
            raise _cannot(name, exc) from None
    if got > kind.budget:   # it grew after the size check
        raise ReadRefused(name, f"file is over {kind.budget} bytes; {kind.what} over {kind.budget} are refused")
    return b"".join(chunks)


def read_text(path: str | Path, kind: Kind, name: str | None = None, *, errors: str = "strict") -> str:
    """A file's text (UTF-8); with ``errors="strict"`` undecodable bytes are a refusal."""
    name = str(path) if name is None else name
    data = read_bytes(path, kind, name)
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        raise ReadRefused(name, f"not UTF-8 text (byte {exc.start})") from None


def read_json(path: str | Path, kind: Kind, name: str | None = None) -> Any:
    """A JSON file's value; malformed JSON (or not UTF-8) is a refusal naming the place."""
    name = str(path) if name is None else name
    data = read_bytes(path, kind, name)
    try:
        return json.loads(data)
    except UnicodeDecodeError as exc:
        raise ReadRefused(name, f"not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ReadRefused(name, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:   # e.g. integers past Python's digit limit, deep nesting
        raise ReadRefused(name, f"not valid JSON ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") \
            from None

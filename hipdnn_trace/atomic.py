"""Atomic file writes: readers see the old file or the new one, never half of one.

A suite may be killed at any moment (SIGKILL included); every file we write goes to
a temp file in the same folder, is flushed to disk, then renamed over the target.
``mkstemp`` creates its file 0600 whatever the umask; the file gets the mode a plain
``open()`` would give (0666 minus the umask) before the rename, so a colleague can read
summary.csv as they can read the report.

A failed write (disk full, quota, read-only or failing file system) is raised as
an :class:`OSError` with the errno and the *target* path, whatever raised it: polars
reports an ENOSPC as an ``OSError`` without errno, or as a ``ComputeError`` whose
text ends in ``(os error 28)``. Callers can then say which file could not be written.

It sits at the package top, below every floor: graph/ writes graph files with it and
results/ writes run files, and graph must not import results.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO


def _default_mode() -> int:
    """0666 minus the process umask (read without changing it for long: os.umask is the only way)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def os_errno(exc: BaseException) -> int | None:
    """The errno behind ``exc``: its own, or the ``(os error N)`` a polars/Rust I/O error names."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return exc.errno
    found = _OS_ERROR.search(str(exc))
    return int(found.group(1)) if found else None


def _as_os_error(exc: BaseException, path: Path) -> OSError | None:
    """``exc`` as an OSError naming ``path`` when it is an I/O failure, else None (a bug: keep it)."""
    code = os_errno(exc)
    if code is None:
        return OSError(errno.EIO, str(exc) or "I/O error", str(path)) if isinstance(exc, OSError) else None
    return OSError(code, os.strerror(code), str(path))


def write_atomic(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Call ``write`` on a temp file beside ``path`` and rename it into place."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _as_os_error(exc, path) from exc   # type: ignore[misc]
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fchmod(fh.fileno(), _default_mode())
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        failure = _as_os_error(exc, path) if isinstance(exc, Exception) else None
        if failure is not None:
            raise failure from exc
        raise


def write_bytes_atomic(path: Path, data: bytes) -> None:
    write_atomic(path, lambda fh: fh.write(data))


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode())


def write_path_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Like :func:`write_atomic` for writers that want a path (e.g. a trace writer)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _as_os_error(exc, path) from exc   # type: ignore[misc]
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, _default_mode())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        failure = _as_os_error(exc, path) if isinstance(exc, Exception) else None
        if failure is not None:
            raise failure from exc
        raise

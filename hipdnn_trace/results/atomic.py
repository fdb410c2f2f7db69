"""Atomic file writes: readers see the old file or the new one, never half of one.

A suite may be killed at any moment (SIGKILL included); every file we write goes to
a temp file in the same folder, is flushed to disk, then renamed over the target.
``mkstemp`` creates its file 0600 whatever the umask; the file gets the mode a plain
``open()`` would give (0666 minus the umask) before the rename, so a colleague can read
summary.csv as they can read the report.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO


def _default_mode() -> int:
    """0666 minus the process umask (read without changing it for long: os.umask is the only way)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Call ``write`` on a temp file beside ``path`` and rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fchmod(fh.fileno(), _default_mode())
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_bytes_atomic(path: Path, data: bytes) -> None:
    write_atomic(path, lambda fh: fh.write(data))


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode())


def write_path_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Like :func:`write_atomic` for writers that want a path (e.g. a trace writer)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, _default_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

"""One writer per run folder: an advisory ``flock`` on ``DIR/.lock`` held for the writer's life.

Two ``run --resume DIR`` started together both read the same finished set and would both run
every remaining graph (the trace doubled); a ``merge --out DIR`` racing another merge would
write one folder twice. Every writer of a run folder takes this lock first, before it reads what
is already recorded, and a second one stops with ``DIR is in use by pid N``.

``flock`` locks belong to the open file: the kernel drops one when its process dies (a SIGKILL, a
power-off of a node's job), so a stale lock never blocks a resume; the pid in the file is only what
the message names. The file is removed on release; a writer that finds the file replaced after it
locked (another writer's release removed it in between) locks the new one, so two writers never
hold locks on two different files. Locks are per process and re-entrant: the code that reads the
finished set and the writer that appends to the folder share one.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

from hipdnn_trace.errors import UserError

LOCK_NAME = ".lock"

_P = ParamSpec("_P")
_R = TypeVar("_R")

#: real path of a locked folder -> the open lock file's descriptor (this process's locks)
_HELD: dict[str, int] = {}


class RunDirInUse(UserError):
    """Another process writes this run folder now."""


def _key(folder: Path) -> str:
    return os.path.realpath(folder)


def _holder(path: Path) -> str:
    with contextlib.suppress(OSError, ValueError):
        text = path.read_text().strip()
        if text:
            return f"pid {int(text)}"
    return "another process"


def _open_locked(folder: Path) -> int:
    """A descriptor of DIR/.lock holding the exclusive lock, or RunDirInUse."""
    path = folder / LOCK_NAME
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunDirInUse(f"{folder} is in use by {_holder(path)} (another run or merge writes it); "
                              "wait for it to finish") from None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)   # released and removed by its holder between our open and our lock: lock the new one


def lock_run_dir(folder: Path) -> None:
    """Hold ``folder``'s lock for this process (nothing to do when it holds it already).

    RunDirInUse when another process holds it; UserError when the lock file cannot be made
    (read-only or full storage, no such folder)."""
    key = _key(folder)
    if key in _HELD:
        return
    if not folder.is_dir():
        raise UserError(f"{folder}: not a folder (a run folder is a directory)")
    try:
        fd = _open_locked(folder)
    except RunDirInUse:
        raise
    except OSError as exc:
        raise UserError(f"{folder / LOCK_NAME}: cannot lock the run folder ({exc.strerror or exc})") from None
    with contextlib.suppress(OSError):   # only the message of a second writer needs it
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
    _HELD[key] = fd


def unlock_run_dir(folder: Path) -> None:
    """Release ``folder``'s lock if this process holds it, removing the lock file first."""
    fd = _HELD.pop(_key(folder), None)
    if fd is None:
        return
    with contextlib.suppress(OSError):
        os.unlink(folder / LOCK_NAME)
    os.close(fd)


def holds_lock(folder: Path) -> bool:
    return _key(folder) in _HELD


def releasing(command: Callable[_P, _R]) -> Callable[_P, _R]:
    """Release, when ``command`` returns or raises, every run-folder lock it took and still holds: a
    resume refused after it locked its folder leaves it free for the next one in a long-lived process
    (``hipdnn_trace.run()`` in a script); a writer's own finish releases its lock earlier."""

    @functools.wraps(command)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        before = set(_HELD)
        try:
            return command(*args, **kwargs)
        finally:
            for key in [k for k in _HELD if k not in before]:
                unlock_run_dir(Path(key))
    return wrapper

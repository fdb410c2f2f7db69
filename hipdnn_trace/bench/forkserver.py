"""A clean helper process that forks one child per job: fresh processes without paying imports each time.

Starting a new interpreter per graph costs seconds of imports (numpy, scipy, a
vendor library); forking the suite process itself is unsafe once it holds a GPU
context or runs threads (polars' pool). So the suite starts this server once: a
fresh interpreter that imports the modules it is told to (harness and backend
modules; importing them creates no device context) and then forks a child per
job. Children are grandchildren of the suite, each in its own session.

Unlike :mod:`multiprocessing`'s forkserver, it never re-imports the caller's
``__main__`` in the child, so a user script that calls ``hipdnn_trace.run`` without
an ``if __name__ == "__main__"`` guard is safe.

Protocol on a Unix socket pair, one job at a time: the suite sends an 8-byte
length (with the job's pipe fds attached, SCM_RIGHTS) and a pickled
``(sys_path, "module:function", payload)``; the server forks, replies with the
child's pid, reaps it and replies with its exit code (negative: killed by that
signal). The server exits when the suite closes the socket or dies (it asked the
kernel for SIGKILL on its parent's death, and so does every child).
"""

from __future__ import annotations

import ctypes
import importlib
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from hipdnn_trace.bench.cpu_share import pin_from_env

_LENGTH = struct.Struct("<Q")
#: the argument that asks a server to work out its own imports from a guessed run (``ForkServer.start_early``)
_RESOLVE = "--resolve"
_PR_SET_PDEATHSIG = 1


class ForkServerError(RuntimeError):
    """The server is gone (killed from outside); the caller restarts it."""


def die_with_parent() -> None:
    """Linux: have the kernel SIGKILL this process when its parent exits."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise EOFError
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _env_key(env: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((env or {}).items()))


class ForkServer:
    """The suite's side: start the server lazily, launch jobs, learn their exit codes."""

    #: servers started before the harness was imported (bench/early.py), by environment, until adopted
    _early: dict[tuple[tuple[str, str], ...], ForkServer] = {}

    @classmethod
    def start_early(cls, preload: Sequence[str], env: Mapping[str, str] | None,
                    resolve: Sequence[str] | None = None) -> ForkServer:
        """Start a server now, for the runner that will ask for this environment (``adopt``); with ``resolve``
        ("module:function" and its string arguments) the server works out what to import itself by calling it
        (``bench/early.py`` ``server_imports``), so this process need not import the backends to say."""
        server = cls(preload, env, resolve=resolve)
        server.start()
        cls._early[_env_key(env)] = server
        return server

    @classmethod
    def adopt(cls, env: Mapping[str, str] | None) -> ForkServer | None:
        """The server started early for this environment, if any (each is adopted once)."""
        return cls._early.pop(_env_key(env), None)

    @classmethod
    def discard_early(cls) -> None:
        """Kill the early servers no runner adopted (the plan chose otherwise)."""
        while cls._early:
            _, server = cls._early.popitem()
            if server._proc is not None:
                server._proc.kill()
            server.close()

    def __init__(self, preload: Sequence[str] = (), env: Mapping[str, str] | None = None, *,
                 resolve: Sequence[str] | None = None) -> None:
        self.preload = list(preload)
        self.env = dict(env or {})   # set in the server before it imports anything (e.g. a GPU's visibility)
        self.resolve = list(resolve) if resolve else None   # the first start only; a restart imports ``preload``
        self.started_at: float | None = None   # time.monotonic() of the last start (run.json: when it began)
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, **self.env}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        imports = [_RESOLVE, *self.resolve] if self.resolve else self.preload
        self.resolve = None
        self.started_at = time.monotonic()
        self._proc = subprocess.Popen(
            [sys.executable, "-c", "from hipdnn_trace.bench.forkserver import serve; serve()",
             str(theirs.fileno()), *imports],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=env, close_fds=True)
        theirs.close()
        self._sock = ours
        return ours

    def start(self) -> None:
        """Start the server now if it is not running (it imports its preload list meanwhile)."""
        if self._sock is None or self._proc is None or self._proc.poll() is not None:
            self.close()
            self._start()

    def launch(self, target: str, payload: bytes, fds: Sequence[int]) -> int:
        """Fork a child that calls ``target(payload, fds)``; returns its pid."""
        sock = self._sock
        if sock is None or self._proc is None or self._proc.poll() is not None:
            self.close()
            sock = self._start()
        message = pickle.dumps((list(sys.path), target, payload), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            socket.send_fds(sock, [_LENGTH.pack(len(message))], list(fds))
            sock.sendall(message)
            return int(_LENGTH.unpack(_recv_exact(sock, _LENGTH.size))[0])
        except (OSError, EOFError) as exc:
            self.close()
            raise ForkServerError(f"fork server failed: {exc or type(exc).__name__}") from None

    def fileno(self) -> int:
        """Readable when the running child's exit code has arrived (for select/wait)."""
        if self._sock is None:
            raise ForkServerError("fork server not started")
        return self._sock.fileno()

    def exit_code(self) -> int:
        """The running child's exit code (blocks until it exits)."""
        if self._sock is None:
            raise ForkServerError("fork server not started")
        try:
            return _LENGTH.unpack(_recv_exact(self._sock, _LENGTH.size))[0] - (1 << 32)
        except (OSError, EOFError):
            self.close()
            raise ForkServerError("fork server died while a child ran") from None

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve() -> None:
    """The server process: ``python -c ... serve() FD MODULE...``. When the suite closes the socket it
    leaves at once: an interpreter's orderly exit with torch imported took 0.5-0.9 s, which the suite
    waited for at the end of every run, and the server holds nothing to flush."""
    try:
        _serve()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def _serve() -> None:
    die_with_parent()
    pin_from_env()   # a --gpus worker's share of the cores, before any import sizes a thread pool
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the suite decides what an interrupt ends
    sock = socket.socket(fileno=int(sys.argv[1]))
    for name in _imports(sys.argv[2:]):
        try:
            importlib.import_module(name)
        except Exception:   # the child will import it again and report the error
            pass
    while True:
        try:
            header, fds, _, _ = socket.recv_fds(sock, _LENGTH.size, 16)
            if not header:
                return
            message = _recv_exact(sock, _LENGTH.unpack(header)[0])
        except (OSError, EOFError):
            return
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            sock.close()
            code = 1
            try:
                code = _child(message, fds, server)
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        try:
            sock.sendall(_LENGTH.pack(pid))
        except OSError:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        try:
            sock.sendall(_LENGTH.pack(os.waitstatus_to_exitcode(status) + (1 << 32)))
        except OSError:
            return


def _imports(args: Sequence[str]) -> list[str]:
    """The modules to import: as listed, or what a function names (``_RESOLVE``, "module:function" and its
    arguments: ``bench/early.py`` ``server_imports`` for a guessed run; nothing when it cannot say)."""
    if not args or args[0] != _RESOLVE or len(args) < 2:
        return list(args)
    module, _, function = args[1].partition(":")
    try:
        return list(getattr(importlib.import_module(module), function)(*args[2:]))
    except Exception:   # noqa: BLE001 - the child imports what it needs and reports what fails
        return []


def _child(message: bytes, fds: list[int], server: int) -> int:
    """In the forked child: own session, die with the server, run the target."""
    os.setsid()
    die_with_parent()
    if os.getppid() != server:   # the server died before prctl took effect
        return 1
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys_path, target, payload = pickle.loads(message)
    sys.path[:] = list(dict.fromkeys([*sys_path, *sys.path]))
    module_name, _, func = target.partition(":")
    result = getattr(importlib.import_module(module_name), func)(payload, fds)
    return int(result or 0)

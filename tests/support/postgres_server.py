"""A real PostgreSQL server for the store's tests: Debian's postgresql package (initdb, pg_ctl), a fresh
cluster in a temporary folder, listening on 127.0.0.1 only, stopped at the end. As root (CI) the server
runs as the ``postgres`` user the package creates (PostgreSQL refuses to run as root)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def binaries() -> Path | None:
    """The folder of initdb and pg_ctl (Debian keeps them out of PATH), or None."""
    found = shutil.which("initdb") or shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(versions[-1]).parent if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a throwaway server; yield its URL."""
    bin_dir = binaries()
    assert bin_dir is not None
    folder = Path(tempfile.mkdtemp(prefix="hipdnn-trace-pg-"))
    data = folder / "data"
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
        os.chmod(folder, 0o700)
    port = _free_port()
    run = lambda *argv: subprocess.run(_as_server_user([str(bin_dir / argv[0]), *argv[1:]]), check=True,
                                       capture_output=True, text=True, timeout=120)
    run("initdb", "-D", str(data), "-A", "trust", "-U", "postgres")
    run("pg_ctl", "-D", str(data), "-l", str(folder / "log"), "-w", "-o",
        f"-h 127.0.0.1 -p {port} -k {folder}", "start")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(_as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
                       capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)

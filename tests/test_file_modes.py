"""Run-directory files get the mode a plain open() gives (0666 minus the umask), not mkstemp's 0600."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hipdnn_trace.atomic import write_path_atomic, write_text_atomic


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_atomic_writes_respect_the_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        write_text_atomic(tmp_path / "summary.csv", "a,b\n")
        write_path_atomic(tmp_path / "trace.pftrace", lambda p: p.write_bytes(b"x"))
        (tmp_path / "plain.txt").write_text("x")
    finally:
        os.umask(old)
    want = stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode)
    assert want == 0o666 & ~umask
    for name in ("summary.csv", "trace.pftrace"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == want, name

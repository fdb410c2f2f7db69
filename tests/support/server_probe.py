"""A fork-server child that reports what its server had imported before it forked (tests/bench/test_early.py)."""

from __future__ import annotations

import os
import sys


def imported(payload: bytes, fds: list[int]) -> int:
    """Write the names in ``sys.modules`` (the server's imports: a forked child inherits them) to ``fds[0]``."""
    with os.fdopen(fds[0], "w") as out:
        out.write("\n".join(sorted(sys.modules)))
    return 0

"""Host memory this process may still allocate: the least of what the machine, its rlimits and
its cgroup allow.

``/proc/meminfo`` alone says what the machine has free; a job under Slurm or in a container is
stopped much earlier by its cgroup's limit (the OOM killer: SIGKILL, nothing recorded), and a
``ulimit -v`` turns allocations into MemoryError. Every source is optional: what cannot be
read does not count, and None means nothing could be read at all.
"""

from __future__ import annotations

import resource
from pathlib import Path

__all__ = ["available_memory_bytes"]

_CGROUP_MOUNT = "sys/fs/cgroup"


def available_memory_bytes(root: Path = Path("/")) -> int | None:
    """min(MemAvailable, RLIMIT_AS / RLIMIT_DATA soft limits less what is in use, cgroup v2
    ``memory.max - memory.current`` and v1 ``memory.limit_in_bytes - memory.usage_in_bytes`` of this
    process's cgroup and its ancestors). ``root`` is where ``proc/`` and ``sys/`` are (tests)."""
    found = [v for v in (_meminfo(root), *_rlimits(root), *_cgroups(root)) if v is not None]
    return max(0, min(found)) if found else None


def _meminfo(root: Path) -> int | None:
    for line in _read(root / "proc/meminfo").splitlines():
        if line.startswith("MemAvailable:"):
            return _int(line.split()[1], 1024)
    return None


def _status_kib(root: Path, field: str) -> int:
    """A ``/proc/self/status`` field in bytes (0 when unreadable: the limit itself then counts)."""
    for line in _read(root / "proc/self/status").splitlines():
        if line.startswith(field + ":"):
            return _int(line.split()[1], 1024) or 0
    return 0


def _rlimits(root: Path) -> list[int | None]:
    out: list[int | None] = []
    for limit, used in ((resource.RLIMIT_AS, "VmSize"), (resource.RLIMIT_DATA, "VmData")):
        soft, _ = resource.getrlimit(limit)
        out.append(None if soft == resource.RLIM_INFINITY else soft - _status_kib(root, used))
    return out


def _cgroups(root: Path) -> list[int | None]:
    """Headroom of every cgroup level that limits memory, v2 and v1."""
    out: list[int | None] = []
    mount = root / _CGROUP_MOUNT
    for line in _read(root / "proc/self/cgroup").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":   # v2: at the mount, or under unified/ (hybrid)
            for v2 in (mount, mount / "unified"):
                out.extend(_headroom(v2, path, "memory.max", "memory.current"))
        elif "memory" in controllers.split(","):
            out.extend(_headroom(mount / "memory", path, "memory.limit_in_bytes", "memory.usage_in_bytes"))
    return out


def _headroom(mount: Path, path: str, limit_file: str, usage_file: str) -> list[int | None]:
    """limit - usage at the cgroup ``path`` and each ancestor up to the mount. Inside a container the
    path names the host's hierarchy while the mount shows only ours: levels that do not exist are
    skipped, and the mount's own root is always looked at."""
    levels = [mount / p for p in _ancestors(path)]
    out: list[int | None] = []
    for folder in dict.fromkeys([*levels, mount]):
        limit = _read(folder / limit_file).strip()
        if not limit or limit == "max":
            continue
        cap, used = _int(limit), _int(_read(folder / usage_file).strip())
        if cap is not None and cap < 1 << 62:    # v1 writes "no limit" as a huge page-aligned number
            out.append(cap - (used or 0))
    return out


def _ancestors(path: str) -> list[str]:
    parts = [p for p in path.strip().split("/") if p]
    return ["/".join(parts[:i]) for i in range(len(parts), 0, -1)]


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return ""


def _int(text: str, scale: int = 1) -> int | None:
    try:
        return int(text) * scale
    except ValueError:
        return None

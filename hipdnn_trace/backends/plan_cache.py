"""Built execution plans kept on disk, so a rerun of a suite skips the heuristic query and the build.

A perf engineer reruns the same suite after every library change; building every plan again is most
of a warm GPU suite's set-up (issue 36: cuDNN's ``t_init`` 8.1 s of a 31.8 s run on an H200). A
backend that can serialize a built plan (cuDNN's frontend: ``pygraph.serialize()`` after a build,
``pygraph.deserialize(handle, data)`` to use it; NVIDIA/cudnn-frontend
``samples/python/02_sdpa_graph_serialization.ipynb`` and ``python/pygraph/pygraph.cpp``) stores the bytes
here under a key it gives: everything that changes what was built (the graph, the engine and knobs asked
for, the library and driver versions, the GPU, our own translation of the graph). A different value of
any of them is another key: a miss, never a stale plan.

An entry is one file, ``<key digest>.plan``: a magic line, one JSON header line (the key's fields, what
the backend wants back about the plan, the payload's length and SHA-256) and the payload. It is written
atomically (``atomic.write_bytes_atomic``) and read through the read gate. A hit is verified before it is
handed out: the header parses, its key equals the asked key field for field, the payload has its length
and SHA-256. Anything else (truncated, altered, another key under a colliding name, a planted FIFO) is
removed with a note and the caller builds the plan again: an entry is never trusted, and the cache never
fails a run. The folder is capped: after each store the least recently used entries (mtime, refreshed on
every hit) go until it fits.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hipdnn_trace import read_gate
from hipdnn_trace.atomic import write_bytes_atomic
from hipdnn_trace.errors import UserError

#: what ``--plan-cache auto`` (the default) means, under $XDG_CACHE_HOME (else ~/.cache)
AUTO_SUBDIR = Path("hipdnn-trace") / "plans"
#: ``--plan-cache-max`` default, in bytes (a cuDNN plan is kilobytes to a few megabytes)
DEFAULT_MAX_BYTES = 2 * 2**30
#: the RunOptions.extra key a backend finds the cache under (a PlanCache: picklable for children)
OPTION = "plan_cache"
#: the RunOptions.extra key that says --no-plan-cache (libraries with a cache of their own turn it off)
OFF_OPTION = "plan_cache_off"
#: where hipDNN keeps its own engine cache, under the plan cache's folder
HIPDNN_SUBDIR = "hipdnn"
MAGIC = b"hipdnn-trace plan cache 1\n"
SUFFIX = ".plan"
PLAN_ENTRY = read_gate.Kind("plan-cache entries", 1 << 30)


def auto_folder() -> Path:
    """The per-user folder: $XDG_CACHE_HOME/hipdnn-trace/plans, else ~/.cache/hipdnn-trace/plans."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / AUTO_SUBDIR


def hipdnn_cache_env(extra: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    """The variables that put hipDNN's own on-disk engine cache where the plan cache is, or turn it off.

    hipDNN resolves its cache root from ``HIPDNN_CACHE_DIR`` (else ``~/.cache/hipdnn/``) and skips it
    when ``HIPDNN_DISABLE_CACHE`` is truthy (ROCm/rocm-libraries projects/hipdnn data_sdk
    ``utilities/CacheRoot``; ROCm/dnn-benchmarking's ``--cache-dir`` sets the same variable). A value the
    user exported wins: what is returned only fills what is unset."""
    cache = extra.get(OPTION)
    wanted: dict[str, str] = {}
    if isinstance(cache, PlanCache):
        wanted["HIPDNN_CACHE_DIR"] = str(cache.folder / HIPDNN_SUBDIR)
    elif extra.get(OFF_OPTION):
        wanted["HIPDNN_DISABLE_CACHE"] = "1"
    if "HIPDNN_CACHE_DIR" in environ or "HIPDNN_DISABLE_CACHE" in environ:
        return {}
    return wanted


def key_digest(key: Mapping[str, Any]) -> str:
    """SHA-256 of the key's canonical JSON: the entry's file name."""
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class CachedPlan:
    """A verified entry: the serialized plan and what the backend stored beside it."""

    payload: bytes
    meta: dict[str, Any]


@dataclass(frozen=True)
class Lookup:
    """What a lookup found: the plan on a hit; on a miss ``note`` says why an entry was not used."""

    plan: CachedPlan | None
    note: str | None = None


@dataclass(frozen=True)
class PlanCache:
    """One cache folder and its size cap (picklable: isolated children and GPU workers get it)."""

    folder: Path
    max_bytes: int = DEFAULT_MAX_BYTES

    def path(self, key: Mapping[str, Any]) -> Path:
        return self.folder / f"{key_digest(key)}{SUFFIX}"

    def has(self, key: Mapping[str, Any]) -> bool:
        """Whether an entry is there (not read, not verified: only :meth:`get` says whether it is usable)."""
        return os.path.lexists(self.path(key))

    def get(self, key: Mapping[str, Any]) -> Lookup:
        """The verified plan for ``key``; a damaged or foreign entry is removed (the note says why)."""
        path = self.path(key)
        if not os.path.lexists(path):
            return Lookup(None)
        try:
            plan = _verified(read_gate.read_bytes(path, PLAN_ENTRY), key)
            os.utime(path)   # least recently used goes first when trimming
        except (UserError, OSError, ValueError) as exc:
            self.discard(key)
            return Lookup(None, f"plan-cache entry {path.name} not used ({exc}); built again")
        return Lookup(plan)

    def put(self, key: Mapping[str, Any], payload: bytes, meta: Mapping[str, Any]) -> str | None:
        """Store ``payload`` under ``key`` (atomically) and trim; a note when it was not stored."""
        if len(payload) > self.max_bytes:
            return f"plan not cached: {len(payload)} bytes exceed the cache's cap (--plan-cache-max)"
        header = {"key": dict(key), "meta": dict(meta), "bytes": len(payload),
                  "sha256": hashlib.sha256(payload).hexdigest()}
        line = json.dumps(header, sort_keys=True, default=str).encode()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(self.path(key), MAGIC + line + b"\n" + payload)
        except OSError as exc:
            return f"plan not cached in {self.folder}: {exc.strerror or exc}"
        self.trim(keep=self.path(key).name)
        return None

    def discard(self, key: Mapping[str, Any]) -> None:
        """Remove ``key``'s entry (whatever kind of file it is)."""
        try:
            os.unlink(self.path(key))
        except OSError:
            pass

    def trim(self, keep: str | None = None) -> None:
        """Remove least recently used entries until the folder fits ``max_bytes`` (``keep`` last)."""
        entries: list[tuple[float, int, Path]] = []
        try:
            children = [c for c in self.folder.iterdir() if c.name.endswith(SUFFIX)]
        except OSError:
            return
        for child in children:
            try:
                info = child.lstat()
            except OSError:
                continue   # another process removed it meanwhile
            entries.append((float("inf") if child.name == keep else info.st_mtime, info.st_size, child))
        total = sum(size for _, size, _ in entries)
        for _, size, child in sorted(entries, key=lambda e: e[0]):
            if total <= self.max_bytes:
                break
            try:
                os.unlink(child)
            except OSError:
                continue
            total -= size


def _verified(data: bytes, key: Mapping[str, Any]) -> CachedPlan:
    """The entry in ``data`` if it is whole and is ``key``'s; ValueError saying what is wrong."""
    if not data.startswith(MAGIC):
        raise ValueError("not a plan-cache entry of this format")
    end = data.find(b"\n", len(MAGIC))
    if end < 0:
        raise ValueError("its header is cut short")
    try:
        header = json.loads(data[len(MAGIC):end])
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"its header is not JSON ({exc.msg if hasattr(exc, 'msg') else exc})") from None
    if not isinstance(header, dict) or not isinstance(header.get("meta"), dict):
        raise ValueError("its header lacks the plan's description")
    if header.get("key") != json.loads(json.dumps(dict(key), sort_keys=True, default=str)):
        raise ValueError("it was stored for another key")
    payload = data[end + 1:]
    if len(payload) != header.get("bytes"):
        raise ValueError(f"it holds {len(payload)} bytes of plan, its header says {header.get('bytes')}")
    if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        raise ValueError("the plan does not match the checksum stored with it (altered or damaged)")
    return CachedPlan(payload, header["meta"])

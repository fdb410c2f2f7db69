"""Float64 reference outputs kept on disk, so reruns, A/B runs and shards compute each once.

The float64 reference of an LLM-sized graph is minutes of CPU (a llama3-70B prefill), and the
same (graph, seed) comes back on every rerun, on every A/B pair and on every shard of a sweep.
An entry is one folder per key holding ``<uid>.npy`` per output (float64) and ``entry.json``;
a hit maps the files (``np.load(mmap_mode="r")``): no copy, and pages the OS can drop.

The key is SHA-256 over the graph_id (its canonical JSON), the seed, the input recipe's version
(the source of the modules that make seeded inputs, and the generator's name and the digest of its
value tables, ``bench/counter_rng.py``), the reference's version (the source of
``backends/reference/**/*.py``) and numpy's version: a change to any of them misses. Inputs
from a golden bundle are not seeded and never use the cache.

Writers build an entry in a private temporary folder and rename it into place, so a reader sees a
whole entry or none, and two processes storing the same key leave one whole entry. An entry that
cannot be read (truncated, damaged header, wrong shape) is removed and computed again, with a
note; the cache never fails a run. Each ``.npy``'s SHA-256 is kept in ``entry.json`` and checked on
every hit before the file is mapped (one read of the file, ~1-2 GB/s), so an entry whose data was
altered with its header intact (zeroed, one element changed, all NaN) is never used as the truth:
it is removed and computed again like an unreadable one. Every file is read through the package's
read gate (``read_gate.py``): a FIFO or device planted as an entry is refused, never opened.
The folder is capped: after each store the least recently
used entries (by ``entry.json``'s mtime, refreshed on each hit) are removed until it fits.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import hipdnn_trace
from hipdnn_trace import read_gate
from hipdnn_trace.backends.reference.memory import cached_reference_bytes
from hipdnn_trace.bench.counter_rng import GENERATOR, tables_digest
from hipdnn_trace.checksums import file_sha256
from hipdnn_trace.errors import UserError
from hipdnn_trace.graph.model import Graph

#: ``--reference-cache-max`` default: the folder is trimmed to this many bytes after each store
DEFAULT_MAX_BYTES = 20 * 2**30
#: where ``--reference-cache auto`` keeps entries, under $XDG_CACHE_HOME (default ~/.cache)
AUTO_SUBDIR = Path("hipdnn-trace") / "reference"
#: a temporary folder older than this belongs to a writer that died: removed while trimming
STALE_TMP_S = 3600.0
_MANIFEST = "entry.json"
_FORMAT = 2   # 2: entry.json holds each .npy file's SHA-256
_PACKAGE = Path(hipdnn_trace.__file__).resolve().parent
#: modules whose source decides the seeded inputs (bench/inputs.py and what it draws with)
_INPUT_RECIPE = ("bench/inputs.py", "bench/counter_rng.py", "bench/attention_inputs.py", "bench/moe_inputs.py",
                 "graph/dtypes.py")


def auto_folder() -> Path:
    """The per-user cache folder: $XDG_CACHE_HOME/hipdnn-trace/reference, else ~/.cache/..."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / AUTO_SUBDIR


def _source_hash(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@functools.cache
def reference_version() -> str:
    """Hash of the reference implementation's source (every .py under backends/reference), once per process."""
    return _source_hash(list((_PACKAGE / "backends" / "reference").rglob("*.py")))


@functools.cache
def input_recipe_version() -> str:
    """Hash of the source of the modules that make seeded inputs, once per process."""
    return _source_hash([_PACKAGE / p for p in _INPUT_RECIPE])


def entry_key(graph: Graph, seed: int) -> str:
    parts = {"format": _FORMAT, "graph_id": graph.graph_id, "seed": seed, "inputs": input_recipe_version(),
             "generator": GENERATOR, "tables": tables_digest(),   # the tables' quantiles come from libm
             "reference": reference_version(), "numpy": np.__version__}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class ReferenceCache:
    """One cache folder and its size cap (picklable: isolated children get it with their settings)."""

    folder: Path
    max_bytes: int = DEFAULT_MAX_BYTES

    def has(self, graph: Graph, seed: int) -> bool:
        """An entry exists for (graph, seed) (not yet checked: :meth:`load` does that)."""
        return os.path.lexists(self.folder / entry_key(graph, seed) / _MANIFEST)   # a planted FIFO too: load removes it

    def load(self, graph: Graph, seed: int) -> tuple[dict[int, np.ndarray] | None, str | None]:
        """(outputs mapped read-only, None) on a hit; (None, None) on a miss; (None, note) when the
        entry was unreadable (it is removed, so the computed one replaces it)."""
        entry = self.folder / entry_key(graph, seed)
        manifest = entry / _MANIFEST
        if not os.path.lexists(manifest):   # a manifest that is no regular file is a damaged entry
            return None, None
        try:
            sums = _checksums(read_gate.read_json(manifest, read_gate.CACHE_MANIFEST))
            outputs = {}
            for t in graph.output_tensors:
                path = entry / f"{t.uid}.npy"
                if file_sha256(path, read_gate.CACHED_TENSOR) != sums.get(str(t.uid)):
                    raise ValueError(f"{t.uid}.npy does not match the checksum stored with it (altered or damaged)")
                array = np.load(path, mmap_mode="r", allow_pickle=False)
                if array.dtype != np.float64 or tuple(array.shape) != tuple(t.dims):
                    raise ValueError(f"{t.uid}.npy holds {array.dtype} {list(array.shape)}, "
                                     f"expected float64 {list(t.dims)}")
                outputs[t.uid] = array
            os.utime(manifest)          # least recently used goes first when trimming
        except (UserError, OSError, ValueError, EOFError) as exc:
            shutil.rmtree(entry, ignore_errors=True)
            return None, f"reference cache entry {entry} unreadable ({exc}); computed again"
        return outputs, None

    def store(self, graph: Graph, seed: int, outputs: dict[int, np.ndarray]) -> str | None:
        """Write the entry (atomically, as a whole) and trim the folder; a note when it was not stored."""
        size = cached_reference_bytes(graph)
        if size > self.max_bytes:
            return (f"reference not cached: {size / 2**30:.1f} GiB of outputs exceed the cache's "
                    f"{self.max_bytes / 2**30:.1f} GiB cap (--reference-cache-max)")
        key = entry_key(graph, seed)
        tmp: str | None = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=self.folder)
            sums = {str(t.uid): _write_npy(Path(tmp) / f"{t.uid}.npy", outputs[t.uid]) for t in graph.output_tensors}
            _write_json(Path(tmp) / _MANIFEST, {
                "format": _FORMAT, "graph_id": graph.graph_id, "graph": graph.label, "seed": seed,
                "input_recipe": input_recipe_version(), "generator": GENERATOR, "reference": reference_version(),
                "numpy": np.__version__, "outputs": [t.uid for t in graph.output_tensors], "bytes": size,
                "sha256": sums})
            tmp = None if _publish(Path(tmp), self.folder / key) else tmp
        except (OSError, UserError) as exc:
            return f"reference not cached in {self.folder}: {getattr(exc, 'strerror', None) or exc}"
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        self.trim(keep=key)
        return None

    def trim(self, keep: str | None = None) -> None:
        """Remove least recently used entries until the folder fits ``max_bytes`` (``keep`` last)."""
        entries: list[tuple[float, int, Path]] = []
        now = time.time()
        try:
            children = list(self.folder.iterdir())
        except OSError:
            return
        for child in children:
            try:
                if child.name.startswith(".tmp-"):
                    if now - child.stat().st_mtime > STALE_TMP_S:
                        shutil.rmtree(child, ignore_errors=True)
                    continue
                if not child.is_dir():
                    continue
                used = (child / _MANIFEST).stat().st_mtime if (child / _MANIFEST).exists() else 0.0
                size = sum(f.stat().st_size for f in child.iterdir())
            except OSError:
                continue        # another process removed it meanwhile
            entries.append((float("inf") if child.name == keep else used, size, child))
        total = sum(size for _, size, _ in entries)
        for _, size, child in sorted(entries, key=lambda e: e[0]):
            if total <= self.max_bytes:
                break
            shutil.rmtree(child, ignore_errors=True)
            total -= size


def _publish(tmp: Path, entry: Path) -> bool:
    """Rename the finished folder into place: True when it became the entry, False when another
    writer's whole entry was there first (ours is then dropped). A leftover without a manifest
    is removed and the rename tried once more."""
    for attempt in range(2):
        try:
            os.rename(tmp, entry)
            return True
        except OSError:
            if (entry / _MANIFEST).is_file():
                return False
            if attempt == 1 or not entry.exists():
                raise
            shutil.rmtree(entry, ignore_errors=True)
    return False


def _checksums(manifest: Any) -> dict[str, str]:
    """The manifest's SHA-256 per output file (by uid), or ValueError when it has none."""
    sums = manifest.get("sha256") if isinstance(manifest, dict) else None
    if not isinstance(sums, dict):
        raise ValueError(f"{_MANIFEST} holds no checksums")
    return sums


def _write_npy(path: Path, array: np.ndarray) -> str:
    """Write the array; its file's SHA-256 (read back from the page cache) for the manifest."""
    _write_synced(path, "wb", lambda fh: np.save(fh, np.asarray(array, dtype=np.float64), allow_pickle=False))
    return file_sha256(path, read_gate.CACHED_TENSOR)


def _write_json(path: Path, payload: dict) -> None:
    _write_synced(path, "w", lambda fh: json.dump(payload, fh, indent=1))


def _write_synced(path: Path, mode: str, write: Callable[[Any], object]) -> None:
    """Write through ``write`` and fsync: an entry is renamed into place only once it is on disk."""
    with open(path, mode) as fh:
        write(fh)
        fh.flush()
        os.fsync(fh.fileno())

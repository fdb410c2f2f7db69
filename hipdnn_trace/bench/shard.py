"""``--shard I/N``: a deterministic slice of a suite, so N machines can share a sweep.

Every node expands the same arguments and must pick disjoint slices whose union is
the suite, whatever order its file system lists files in. So a graph's shard
depends only on *what* it is, never on where it sits in the list: graphs are
ranked by their key (the graph_id, a hash of the canonical JSON; raw bytes for a
file that does not load) and rank ``r`` goes to shard ``r mod N``. Ranking
instead of hashing keeps shards within one graph of each other in size, and
identical graphs (same key, different files) land in the same shard, so ``merge``
can treat the same graph_id in two shards as a mistake.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from hipdnn_trace.errors import UserError
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.sources import GraphSource

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class ShardSpec:
    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> ShardSpec:
        """``"I/N"`` with 0 <= I < N; UserError otherwise."""
        m = _SPEC.match(text)
        if not m:
            raise UserError(f"--shard {text!r}: expected I/N, e.g. 0/4 (shards count from 0)")
        index, count = int(m[1]), int(m[2])
        if count < 1 or not 0 <= index < count:
            raise UserError(f"--shard {text!r}: need 0 <= I < N (shards of {count} are 0..{max(count - 1, 0)})")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class SourceKey:
    """What identifies a graph source across machines and runs."""

    name: str
    graph_id: str | None      # None: the file does not load (its error row has no graph_id)
    key: str                  # graph_id, or a hash of the bytes / of the name when unreadable


def source_key(source: GraphSource) -> SourceKey:
    try:
        data = source.read()
    except UserError:   # too big or unreadable: keyed by its name
        return SourceKey(source.name, None, "name:" + hashlib.sha256(source.name.encode()).hexdigest())
    try:
        graph_id = load_bytes(data, source.name, allow_unknown=True).graph_id
    except UserError:
        return SourceKey(source.name, None, "bytes:" + hashlib.sha256(data).hexdigest())
    return SourceKey(source.name, graph_id, graph_id)


def assign(keys: Sequence[str], count: int) -> list[int]:
    """The shard of each key: rank among the distinct keys (by their hash), mod ``count``."""
    def order(k: str) -> str:
        return hashlib.sha256(k.encode()).hexdigest()

    rank = {k: r for r, k in enumerate(sorted(set(keys), key=order))}
    return [rank[k] % count for k in keys]


def select(keys: Sequence[SourceKey], spec: ShardSpec) -> list[int]:
    """Positions (in the suite) of the graphs of shard ``spec``, in suite order."""
    shards = assign([k.key for k in keys], spec.count)
    return [i for i, s in enumerate(shards) if s == spec.index]

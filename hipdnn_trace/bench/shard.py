"""``--shard I/N``: a deterministic slice of a suite, so N machines can share a sweep.

Shards count from 1, like ``split -n l/K/N``: ``1/2`` is the first half, ``2/2``
the second. ``--shard auto`` takes I and N from the scheduler's environment (a
Slurm array task, or an srun task), so one batch script serves every task.

Every node expands the same arguments and must pick disjoint slices whose union is
the suite, whatever order its file system lists files in. So a graph's shard
depends only on *what* it is, never on where it sits in the list: graphs are
ranked by their key (the graph_id, a hash of the canonical JSON; raw bytes for a
file that does not load) and rank ``r`` goes to shard ``(r mod N) + 1``. Ranking
instead of hashing keeps shards within one graph of each other in size, and
identical graphs (same key, different files) land in the same shard, so ``merge``
can treat the same graph_id in two shards as a mistake.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hipdnn_trace.errors import UserError
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.sources import GraphSource

_SPEC = re.compile(r"^\s*(-?\d+)\s*/\s*(-?\d+)\s*$")

#: Slurm job array: the task's id, and how many tasks; MIN/MAX/STEP map ids to 1..N.
ARRAY_VARIABLES = ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN",
                   "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_STEP")
#: srun: the task's rank and the number of tasks of the step.
SRUN_VARIABLES = ("SLURM_PROCID", "SLURM_NTASKS")


@dataclass(frozen=True)
class ShardSpec:
    """Shard ``index`` (1-based) of ``count``; ``variables``: the environment it came from (auto)."""

    index: int
    count: int
    variables: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @classmethod
    def parse(cls, text: str, environ: Mapping[str, str] | None = None) -> ShardSpec:
        """``"I/N"`` with 1 <= I <= N, or ``"auto"`` (from ``environ``); UserError otherwise."""
        if text.strip() == "auto":
            return from_environment(os.environ if environ is None else environ)
        m = _SPEC.match(text)
        if not m:
            raise UserError(f"--shard {text!r}: expected I/N (1 <= I <= N, e.g. 1/4) or auto")
        index, count = int(m[1]), int(m[2])
        if count < 1:
            raise UserError(f"--shard {text!r}: N must be at least 1")
        if index == 0:
            raise UserError(f"--shard {text!r}: shards count from 1: use 1/{count} .. {count}/{count}")
        if not 1 <= index <= count:
            raise UserError(f"--shard {text!r}: need 1 <= I <= N (shards of {count} are 1/{count} .. {count}/{count})")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def _integer(environ: Mapping[str, str], name: str) -> int | None:
    value = environ.get(name)
    if value is None or not value.strip():
        return None
    try:
        return int(value)
    except ValueError:
        raise UserError(f"--shard auto: ${name} is {value!r}, not an integer") from None


def from_environment(environ: Mapping[str, str]) -> ShardSpec:
    """The shard of this Slurm array task (or srun task), numbered 1..N.

    Array task ids run from the array's first index (``--array=0-3`` gives 0..3,
    ``--array=1-8:2`` gives 1, 3, 5, 7), so the shard is the id's position in
    ``MIN..MAX`` by ``STEP``. An array that is not such a range (``--array=1,4,9``,
    or a few tasks of a sweep submitted again) cannot be mapped and is refused:
    give those tasks ``--shard I/N`` explicitly.
    """
    if environ.get("SLURM_ARRAY_TASK_ID") is not None:
        task, count = _integer(environ, "SLURM_ARRAY_TASK_ID"), _integer(environ, "SLURM_ARRAY_TASK_COUNT")
        if task is None or count is None:
            raise UserError("--shard auto: $SLURM_ARRAY_TASK_ID is set but $SLURM_ARRAY_TASK_COUNT is not")
        low = _integer(environ, "SLURM_ARRAY_TASK_MIN")
        high = _integer(environ, "SLURM_ARRAY_TASK_MAX")
        step = _integer(environ, "SLURM_ARRAY_TASK_STEP") or 1
        low = 0 if low is None else low
        high = low + (count - 1) * step if high is None else high
        used = tuple((name, environ[name]) for name in ARRAY_VARIABLES if environ.get(name) is not None)
        if count < 1 or step < 1 or (high - low) % step or (high - low) // step + 1 != count:
            raise UserError(f"--shard auto: the array's task ids ({', '.join(f'{k}={v}' for k, v in used)}) are "
                            f"not one range MIN..MAX by STEP; give these tasks --shard I/N")
        if not low <= task <= high or (task - low) % step:
            raise UserError(f"--shard auto: $SLURM_ARRAY_TASK_ID={task} is not one of the array's ids "
                            f"{low}..{high} by {step}")
        return ShardSpec((task - low) // step + 1, count, used)
    rank, tasks = _integer(environ, "SLURM_PROCID"), _integer(environ, "SLURM_NTASKS")
    if rank is not None and tasks is not None:
        if tasks < 1 or not 0 <= rank < tasks:
            raise UserError(f"--shard auto: $SLURM_PROCID={rank} is not a rank of $SLURM_NTASKS={tasks}")
        return ShardSpec(rank + 1, tasks, tuple((name, environ[name]) for name in SRUN_VARIABLES))
    raise UserError("--shard auto: not in a Slurm job array or srun step (none of SLURM_ARRAY_TASK_ID/"
                    "SLURM_ARRAY_TASK_COUNT or SLURM_PROCID/SLURM_NTASKS is set); give --shard I/N")


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
    """The shard (1..count) of each key: rank among the distinct keys (by their hash), mod ``count``, + 1."""
    def order(k: str) -> str:
        return hashlib.sha256(k.encode()).hexdigest()

    rank = {k: r for r, k in enumerate(sorted(set(keys), key=order))}
    return [rank[k] % count + 1 for k in keys]


def select(keys: Sequence[SourceKey], spec: ShardSpec) -> list[int]:
    """Positions (in the suite) of the graphs of shard ``spec``, in suite order."""
    shards = assign([k.key for k in keys], spec.count)
    return [i for i, s in enumerate(shards) if s == spec.index]

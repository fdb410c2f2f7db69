"""Each ``--gpus`` worker's share of the host's cores: its own CPUs and thread counts.

Host stages (inputs, the reference, validation) run numpy, BLAS and torch thread pools that each
size themselves to every core of the machine. Two workers doing so on one host oversubscribe it:
on two H200s the same graphs took 30-41% longer per stage under two workers than under one. A
worker therefore gets a disjoint slice of the cores the run may use, pinned before its fork
server imports anything, with every thread pool sized to that slice.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

#: set in a worker's fork server environment: the CPUs it pins itself to before any import
CPUS_VARIABLE = "HIPDNN_TRACE_CPUS"
#: the thread-pool sizes a library reads from its environment at import
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def usable_cores() -> list[int]:
    """The CPUs this process may run on (its affinity mask, which a cgroup or taskset narrows)."""
    return sorted(os.sched_getaffinity(0))


#: where Linux describes each CPU's place: its package (socket) and physical core
SYSFS_CPUS = Path("/sys/devices/system/cpu")


def physical_cores(cores: Sequence[int], sysfs: Path = SYSFS_CPUS) -> list[list[int]]:
    """``cores`` grouped by physical core (SMT siblings together), in (socket, core) order; each CPU
    its own group where sysfs does not say. Linux often numbers siblings N apart (0 and 16), so
    splitting CPU numbers in halves would put both workers on every physical core."""
    groups: dict[tuple[int, int, int], list[int]] = {}
    for cpu in sorted(cores):
        topology = sysfs / f"cpu{cpu}" / "topology"
        try:
            key = (int((topology / "physical_package_id").read_text()), int((topology / "core_id").read_text()), -1)
        except (OSError, ValueError):
            key = (1 << 30, cpu, cpu)     # unknown: a group of its own, after the known ones
        groups.setdefault(key, []).append(cpu)
    return [groups[k] for k in sorted(groups)]


def split_cores(cores: Sequence[int], workers: int, sysfs: Path = SYSFS_CPUS) -> list[list[int]]:
    """``cores`` in ``workers`` disjoint slices of whole physical cores (near-equal counts, neighbouring
    cores together: they share a socket and caches); with fewer physical cores than workers, slices
    of single CPUs, and with fewer CPUs than workers, workers share round-robin."""
    if workers < 1:
        raise ValueError("workers must be >= 1")
    cores = sorted(cores)
    if len(cores) < workers:
        return [[cores[i % len(cores)]] for i in range(workers)] if cores else [[] for _ in range(workers)]
    groups = physical_cores(cores, sysfs)
    if len(groups) < workers:
        groups = [[c] for c in cores]
    base, extra = divmod(len(groups), workers)
    out, start = [], 0
    for i in range(workers):
        size = base + (1 if i < extra else 0)
        out.append(sorted(c for group in groups[start:start + size] for c in group))
        start += size
    return out


def worker_env(cores: Sequence[int]) -> dict[str, str]:
    """Environment for a worker's fork server: its CPUs and thread pools of that size."""
    count = str(max(1, len(cores)))
    return {CPUS_VARIABLE: ",".join(str(c) for c in cores), **{name: count for name in THREAD_VARIABLES}}


def pin_from_env() -> list[int] | None:
    """Pin this process to the CPUs named by :data:`CPUS_VARIABLE` (a worker's fork server, before it
    imports anything); returns them, or None when the variable is unset or names no usable CPU."""
    text = os.environ.get(CPUS_VARIABLE, "").strip()
    if not text:
        return None
    try:
        wanted = {int(part) for part in text.split(",") if part.strip()}
    except ValueError:
        return None
    usable = wanted & set(usable_cores())
    if not usable:
        return None
    os.sched_setaffinity(0, usable)
    return sorted(usable)

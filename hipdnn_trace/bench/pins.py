"""``--gpus``: which GPU each worker gets and its share of the host's cores.

Light on purpose (no numpy, no harness): the command line starts the workers' fork servers from it
before the suite process imports the harness (bench/early.py), and the plan decides the same pins.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from hipdnn_trace.bench import cpu_share
from hipdnn_trace.device import visibility


@dataclass(frozen=True)
class GpuPin:
    """One GPU of a --gpus run: its index as --gpus names it, the visibility variable's value that
    pins a worker to it, and the host cores its worker gets."""

    index: int
    visible: str
    cpus: tuple[int, ...]

    def env(self, variable: str) -> dict[str, str]:
        """The environment of this GPU's worker: the pin and its share of the host's cores."""
        return {variable: self.visible, **(cpu_share.worker_env(self.cpus) if self.cpus else {})}


@dataclass(frozen=True)
class GpuPins:
    """--gpus: a worker per GPU, each pinned with the vendor's visibility variable."""

    variable: str
    pins: tuple[GpuPin, ...]

    @property
    def devices(self) -> list[int]:
        return [p.index for p in self.pins]

    def envs(self) -> list[dict[str, str]]:
        """Each worker's environment, in pin order."""
        return [p.env(self.variable) for p in self.pins]


def pin_gpus(vendor: str | None, indices: Sequence[int]) -> GpuPins:
    """A worker per GPU index, pinned through the vendor's visibility variable, each with its slice
    of this process's cores."""
    shares = cpu_share.split_cores(cpu_share.usable_cores(), len(indices))
    pins = tuple(GpuPin(i, next(iter(visibility.pin(vendor, i).values())), tuple(cores))
                 for i, cores in zip(indices, shares))
    return GpuPins(visibility.variable_for(vendor, os.environ), pins)

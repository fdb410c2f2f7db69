"""One verdict on whether a graph runs, asked by ``run`` (``graph_run.py``) and ``inspect`` alike.

Before this module the two commands each combined a backend's ``check`` with the memory and time
limits in their own way, and disagreed: inspect said "can run" for graphs run then refused or
reported unsupported (issue 25). Every refusal ``run`` makes before it allocates anything is here:

* the graph-wide rules every backend shares (``graph/rules.py``);
* the backend's own ``check``, and for the reference backend whether one float64 evaluation fits in
  host memory (``backends/reference/memory.py``);
* whether the graph's host tensors fit at all (any backend);
* whether the float64 reference, as the backend or as the validating oracle, stays within
  ``--max-reference-seconds`` (``backends/reference/budget.py``).

The notes on dubious attribute values come from here too, so both commands print the same words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hipdnn_trace.backends.base import SUPPORTED, Support
from hipdnn_trace.backends.reference.budget import DEFAULT_MAX_REFERENCE_S, surely_fast, time_refusal
from hipdnn_trace.graph import rules
from hipdnn_trace.graph.model import Graph

__all__ = ["Limits", "graph_notes", "host_bytes", "host_memory_refusal", "support", "time_limit_refusal",
           "verdict"]

REFERENCE = "reference"


@dataclass(frozen=True)
class Limits:
    """What ``run`` is asked that changes its verdict: whether the float64 reference validates
    (``--validate``), its time limit (``--max-reference-seconds``, 0: none) and where it runs
    (``--reference-device``: cpu, cuda, or auto, resolved only when the time limit is in doubt)."""

    validate: bool = True
    max_reference_s: float = DEFAULT_MAX_REFERENCE_S
    reference_device: str = "auto"


def host_bytes(graph: Graph) -> int:
    """Host memory for the inputs ``run`` makes and the outputs it fetches, in their own types, twice
    (copies). Only tensors a node reads or writes: a tensor no node touches is never allocated."""
    from hipdnn_trace.graph.dtypes import DTYPES

    held = [*graph.input_tensors, *graph.output_tensors]
    return 2 * sum(t.numel * DTYPES[t.data_type].itemsize for t in held)


def host_memory_refusal(graph: Graph) -> str | None:
    """Why no configuration can run ``graph`` here (its host tensors cannot fit), or None."""
    from hipdnn_trace.backends.reference import available_memory_bytes

    have, need = available_memory_bytes(), host_bytes(graph)
    if have is None or need <= have:
        return None
    return f"needs about {need / 2**30:.1f} GiB of host memory for inputs and outputs, {have / 2**30:.1f} GiB available"


def support(graph: Graph, name: str, backend: Any) -> Support:
    """Whether ``backend`` (registered as ``name``) can express ``graph`` here: the shared graph
    rules, its own check, and for the reference backend the memory of one float64 evaluation."""
    reason = rules.refusal(graph)
    if reason:
        return Support(False, reason)
    own = backend.check(graph)
    if not own:
        return own
    if name == REFERENCE:
        from hipdnn_trace.backends.reference import memory_refusal

        memory = memory_refusal(graph)
        if memory:
            return Support(False, memory)
    return SUPPORTED


def time_limit_refusal(graph: Graph, limits: Limits, *, as_backend: bool) -> str | None:
    """Why the float64 reference of ``graph`` is not started: run as the backend (``as_backend``, on
    the CPU) or as the validating oracle (unless ``limits.validate`` is off); None when it is."""
    if not as_backend and not limits.validate:
        return None
    if surely_fast(graph, limits.max_reference_s):
        return None
    device = "cpu" if as_backend else limits.reference_device
    if device == "auto":   # the rule of runs/plan.py resolve_reference_device, asked without importing torch
        from hipdnn_trace.backends.installed import torch_gpu_missing

        device = "cpu" if torch_gpu_missing() else "cuda"
    return time_refusal(graph, limits.max_reference_s, validating=not as_backend, device=device)


def verdict(graph: Graph, name: str, backend: Any, limits: Limits = Limits()) -> Support:
    """Everything ``run`` decides before it makes an input, for ``graph`` run with ``backend`` alone:
    supported, or the first refusal (host memory, the backend's support, the reference's time)."""
    host = host_memory_refusal(graph)
    if host:
        return Support(False, host)
    own = support(graph, name, backend)
    if not own:
        return own
    late = time_limit_refusal(graph, limits, as_backend=name == REFERENCE)
    return Support(False, late) if late else SUPPORTED


def graph_notes(graph: Graph) -> list[str]:
    """Notes on legal but dubious attribute values (both commands print them)."""
    return rules.dubious_attributes(graph)

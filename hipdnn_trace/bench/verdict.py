"""One verdict on whether a graph runs, asked by ``run`` (``graph_run.py``) and ``inspect`` alike.

Before this module the two commands each combined a backend's ``check`` with the memory and time
limits in their own way, and disagreed: inspect said "can run" for graphs run then refused or
reported unsupported (issue 25). Every refusal ``run`` makes before it allocates anything is here:

* the graph-wide rules every backend shares (``graph/rules.py``);
* the backend's own ``check``, and for the reference backend whether one float64 evaluation fits in
  host memory (``backends/reference/memory.py``);
* whether the graph's host tensors fit at all (any backend);
* whether the float64 reference, as the backend or as the validating oracle, stays within
  ``--max-reference-seconds`` (``backends/reference/budget.py``), at the machine's one kept float64
  rate (``backends/reference/rate.py``) and on the device ``--reference-device`` resolves to
  (:func:`reference_device`, asked without importing torch); a validating reference that would not
  fit in host memory is dropped with a note, never refused for its time.

:func:`refusal` is the one decision: ``inspect`` prints it per backend and ``run`` asks it per
configuration before it makes an input, so the same graph gets the same line from both (issue 33).
The notes on dubious attribute values come from here too, so both commands print the same words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hipdnn_trace.backends.base import SUPPORTED, Support
from hipdnn_trace.backends.reference.budget import DEFAULT_MAX_REFERENCE_S, surely_fast, time_refusal
from hipdnn_trace.errors import UserError
from hipdnn_trace.graph import rules
from hipdnn_trace.graph.model import Graph

__all__ = ["MEMORY", "SUPPORT", "TIME", "Limits", "Refusal", "graph_notes", "host_bytes", "host_memory_refusal",
           "oracle_memory_note", "reference_device", "refusal", "support", "time_limit_refusal", "verdict"]

REFERENCE = "reference"
#: kinds of refusal: the graph's host tensors, the backend's support, the float64 reference's time
MEMORY, SUPPORT, TIME = "memory", "support", "time"


@dataclass(frozen=True)
class Refusal:
    """Why a graph does not run on a backend here (one line) and which rule said so."""

    reason: str
    kind: str   # MEMORY | SUPPORT | TIME


@dataclass(frozen=True)
class Limits:
    """What ``run`` is asked that changes its verdict: whether the float64 reference validates
    (``--validate``), its time limit (``--max-reference-seconds``, 0: none) and where it runs
    (``--reference-device``: cpu, cuda as ``run`` resolved it, or auto, resolved by
    :func:`reference_device` only when the time limit is in doubt)."""

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


def reference_device(validate: bool, asked: str, *, only_reference: bool = False) -> str:
    """Where the validating float64 reference runs, ``cpu`` or ``cuda`` (``--reference-device``):
    auto is cuda when torch can compute on a GPU, decided from torch's build file and the driver's GPU
    count without importing torch. A reference-only run (its own result is the oracle) and a run that
    does not validate stay on the CPU; cuda asked where torch has no GPU is one UserError line."""
    if not validate or asked == "cpu" or (only_reference and asked == "auto"):
        return "cpu"
    from hipdnn_trace.backends.installed import torch_gpu_missing

    reason = torch_gpu_missing()
    if asked == "cuda" and reason:
        raise UserError(f"--reference-device cuda: {reason}; use --reference-device cpu")
    return "cpu" if reason else "cuda"


def oracle_memory_note(graph: Graph, *, cached: bool = False) -> str | None:
    """The note when the validating float64 reference (evaluated, or read from the cache when
    ``cached``) and its comparison would not fit in host memory beside the graph's tensors: ``run``
    then drops the reference, so its time is never judged. None when it fits (or memory is unknown)."""
    from hipdnn_trace.backends.reference import available_memory_bytes, needed_memory_bytes
    from hipdnn_trace.backends.reference.memory import cached_reference_bytes, validation_memory_bytes
    from hipdnn_trace.validate.compare import CHUNK_BYTES_PER_ELEMENT, CHUNK_ELEMENTS

    have = available_memory_bytes()
    if have is None:
        return None
    reference = (cached_reference_bytes(graph) if cached else needed_memory_bytes(graph)) \
        + validation_memory_bytes(graph, CHUNK_ELEMENTS, CHUNK_BYTES_PER_ELEMENT)
    if host_bytes(graph) + reference <= have:
        return None
    return (f"not validated against the reference: float64 copies need about {reference / 2**30:.1f} GiB more "
            "host memory than is available")


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
    the CPU) or as the validating oracle (unless ``limits.validate`` is off, or the oracle would not
    fit in memory and is dropped: :func:`oracle_memory_note`); None when it is."""
    if not as_backend and not limits.validate:
        return None
    if surely_fast(graph, limits.max_reference_s):
        return None
    device = "cpu" if as_backend else limits.reference_device
    if device == "auto":
        device = reference_device(True, "auto")
    reason = time_refusal(graph, limits.max_reference_s, validating=not as_backend, device=device)
    if reason and not as_backend and oracle_memory_note(graph):
        return None   # run drops this reference for its memory: its time is never spent
    return reason


def refusal(graph: Graph, name: str, backend: Any, limits: Limits = Limits()) -> Refusal | None:
    """Everything ``run`` decides before it makes an input, for ``graph`` on ``backend`` (registered
    as ``name``): None, or the first refusal (host memory, the backend's support, the reference's
    time). ``inspect`` prints it per backend, ``run`` per configuration: the same words."""
    host = host_memory_refusal(graph)
    if host:
        return Refusal(host, MEMORY)
    own = support(graph, name, backend)
    if not own:
        return Refusal(own.reason, SUPPORT)
    late = time_limit_refusal(graph, limits, as_backend=name == REFERENCE)
    return Refusal(late, TIME) if late else None


def verdict(graph: Graph, name: str, backend: Any, limits: Limits = Limits()) -> Support:
    """:func:`refusal` as a backend's ``Support`` (what ``inspect`` shows)."""
    refused = refusal(graph, name, backend, limits)
    return SUPPORTED if refused is None else Support(False, refused.reason)


def graph_notes(graph: Graph) -> list[str]:
    """Notes on legal but dubious attribute values (both commands print them)."""
    return rules.dubious_attributes(graph)

"""cuDNN execution plans through the plan cache (backends/plan_cache.py): the key, the store, the restore.

The frontend serializes a graph with its built plan (``pygraph.serialize()``) and restores it into an
empty ``pygraph`` (``deserialize(handle, data)``); NVIDIA/cudnn-frontend python/pygraph/pygraph.cpp
binds both, samples/python/02_sdpa_graph_serialization.ipynb uses them. Everything here is best effort:
a frontend without them, a payload it refuses, or a restored plan whose workspace differs from the one
built is a note and a build, never a failed graph.
"""

from __future__ import annotations

import hashlib
from typing import Any

from hipdnn_trace.backends.base import Engine
from hipdnn_trace.backends.cudnn_graph import Plan
from hipdnn_trace.backends.plan_cache import PlanCache
from hipdnn_trace.device import cuda
from hipdnn_trace.errors import UnsupportedError

#: bump when what is stored beside a plan, or how it is used, changes
FORMAT = 1


def plan_key(cudnn: Any, plan: Plan, engine: Engine | None, deselect: tuple[str, ...], device: int) -> dict[str, Any]:
    """Everything that changes which plan a build makes: our translation of the graph (the Plan, which
    holds its dims, strides, types and attributes), the engine and knobs asked for (None: the
    heuristic's first that builds), the notes deselected, the cuDNN library, frontend, driver and GPU."""
    info = cuda.device_info(device)
    return {"format": FORMAT, "backend": "cudnn",
            "translation": hashlib.sha256(repr(plan).encode()).hexdigest(),
            "engine": None if engine is None else {"name": engine.name, "knobs": dict(engine.knobs or {})},
            "deselect": list(deselect), "cudnn": int(cudnn.backend_version()),
            "frontend": str(getattr(cudnn, "__version__", "?")), "driver": info.driver_version,
            "runtime": info.runtime_version, "gpu": info.name, "compute_capability": info.compute_capability}


class RestoredGraph:
    """A plan restored from the cache: what CudnnSession uses of a BuiltGraph (the graph, the notes)."""

    def __init__(self, graph: Any, deselected: tuple[str, ...]) -> None:
        self.graph = graph
        self.deselected = deselected


def restore(cudnn: Any, cache: PlanCache, key: dict[str, Any],
            handle: Any) -> tuple[RestoredGraph, Engine] | str | None:
    """(the restored graph, its Engine) on a verified hit; a note when an entry was there but not used;
    None on a miss."""
    found = cache.get(key)
    if found.plan is None:
        return found.note
    meta = found.plan.meta
    try:
        graph = cudnn.pygraph(handle=handle)
        graph.deserialize(handle, found.plan.payload)
        workspace = int(graph.get_workspace_size())
    except Exception as exc:   # a frontend that refuses the payload: build instead
        cache.discard(key)
        return f"plan-cache entry not restored by cuDNN ({' '.join(str(exc).split())[:160]}); built again"
    if workspace != meta.get("workspace_bytes"):
        cache.discard(key)
        return (f"plan-cache entry restored with a {workspace}-byte workspace, {meta.get('workspace_bytes')} when "
                "built; built again")
    engine = Engine(index=int(meta.get("index", 0)), name=str(meta.get("name")), knobs=dict(meta.get("knobs") or {}),
                    workspace_bytes=workspace, detail=str(meta.get("detail", "")))
    return RestoredGraph(graph, tuple(meta.get("deselected") or ())), engine


def store(cache: PlanCache, key: dict[str, Any], graph: Any, engine: Engine, deselected: tuple[str, ...]) -> str | None:
    """Serialize the built plan into the cache; a note when the frontend cannot or the write fails."""
    try:
        payload = bytes(bytearray(graph.serialize()))
    except Exception as exc:
        return f"plan not cached: cuDNN could not serialize it ({' '.join(str(exc).split())[:160]})"
    meta = {"index": engine.index, "name": engine.name, "knobs": dict(engine.knobs or {}),
            "workspace_bytes": engine.workspace_bytes, "detail": engine.detail, "deselected": list(deselected)}
    return cache.put(key, payload, meta)


#: what a remembered refusal adds to cuDNN's own words on the row
REMEMBERED = ("remembered by the plan cache: cuDNN refused this plan before under the same library, frontend, "
              "driver and GPU; --no-plan-cache builds it again")


def failed_key(key: dict[str, Any]) -> dict[str, Any]:
    """Where a build cuDNN refused is remembered (never a key a plan is stored under)."""
    return {**key, "builder": "not_built"}


def remember_failure(cache: PlanCache, key: dict[str, Any], exc: BaseException) -> None:
    """Keep cuDNN's words for a failed build of ``key``'s plan, and whether it was a refusal (UnsupportedError:
    no engine builds it), which a later session reports again without trying (``remembered_failure``)."""
    cache.put(failed_key(key), b"", {"error": " ".join(str(exc).split())[:2000],
                                     "unsupported": isinstance(exc, UnsupportedError)})


def remembered_failure(cache: PlanCache, key: dict[str, Any]) -> str | None:
    """The remembered refusal of ``key``'s plan, as its row will say it, or None (nothing remembered, or a failure
    that was not a refusal: those are built again)."""
    found = cache.get(failed_key(key))
    if found.plan is None or not found.plan.meta.get("unsupported"):
        return None
    return f"{found.plan.meta.get('error', 'cuDNN refused the plan')} ({REMEMBERED})"

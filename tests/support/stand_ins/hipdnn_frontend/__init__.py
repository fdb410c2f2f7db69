"""STAND-IN for hipDNN's Python bindings (``hipdnn_frontend``) — not the real library.

No AMD GPU exists where these tests run. This module mimics the API surface of the
real bindings as read in ROCm/rocm-libraries ``projects/hipdnn/python/frontend_bindings/src``
(module.cpp, handle_bindings.cpp, graph_bindings.cpp, hip_bindings.cpp, memory bindings)
in several generations, records every call in ``WORLD.calls`` (and, when
``STAND_IN_HIPDNN_LOG`` names a file, appends them there as JSON lines), and "executes"
a graph by evaluating it with hipdnn-trace's own float64 reference on host memory
addressed through fake device pointers. It proves call sequences, layouts and data
movement; it says nothing about hipDNN's numerics or GPU timing.

``build(generation)`` returns a fresh module object:

* ``newest``: hard select (with ``KnobSetting`` lists), read-back, ranked ids, engine info, knobs per
  engine (``get_knobs_for_engine``), HipEvent class only,
  HipStallGate with close()/timed_out()/context manager;
* ``middle``: from_json and soft preference only; HipEvent class and hip_event_*
  functions; no stall gate, no engine info;
* ``functions``: like ``middle`` but HIP events only as hip_event_* functions with
  opaque handles (the function style of the older test_hip_event_bindings.py);
* ``oldest``: no Graph.from_json at all;
* ``timed``: ``newest`` plus ``Graph.execute_timed_ext`` -> ``(Error, ExecutionTiming)`` with
  ``elapsed_ms``, ``quality`` (``TimingQuality``: DEVICE_ONLY, UNSTALLED, INVALID) and ``timed_out``,
  as in the python tests of ROCm/rocm-libraries PR #11813 (not in a hipDNN release yet).

Importing the package itself gives the generation named by ``STAND_IN_HIPDNN_GENERATION``
(default ``newest``); subprocess tests put this directory on PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import time
import types
from dataclasses import dataclass, field
from typing import Any

import numpy as np


def _fnv(name: str) -> int:
    h = 0xCBF29CE484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001B3) & ((1 << 64) - 1)
    return h - (1 << 64) if h >= 1 << 63 else h


ENGINES = {_fnv(n): n for n in ("MIOPEN_ENGINE", "MIOPEN_ENGINE_DETERMINISTIC", "HIPBLASLT_ENGINE")}
MIOPEN, DETERMINISTIC, HIPBLASLT = (_fnv(n) for n in ("MIOPEN_ENGINE", "MIOPEN_ENGINE_DETERMINISTIC",
                                                      "HIPBLASLT_ENGINE"))


@dataclass
class World:
    """Everything the stand-in 'device' holds, shared by one module object."""

    generation: str = "newest"
    applicable: tuple[int, ...] = (MIOPEN, DETERMINISTIC)
    writes_outputs: bool = True
    workspace_bytes: int = 256
    calls: list[tuple] = field(default_factory=list)
    memory: dict[int, bytearray] = field(default_factory=dict)
    next_ptr: int = 0x7F0000000000
    live_handles: int = 0
    plugin_paths: list[str] | None = None
    plugin_mode: Any = None
    log: str | None = None
    knobs: tuple[str, ...] = ("global.benchmarking",)   # what get_knobs_for_engine lists for every engine

    def record(self, *call: Any) -> None:
        self.calls.append(call)
        if self.log:
            with open(self.log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps([str(c) if not isinstance(c, (int, float, str, list)) else c
                                     for c in call]) + "\n")

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]


class Error:
    def __init__(self, ok: bool = True, message: str = "") -> None:
        self.code = "OK" if ok else "INVALID_VALUE"
        self.err_msg = message

    def is_good(self) -> bool:
        return self.code == "OK"

    def is_bad(self) -> bool:
        return not self.is_good()

    def get_message(self) -> str:
        return self.err_msg


class _Enum:
    def __init__(self, kind: str, names: list[str]) -> None:
        for n in names:
            setattr(self, n, f"{kind}.{n}")


def build(generation: str = "newest", **settings: Any) -> types.ModuleType:
    world = World(generation=generation, log=os.environ.get("STAND_IN_HIPDNN_LOG"), **settings)
    m = types.ModuleType("hipdnn_frontend")
    m.__doc__ = __doc__
    m.__version__ = {"timed": "1.5.0.stand-in", "newest": "1.4.0.stand-in", "middle": "1.1.0.stand-in",
                     "functions": "1.0.0.stand-in", "oldest": "0.1.0.stand-in"}[generation]
    m.WORLD = world
    m.Error = Error
    m.DataType = _Enum("DataType", ["FLOAT", "HALF", "BFLOAT16", "DOUBLE", "INT8", "INT32", "INT64", "UINT8",
                                    "BOOLEAN", "FP8_E4M3", "FP8_E5M2"])
    m.HeuristicMode = _Enum("HeuristicMode", ["FALLBACK"])
    m.PluginLoadingMode = _Enum("PluginLoadingMode", ["ADDITIVE", "ABSOLUTE"])
    newest = generation in ("newest", "timed")

    # --- module.cpp -------------------------------------------------------------
    def set_engine_plugin_paths(paths: list[str], mode: Any = m.PluginLoadingMode.ADDITIVE) -> None:
        world.record("set_engine_plugin_paths", list(paths), mode)
        if world.live_handles:
            raise RuntimeError("Failed to set engine plugin paths")   # no change while handles live
        world.plugin_paths, world.plugin_mode = list(paths), mode

    m.set_engine_plugin_paths = set_engine_plugin_paths
    if newest:
        m.engine_id_to_name = lambda engine_id: ENGINES.get(engine_id, "")

    # --- handle_bindings.cpp ------------------------------------------------------
    class EngineInfo:
        def __init__(self, engine_id: int) -> None:
            self.engine_id = engine_id
            self.engine_name = ENGINES[engine_id]
            self.plugin_name = "stand_in_plugin"
            self.version = "0.0.1"
            self.type = "engine"

    class Handle:
        def __init__(self, stream: int = 0) -> None:
            world.record("Handle", stream)
            world.live_handles += 1
            self._stream = stream
            self._alive = True

        def get(self) -> int:
            if not self._alive:
                raise RuntimeError("Handle has been destroyed")
            return id(self)

        def get_stream(self) -> int:
            return self._stream

        def get_loaded_engine_plugin_paths(self) -> list[str]:
            roots = world.plugin_paths or ["/opt/rocm/lib/hipdnn_plugins/engines"]
            return [os.path.join(r, "libstand_in_plugin.so") for r in roots]

        def destroy(self) -> None:
            if self._alive:
                self._alive = False
                world.live_handles -= 1

    if newest:
        def get_engine_info(self: Handle, engine_id: int) -> EngineInfo:
            if engine_id not in ENGINES:
                raise IndexError("Engine ID is not loaded")
            return EngineInfo(engine_id)

        Handle.get_engine_info = get_engine_info

    def destroy_handle(handle: Handle) -> None:
        world.record("destroy_handle")
        handle.destroy()

    m.Handle, m.EngineInfo, m.destroy_handle = Handle, EngineInfo, destroy_handle
    m.create_handle = lambda stream=0: Handle(stream)

    # --- memory bindings ------------------------------------------------------------
    class DeviceBuffer:
        def __init__(self, size_bytes: int) -> None:
            world.record("DeviceBuffer", size_bytes)
            self._ptr = world.next_ptr
            world.next_ptr += (size_bytes + 255) // 256 * 256 + 256
            world.memory[self._ptr] = bytearray(size_bytes)

        def copy_from_host(self, data: bytes) -> None:
            mem = world.memory[self._ptr]
            if len(data) != len(mem):
                raise RuntimeError(f"Data size ({len(data)}) doesn't match buffer size ({len(mem)})")
            mem[:] = data

        def copy_to_host(self) -> bytes:
            return bytes(world.memory[self._ptr])

        def zeros(self) -> None:
            world.record("DeviceBuffer.zeros")
            mem = world.memory[self._ptr]
            mem[:] = bytes(len(mem))

        def size(self) -> int:
            return len(world.memory[self._ptr])

        def ptr(self) -> int:
            return self._ptr

    m.DeviceBuffer = DeviceBuffer

    # --- hip_bindings.cpp -------------------------------------------------------------
    class HipEvent:
        def __init__(self) -> None:
            self.t: int | None = None

        def record(self, stream: int = 0) -> None:
            world.record("HipEvent.record", stream)
            self.t = time.perf_counter_ns()

        def synchronize(self) -> None:
            world.record("HipEvent.synchronize")

        def elapsed_time(self, stop_event: HipEvent) -> float:
            if self.t is None or stop_event.t is None:
                raise RuntimeError("event not recorded")
            return (stop_event.t - self.t) / 1e6

        def destroy(self) -> None:
            world.record("HipEvent.destroy")

    m.hip_get_device_count = lambda: 1
    m.hip_stream_synchronize = lambda stream=0: world.record("hip_stream_synchronize", stream)
    m.hip_device_synchronize = lambda: world.record("hip_device_synchronize")
    if generation in ("timed", "newest", "middle"):
        m.HipEvent = HipEvent
    if generation in ("middle", "functions"):
        events: dict[int, list[int | None]] = {}

        def hip_event_create() -> int:
            world.record("hip_event_create")
            handle = len(events) + 1
            events[handle] = [None]
            return handle

        def hip_event_record(event: int, stream: int = 0) -> None:
            world.record("hip_event_record", stream)
            events[event][0] = time.perf_counter_ns()

        def hip_event_synchronize(event: int) -> None:
            world.record("hip_event_synchronize")

        def hip_event_elapsed_time(start: int, stop: int) -> float:
            return (events[stop][0] - events[start][0]) / 1e6

        def hip_event_destroy(event: int) -> None:
            world.record("hip_event_destroy")

        m.hip_event_create, m.hip_event_record = hip_event_create, hip_event_record
        m.hip_event_synchronize, m.hip_event_elapsed_time = hip_event_synchronize, hip_event_elapsed_time
        m.hip_event_destroy = hip_event_destroy
    if newest:
        class HipStallGate:
            def __init__(self) -> None:
                world.record("HipStallGate")
                self._closed = False

            def arm(self, stream: int = 0) -> None:
                world.record("HipStallGate.arm", stream)

            def release(self) -> None:
                world.record("HipStallGate.release")

            def timed_out(self) -> bool:
                return False

            def close(self) -> None:
                world.record("HipStallGate.close")

            def __enter__(self) -> HipStallGate:
                return self

            def __exit__(self, *exc: Any) -> None:
                self.close()

        m.HipStallGate = HipStallGate
        m.hip_can_use_stream_wait_value = lambda: True

    # --- graph_bindings.cpp -----------------------------------------------------------
    class Graph:
        def __init__(self) -> None:
            world.record("Graph")
            self._graph: Any = None
            self._op_graph = False
            self._preferred: int | None = None
            self._plan: int | None = None

        def _setter(name: str):  # builds methods
            def setter(self: Graph, value: Any) -> Graph:
                world.record(f"Graph.{name}", value)
                return self
            return setter

        set_io_data_type = _setter("set_io_data_type")
        set_intermediate_data_type = _setter("set_intermediate_data_type")
        set_compute_data_type = _setter("set_compute_data_type")

        def validate(self) -> Error:
            world.record("Graph.validate")
            return Error()

        def set_preferred_engine_id_ext(self, engine_id: int | None = None) -> Graph:
            world.record("Graph.set_preferred_engine_id_ext", engine_id)
            self._preferred = engine_id
            return self

        def build_operation_graph(self, handle: Any) -> Error:
            world.record("Graph.build_operation_graph")
            handle.get()
            if self._graph is None:
                return Error(False, "no graph")
            self._op_graph = True
            return Error()

        def create_execution_plans(self, modes: Any = None) -> Error:
            world.record("Graph.create_execution_plans")
            if not self._op_graph:
                return Error(False, "operation graph not built")
            # Soft preference: honoured only when applicable, else the top config.
            self._plan = self._preferred if self._preferred in world.applicable else world.applicable[0]
            return Error()

        def check_support(self) -> Error:
            world.record("Graph.check_support")
            return Error() if self._plan is not None else Error(False, "no plan")

        def build_plans(self, policy: Any = None) -> Error:
            world.record("Graph.build_plans")
            return Error()

        def get_workspace_size(self) -> int:
            return world.workspace_bytes

        def execute(self, handle: Any, variant_pack: dict[int, int], workspace: int = 0) -> Error:
            world.record("Graph.execute", workspace)
            handle.get()
            from hipdnn_trace.backends.reference.executor import evaluate
            from hipdnn_trace.graph import dtypes, layout, ragged

            graph = self._graph
            flats = {}
            for t in graph.input_tensors:
                dt = dtypes.numpy_dtype(t.data_type)
                memory = bytes(world.memory[variant_pack[t.uid]])
                flats[t.uid] = np.frombuffer(memory, dtype=dt, count=t.storage_elements)
            # hipDNN reads a ragged tensor (RFC 0014) where its offsets say, not at its batch stride
            bounds = ragged.tensor_bounds(graph, flats)
            inputs = {u: np.array(layout.view(a, graph.by_uid[u].dims, graph.by_uid[u].strides)) if u not in bounds
                      else ragged.unpack(a, graph.by_uid[u], bounds[u], np.zeros(graph.by_uid[u].dims, a.dtype))
                      for u, a in flats.items()}
            if not world.writes_outputs:
                return Error()
            result = evaluate(graph, inputs)
            for t in graph.output_tensors:
                stored = np.asarray(result.stored[t.uid])
                data = (layout.pack(stored, t.strides) if t.uid not in bounds else
                        ragged.pack(stored, t, bounds[t.uid], np.zeros(t.storage_elements, stored.dtype))).tobytes()
                mem = world.memory[variant_pack[t.uid]]
                mem[: len(data)] = data
            return Error()

    if generation != "oldest":
        def from_json(self: Graph, *args: Any) -> Error:
            text = args[-1]
            world.record("Graph.from_json", len(args))
            data = json.loads(text)
            for node in data.get("nodes", []):
                if str(node.get("compute_data_type", "")).lower() == "unset":
                    return Error(False, f"node {node.get('name')}: compute_data_type 'unset' is not readable")
            from hipdnn_trace.graph.load import load_bytes

            self._graph = load_bytes(text.encode(), "from_json")
            return Error()

        Graph.from_json = from_json
    if newest:
        def create_execution_plan_ext(self: Graph, engine_id: int, knob_settings: Any = None) -> Error:
            world.record("Graph.create_execution_plan_ext", engine_id)
            if knob_settings:
                world.record("Graph.create_execution_plan_ext.knobs",
                             [[k.knob_id, k.value] for k in knob_settings])
            if not self._op_graph:
                return Error(False, "operation graph not built")
            if engine_id not in world.applicable:
                return Error(False, f"engine {engine_id} is not applicable")
            self._plan = engine_id
            return Error()

        def get_execution_plan_engine_id(self: Graph) -> int:
            world.record("Graph.get_execution_plan_engine_id")
            if self._plan is None:
                raise RuntimeError("Failed to get execution plan engine id: no plan")
            return self._plan

        def get_ranked_engine_ids(self: Graph, modes: Any = None) -> list[int]:
            world.record("Graph.get_ranked_engine_ids")
            if not self._op_graph:
                raise RuntimeError("Failed to get ranked engine ids: no operation graph")
            return list(world.applicable)

        def get_knobs_for_engine(self: Graph, engine_id: int) -> list[Any]:
            world.record("Graph.get_knobs_for_engine", engine_id)
            return [types.SimpleNamespace(knob_id=k) for k in world.knobs]

        class KnobSetting:
            def __init__(self, knob_id: str, value: Any) -> None:
                self.knob_id, self.value = knob_id, value

        m.KnobSetting = KnobSetting
        Graph.get_knobs_for_engine = get_knobs_for_engine
        Graph.create_execution_plan_ext = create_execution_plan_ext
        Graph.get_execution_plan_engine_id = get_execution_plan_engine_id
        Graph.get_ranked_engine_ids = get_ranked_engine_ids
    if generation == "timed":
        m.TimingQuality = _Enum("TimingQuality", ["DEVICE_ONLY", "UNSTALLED", "INVALID"])

        @dataclass
        class ExecutionTiming:
            elapsed_ms: float | None = None
            quality: str = m.TimingQuality.INVALID
            timed_out: bool = False

        def execute_timed_ext(self: Graph, handle: Any, variant_pack: dict[int, int],
                              workspace: int = 0) -> tuple[Error, ExecutionTiming]:
            world.record("Graph.execute_timed_ext", workspace)
            if self._plan is None:
                return Error(False, "no compiled plan"), ExecutionTiming()
            t0 = time.perf_counter_ns()
            result = Graph.execute(self, handle, variant_pack, workspace)
            if result.is_bad():
                return result, ExecutionTiming()
            return result, ExecutionTiming((time.perf_counter_ns() - t0) / 1e6, m.TimingQuality.DEVICE_ONLY)

        m.ExecutionTiming = ExecutionTiming
        Graph.execute_timed_ext = execute_timed_ext
    m.Graph = Graph
    return m


_MODULE = build(os.environ.get("STAND_IN_HIPDNN_GENERATION", "newest"))
globals().update({k: v for k, v in vars(_MODULE).items() if not k.startswith("__")})
__version__ = _MODULE.__version__

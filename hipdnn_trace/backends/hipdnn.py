"""The hipDNN backend: graphs run through ``hipdnn_frontend`` on an AMD GPU.

hipDNN reads its own JSON, so the graph goes in as written (``Graph.from_json``): no
translation, only the one normalisation hipDNN's own dnn-benchmarking does (a node
``compute_data_type`` of ``"unset"`` takes the graph's compute type, which
``from_json`` otherwise rejects). The build sequence is upstream's:
``from_json -> validate -> build_operation_graph(handle) -> create_execution_plans``
(or ``create_execution_plan_ext(id)``) ``-> check_support -> build_plans``.

Engines: ``--engine ID`` (a name, decimal or 0x hex id) **forces** the engine with
``create_execution_plan_ext`` (an inapplicable engine is an error, never a silent
substitute); ``--engine prefer:ID`` only **prefers** it (``set_preferred_engine_id_ext``;
hipDNN falls back to its top choice when the engine does not apply). Either way the
engine that really backs the plan is read back (``get_execution_plan_engine_id``) and
recorded, so a fallback shows in the results.

Plugin paths (``--APath/--BPath``, ``--a hipdnn:ENGINE@PATH``) are process-wide in
hipDNN: ``set_engine_plugin_paths(..., ABSOLUTE)`` must come before the first handle,
plugins stay loaded after handles close, and two builds of one plugin would share
whatever libraries the first one loaded. So one process serves one plugin set; a
second, different one is refused with a one-line error and must run in its own process
(the harness's per-configuration child processes; see docs/amd.md).
``HipdnnBackend.process_key`` tells a harness which configurations can share a process.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hipdnn_trace.backends import plan_cache
from hipdnn_trace.backends.base import SUPPORTED, Engine, RunOptions, Support
from hipdnn_trace.backends.hipdnn_api import (
    FORCE,
    PREFER,
    EngineRequest,
    FrontendApi,
    check,
    engine_hex,
    error_message,
    is_bad,
    known_engine_name,
    load_frontend,
    parse_engine,
)
from hipdnn_trace.device.hip import HipEventTimer, TimedExecuteTimer, make_hip_timer
from hipdnn_trace.errors import ExecutionError, ToolMissingError, UnsupportedError, UserError
from hipdnn_trace.graph import attention, dtypes, layout, ragged
from hipdnn_trace.graph.families import FAMILIES, Absent
from hipdnn_trace.graph.model import Graph, Node, Tensor
from hipdnn_trace.graph.ops import family_types
from hipdnn_trace.graph.write import graph_to_json
from hipdnn_trace.validate.poison import POISON_BYTE

#: hipDNN's knob that makes a provider benchmark its kernels on the first execute (autotune::BENCHMARKING_KNOB_NAME)
BENCHMARKING_KNOB = "global.benchmarking"

#: Node ``type`` strings of hipDNN's JSON (NodeAttributes union, newest graph.fbs;
#: docs/hipdnn-format.md section 2.0): the types of every family whose ``hipdnn`` entry in
#: ``graph/families.py`` names this module, which hands the graph's own JSON to hipDNN. Anything
#: else its reader cannot build.
HIPDNN_NODE_TYPES = frozenset(t for f in FAMILIES if not isinstance(f.hipdnn, Absent) for t in family_types(f))

#: Bytes written between iterations for ``--cache cold``: more than the L2 and the
#: MI300 Infinity Cache (256 MiB) together, so nothing of the last iteration survives.
FLUSH_BYTES = 512 * 2**20



#: Attention ports hipDNN's JSON carries (its sample graphs write every key, null when unset:
#: sample_sdpa.json, sample_sdpa_backward.json @ 72505df3 / 63827a2a; docs/hipdnn-format.md 2.10).
HIPDNN_ATTENTION_PORTS = {
    attention.SDPA: frozenset(("q", "k", "v", "o", *attention.FWD_OPTIONAL_INPUTS, *attention.FWD_OPTIONAL_OUTPUTS)),
    attention.SDPA_BACKWARD: frozenset(("q", "k", "v", "o", "do", "stats", "scale", "attn_mask", "seq_len_q",
                                        "seq_len_kv", "seed", "offset", "dropout_mask", "dropout_scale",
                                        "dropout_scale_inv", "dq", "dk", "dv", "dbias")),
}


def attention_support(node: Node) -> str | None:
    """Why hipDNN cannot be handed this attention node (a port its schema lacks), or None.

    Everything hipDNN's JSON can say is passed on: which SDPA features an installed
    plugin executes is hipDNN's answer at graph build, reported as its own error.
    """
    known = HIPDNN_ATTENTION_PORTS.get(node.type)
    if known is None:
        return None
    extra = sorted(p for p, u in {**node.inputs, **node.outputs}.items() if u is not None and p not in known)
    if extra:
        return f"hipDNN's {node.type} has no {', '.join(p + '_tensor_uid' for p in extra)}"
    return None


class PluginPathConflict(UserError):
    """A second plugin set asked of a process whose hipDNN plugins are already fixed."""


@dataclass
class _PluginState:
    """hipDNN's plugin configuration of this process (it has exactly one)."""

    paths: tuple[str, ...] | None = None   # None: hipDNN's default plugins
    fixed: bool = False                    # paths set or a handle created: no way back


_PLUGINS = _PluginState()


def _describe(paths: tuple[str, ...] | None) -> str:
    return ", ".join(paths) if paths else "hipDNN's default plugins"


def plugin_key(plugin_path: str | None) -> tuple[str, ...] | None:
    return (os.path.abspath(plugin_path),) if plugin_path else None


def configure_plugins(api: FrontendApi, plugin_path: str | None) -> None:
    """Set this process's plugin paths (ABSOLUTE: only these load) before its first handle."""
    want = plugin_key(plugin_path)
    if _PLUGINS.fixed:
        if want != _PLUGINS.paths:
            raise PluginPathConflict(
                f"hipDNN loads engine plugins once per process: this one already uses "
                f"{_describe(_PLUGINS.paths)}, so {_describe(want)} needs a process of its own "
                f"(run each plugin path as a separate configuration process, see docs/amd.md)")
        return
    if want is not None:
        if not os.path.exists(want[0]):
            raise UserError(f"plugin path {plugin_path}: no such file or directory")
        if not api.plugin_paths:
            raise UnsupportedError("this hipdnn_frontend cannot set engine plugin paths "
                                   "(no set_engine_plugin_paths / PluginLoadingMode.ABSOLUTE)")
        api.module.set_engine_plugin_paths(list(want), api.module.PluginLoadingMode.ABSOLUTE)
        _PLUGINS.fixed = True
    _PLUGINS.paths = want


def _new_handle(api: FrontendApi) -> Any:
    handle = api.module.Handle()
    _PLUGINS.fixed = True   # plugins are loaded now, whatever was (not) set before
    return handle


def _destroy_handle(api: FrontendApi, handle: Any) -> None:
    destroy = getattr(api.module, "destroy_handle", None)
    if destroy is not None:
        destroy(handle)


def hipdnn_json(graph: Graph) -> tuple[str, list[str]]:
    """The graph's own JSON for ``Graph.from_json``, and what had to be normalised."""
    data = graph_to_json(graph)
    notes: list[str] = []
    compute = data.get("compute_data_type") or data.get("compute_type") or "float"
    for node in data.get("nodes", []):
        if str(node.get("compute_data_type", "")).lower() == "unset":
            node["compute_data_type"] = compute
            notes.append(f"node {node.get('name', '?')}: compute_data_type unset -> {compute}")
    return json.dumps(data), notes


def _set_graph_types(api: FrontendApi, fe_graph: Any, graph: Graph) -> None:
    """Graph-level types as enums before from_json, as dnn-benchmarking does (best effort)."""
    enum = getattr(api.module, "DataType", None)
    for setter, value in (("set_io_data_type", graph.io_data_type),
                          ("set_intermediate_data_type", graph.intermediate_data_type),
                          ("set_compute_data_type", graph.compute_data_type)):
        member = getattr(enum, str(value).upper(), None) if enum is not None else None
        if member is not None and hasattr(fe_graph, setter):
            getattr(fe_graph, setter)(member)


def _operation_graph(api: FrontendApi, graph: Graph, text: str, handle: Any, prefer: int | None = None) -> Any:
    """``Graph.from_json`` -> validate -> (preferred engine) -> ``build_operation_graph`` on ``handle``."""
    g = api.module.Graph()
    _set_graph_types(api, g, graph)
    check(g.from_json(text), "Graph.from_json")
    if hasattr(g, "validate"):
        check(g.validate(), "Graph.validate", unsupported=True)
    if prefer is not None:
        g.set_preferred_engine_id_ext(prefer)
    check(g.build_operation_graph(handle), "build_operation_graph", unsupported=True)
    return g


def _engine_name(api: FrontendApi, handle: Any, engine_id: int) -> tuple[str, str]:
    """(name, detail) of an engine id: the handle's loaded plugins, the registry, our table."""
    if handle is not None and api.engine_info:
        try:
            info = handle.get_engine_info(engine_id)
            detail = " ".join(x for x in (getattr(info, "plugin_name", ""), getattr(info, "version", "")) if x)
            name = str(getattr(info, "engine_name", "") or "")
            if name:
                return name, detail
        except Exception:  # not loaded under this id: try the registry
            pass
    if api.engine_names:
        try:
            name = str(api.module.engine_id_to_name(engine_id) or "")
            if name:
                return name, ""
        except Exception:
            pass
    return known_engine_name(engine_id), ""


def _engine_of(request: EngineRequest) -> Engine:
    return Engine(index=request.engine_id, name=request.label(),
                  knobs={"engine_id": request.engine_id, "selection": request.mode},
                  detail=engine_hex(request.engine_id))


def _request_of(engine: Engine | None) -> EngineRequest | None:
    if engine is None:
        return None
    knobs = engine.knobs or {}
    if "engine_id" in knobs:
        eid = int(knobs["engine_id"])
        return EngineRequest(eid, str(knobs.get("selection", FORCE)), known_engine_name(eid), engine.label())
    return parse_engine(engine.label())


def _tensor_dtype(t: Tensor) -> np.dtype:
    return dtypes.numpy_dtype(t.data_type)


class HipdnnSession:
    """One graph built for one engine, with a device buffer per tensor uid."""

    def __init__(self, api: FrontendApi, graph: Graph, request: EngineRequest | None, options: RunOptions) -> None:
        self.api = api
        self.graph = graph
        self.request = request
        self.options = options
        self.engine: Engine | None = None
        self.timer: HipEventTimer | Any = None
        self._timed_execute: TimedExecuteTimer | None = None   # the timer, when hipDNN times the execute
        self.handle: Any = None
        self.fe_graph: Any = None
        self.buffers: dict[int, Any] = {}
        self.variant_pack: dict[int, int] = {}
        self._bounds: dict[int, list[int]] = {}   # ragged (RFC 0014) tensor uid -> token boundaries, set at bind
        self.workspace: Any = None
        self.workspace_ptr = 0
        self.workspace_bytes = 0
        self._flush: Any = None
        self._info: dict[str, Any] = {}
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    # --- build ------------------------------------------------------------------

    def _build(self) -> None:
        api, m = self.api, self.api.module
        os.environ.update(plan_cache.hipdnn_cache_env(self.options.extra or {}, os.environ))   # before its handle
        text, notes = hipdnn_json(self.graph)
        self.handle = _new_handle(api)
        request = self.request
        prefer = request.engine_id if request is not None and request.mode == PREFER else None
        g = self.fe_graph = _operation_graph(api, self.graph, text, self.handle, prefer=prefer)
        if self.options.extra.get("tuned"):
            self._create_tuned_plan(g, request)
        elif request is not None and request.mode == FORCE:
            if not api.hard_select:
                raise UnsupportedError(
                    f"this hipdnn_frontend ({api.version}) cannot force an engine (no "
                    f"create_execution_plan_ext): use --engine prefer:{request.name or request.engine_id}")
            check(g.create_execution_plan_ext(request.engine_id),
                  f"engine {request.label()} ({engine_hex(request.engine_id)}) does not apply to this graph",
                  unsupported=True)
        else:
            check(g.create_execution_plans(), "create_execution_plans", unsupported=True)
        check(g.check_support(), "check_support", unsupported=True)
        check(g.build_plans(), "build_plans")
        self._record_engine()
        self.workspace_bytes = int(g.get_workspace_size())
        if self.workspace_bytes > 0:
            self.workspace = m.DeviceBuffer(self.workspace_bytes)
            self.workspace_ptr = int(self.workspace.ptr())
        self._allocate()
        stream = int(self.handle.get_stream()) if hasattr(self.handle, "get_stream") else 0
        self.timer, timer_info = make_hip_timer(m, stream, staged=self.options.timing == "staged",
                                                timed_execute=callable(getattr(g, "execute_timed_ext", None)))
        if isinstance(self.timer, TimedExecuteTimer):
            self._timed_execute = self.timer
        self.stream = stream
        if self.options.cache == "cold":
            self._flush = m.DeviceBuffer(int(self.options.extra.get("flush_bytes", FLUSH_BYTES)))
        self._info.update(timer_info)
        self._info.update({
            "hipdnn_frontend": api.version,
            "hipdnn_frontend_api": api.describe(),
            "plugin_path": self.options.plugin_path,
            "workspace_bytes": self.workspace_bytes,
            "cache_flush_bytes": self._flush.size() if self._flush is not None else 0,
        })
        if notes:
            self._info["json_normalised"] = notes
        loaded = getattr(self.handle, "get_loaded_engine_plugin_paths", None)
        if loaded is not None:
            try:
                self._info["loaded_plugins"] = [str(p) for p in loaded()]
            except Exception:  # informational only
                pass

    def _create_tuned_plan(self, g: Any, request: EngineRequest | None) -> None:
        """run --oracle's tuned twin: the plan of the same engine (the forced or preferred one, else the
        heuristic's top-ranked) with ``global.benchmarking=1``, the knob that makes a provider sample its
        candidate kernels on the first execute and keep the fastest (ROCm dnn-benchmarking
        ``execution/oracle.py`` ``build_tuned_plan``; hipDNN ``create_execution_plan_ext(engineId,
        std::vector<KnobSetting>)``). hipDNN serves a tuned winner to later builds of the same graph in
        the process and writes it to its disk cache: this process is the twin's own (``process_key``),
        and the cache is off in it (``HIPDNN_DISABLE_CACHE=1``)."""
        api, m = self.api, self.api.module
        knob = getattr(m, "KnobSetting", None)
        if not api.hard_select or knob is None:
            raise UnsupportedError(f"--oracle: this hipdnn_frontend ({api.version}) cannot build a plan with knobs "
                                   "(no create_execution_plan_ext with KnobSetting)")
        if request is not None:
            engine_id = request.engine_id
        elif api.ranked_ids:
            ranked = [int(e) for e in g.get_ranked_engine_ids()]
            if not ranked:
                raise UnsupportedError("--oracle: hipDNN ranks no engine for this graph")
            engine_id = ranked[0]
        else:
            raise UnsupportedError(f"--oracle: this hipdnn_frontend ({api.version}) cannot rank engines "
                                   "(no get_ranked_engine_ids) to tune the heuristic's one")
        os.environ["HIPDNN_DISABLE_CACHE"] = "1"
        check(g.create_execution_plan_ext(engine_id, [knob(BENCHMARKING_KNOB, 1)]),
              f"engine {engine_hex(engine_id)} with {BENCHMARKING_KNOB}=1 does not apply to this graph",
              unsupported=True)
        listed = getattr(g, "get_knobs_for_engine", None)
        available = BENCHMARKING_KNOB in {str(k.knob_id) for k in listed(engine_id)} if listed else None
        self._info["tuning"] = {"detail": f"{BENCHMARKING_KNOB}=1 on engine {engine_hex(engine_id)}",
                                "available": available}

    def _record_engine(self) -> None:
        api, request = self.api, self.request
        actual = int(self.fe_graph.get_execution_plan_engine_id()) if api.read_back else None
        selection = request.mode if request is not None else "heuristic"
        self._info.update({
            "engine_selection": selection,
            "engine_requested": request.label() if request is not None else None,
            "engine_requested_id": request.engine_id if request is not None else None,
            "engine_id": actual,
            "engine_id_hex": engine_hex(actual) if actual is not None else None,
        })
        if actual is None:
            self._info["engine_note"] = "this hipdnn_frontend cannot read back the plan's engine"
            if request is not None:
                self.engine = _engine_of(request)
            return
        name, detail = _engine_name(api, self.handle, actual)
        fell_back = request is not None and actual != request.engine_id
        if fell_back and request.mode == FORCE:
            raise UnsupportedError(f"forced engine {request.label()} was not selected: hipDNN built "
                                   f"{name or engine_hex(actual)} (refusing a mislabeled result)")
        self._info["engine_name"] = name
        self._info["engine_fallback"] = fell_back
        label = name or engine_hex(actual)
        if fell_back:
            label = f"{label} (preferred {request.name or engine_hex(request.engine_id)} not applicable)"
        self.engine = Engine(index=actual, name=label, knobs={"engine_id": actual, "selection": selection},
                             workspace_bytes=None, detail=detail or engine_hex(actual))

    def _allocate(self) -> None:
        """A device buffer for every tensor that is neither virtual nor passed by value."""
        m = self.api.module
        for t in self.graph.tensors:
            if t.virtual or t.is_value:
                continue
            nbytes = t.storage_elements * _tensor_dtype(t).itemsize
            buf = m.DeviceBuffer(max(nbytes, 1))
            self.buffers[t.uid] = buf
            self.variant_pack[t.uid] = int(buf.ptr())

    # --- Session protocol -------------------------------------------------------

    def bind(self, tensors: Mapping[int, np.ndarray]) -> None:
        """Inputs to the device in their strided layout (a ragged tensor, RFC 0014, packed as its offsets
        say: graph/ragged.py); every other buffer poisoned (0xFF)."""
        self._bounds = ragged.tensor_bounds(self.graph, tensors)
        for t in self.graph.tensors:
            buf = self.buffers.get(t.uid)
            if buf is None:
                continue
            nbytes = buf.size() if hasattr(buf, "size") else t.storage_elements * _tensor_dtype(t).itemsize
            if t.uid in tensors:
                array = np.asarray(tensors[t.uid], dtype=_tensor_dtype(t))
                if array.shape != t.dims:
                    raise ExecutionError(f"tensor {t.name} (uid {t.uid}): got shape {array.shape}, graph says {t.dims}")
                bounds = self._bounds.get(t.uid)
                data = (layout.pack(array, t.strides) if bounds is None else
                        ragged.pack(array, t, bounds, np.zeros(t.storage_elements, array.dtype))).tobytes()
                buf.copy_from_host(data + bytes(nbytes - len(data)))
            else:
                buf.copy_from_host(bytes([POISON_BYTE]) * nbytes)

    def execute(self) -> None:
        timer = self._timed_execute
        try:
            if timer is not None and timer.take():
                result, timing = self.fe_graph.execute_timed_ext(self.handle, self.variant_pack, self.workspace_ptr)
                if not is_bad(result):
                    timer.record(timing)
            else:
                result = self.fe_graph.execute(self.handle, self.variant_pack, self.workspace_ptr)
        except Exception:
            self.timer.abort()
            raise
        if is_bad(result):
            self.timer.abort()
            raise ExecutionError(f"hipDNN execute failed: {error_message(result)}")

    def synchronize(self) -> None:
        m = self.api.module
        if hasattr(m, "hip_stream_synchronize"):
            m.hip_stream_synchronize(self.stream)
        elif hasattr(m, "hip_device_synchronize"):
            m.hip_device_synchronize()
        else:
            self.timer.synchronize()

    def prepare_iteration(self) -> None:
        if self._flush is not None:
            self._flush.zeros()      # hipMemset over more than the caches hold
            self.synchronize()

    def fetch(self, uids: Iterable[int]) -> dict[int, np.ndarray]:
        self.synchronize()
        out: dict[int, np.ndarray] = {}
        for uid in uids:
            t = self.graph.by_uid[uid]
            raw = self.buffers[uid].copy_to_host()
            flat = np.frombuffer(raw, dtype=_tensor_dtype(t), count=t.storage_elements)
            bounds = self._bounds.get(uid)
            out[uid] = np.array(layout.view(flat, t.dims, t.strides)) if bounds is None else \
                ragged.unpack(flat, t, bounds, np.zeros(t.dims, flat.dtype))
        return out

    def info(self) -> dict[str, Any]:
        out = dict(self._info)
        timeouts = getattr(self.timer, "timeouts", 0)
        if timeouts:
            out["stall_gate_timeouts"] = timeouts
        if self._timed_execute is not None and self._timed_execute.qualities:
            out["timed_execute_quality"] = dict(self._timed_execute.qualities)   # DEVICE_ONLY / UNSTALLED counts
        return out

    def close(self) -> None:
        if self.timer is not None:
            self.timer.close()
        self.buffers.clear()
        self.variant_pack.clear()
        self.workspace = self._flush = None
        self.fe_graph = None
        if self.handle is not None:
            try:
                _destroy_handle(self.api, self.handle)
            finally:
                self.handle = None


class HipdnnBackend:
    name = "hipdnn"
    vendor = "amd"
    #: run --oracle's tuned plan: the same engine with global.benchmarking=1, in a process of its own
    oracle_tuning = "backend"
    #: hipDNN's own engine cache lives in the plan cache's folder; --no-plan-cache turns it off
    caches_plans = True

    def _api(self) -> FrontendApi:
        api = load_frontend()
        if not api.from_json:
            raise UnsupportedError(f"hipdnn_frontend {api.version} is too old: Graph.from_json is missing "
                                   "(the harness hands hipDNN its JSON)")
        return api

    def installed(self) -> Support:
        """hipdnn_frontend imports; devices and events are available()'s business."""
        try:
            self._api()
        except UserError as exc:
            return Support(False, str(exc))
        return SUPPORTED

    def available(self) -> Support:
        try:
            api = self._api()
        except UserError as exc:
            return Support(False, str(exc))
        count = api.device_count()
        if count is None:
            if not os.path.exists("/dev/kfd"):
                return Support(False, "no AMD GPU (/dev/kfd missing)")
        elif count <= 0:
            return Support(False, "hipdnn_frontend sees no HIP device")
        if api.events is None:
            return Support(False, f"hipdnn_frontend {api.version} has no HIP event bindings to time with")
        return SUPPORTED

    def check(self, graph: Graph) -> Support:
        for i, node in enumerate(graph.nodes):
            if node.type not in HIPDNN_NODE_TYPES:
                return Support(False, f"node {i} ({node.name}): type {node.type!r} is not one hipDNN's JSON knows")
            reason = attention_support(node)
            if reason:
                return Support(False, f"node {i} ({node.name}): {reason}")
        for t in graph.tensors:
            if t.virtual or t.is_value:
                continue
            info = dtypes.DTYPES.get(t.data_type)
            if info is None or info.numpy is None:
                return Support(False, f"tensor {t.name} (uid {t.uid}): data type {t.data_type} has no host "
                                      "representation to fill or read back")
        return SUPPORTED

    def process_key(self, options: RunOptions) -> str:
        """Configurations with different keys cannot share a process (plugin paths are global; run
        --oracle's tuned twin leaves tuned winners in the process hipDNN would serve to later builds)."""
        paths = plugin_key(options.plugin_path)
        return (paths[0] if paths else "") + (" (tuned)" if options.extra.get("tuned") else "")

    def resolve_engine(self, graph: Graph, selector: str, options: RunOptions) -> Engine:
        """``--engine`` as a name, decimal id or 0x hex id, optionally ``prefer:``-prefixed."""
        return _engine_of(parse_engine(selector))

    def engines(self, graph: Graph, options: RunOptions) -> list[Engine]:
        """The engines hipDNN ranks as applicable to ``graph``, best first."""
        api = self._api()
        if not api.ranked_ids:
            return []
        configure_plugins(api, options.plugin_path)
        handle = _new_handle(api)
        try:
            g = _operation_graph(api, graph, hipdnn_json(graph)[0], handle)
            out = []
            for rank, eid in enumerate(int(e) for e in g.get_ranked_engine_ids()):
                name, detail = _engine_name(api, handle, eid)
                out.append(Engine(index=eid, name=name or engine_hex(eid),
                                  knobs={"engine_id": eid, "selection": FORCE, "rank": rank},
                                  detail=" ".join(x for x in (engine_hex(eid), detail) if x)))
            return out
        finally:
            _destroy_handle(api, handle)

    def prepare(self, graph: Graph, engine: Engine | None, options: RunOptions) -> HipdnnSession:
        api = self._api()
        if options.device:
            raise UnsupportedError("hipdnn_frontend has no device selection: run with "
                                   f"HIP_VISIBLE_DEVICES={options.device} and --device 0")
        if options.cuda_graph:
            raise UnsupportedError("--cuda-graph: hipdnn_frontend has no graph capture binding")
        configure_plugins(api, options.plugin_path)
        return HipdnnSession(api, graph, _request_of(engine), options)

    def versions(self) -> dict[str, str]:
        try:
            api = load_frontend()
        except ToolMissingError:
            return {}
        return {"hipdnn_frontend": api.version, "hipdnn_frontend_api": api.describe()}

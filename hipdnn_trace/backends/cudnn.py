"""The ``cudnn`` backend: a hipDNN graph run through NVIDIA's cuDNN frontend (Python).

``cudnn_graph.plan`` decides what the graph becomes; this module replays that plan
on a ``cudnn.pygraph``, lists and builds execution plans (engines), and runs them on
device buffers from cuda-bindings (no framework needed) with the cuDNN handle bound
to the session's own stream. Timing, L2 flush, staged timing and CUDA-graph replay
come from :mod:`hipdnn_trace.device.cuda`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from hipdnn_trace.backends import cudnn_graph, cudnn_plan_store, device_tensors, installed, plan_cache
from hipdnn_trace.backends.base import SUPPORTED, Engine, RunOptions, Support
from hipdnn_trace.backends.cudnn_graph import EnumValue, OutputDecl, Plan, TensorDecl
from hipdnn_trace.device import cuda
from hipdnn_trace.errors import ToolMissingError, UnsupportedError
from hipdnn_trace.graph import attention, layout, ragged
from hipdnn_trace.graph.dtypes import numpy_dtype
from hipdnn_trace.graph.model import Graph
from hipdnn_trace.validate.poison import POISON_BYTE

#: hipDNN's fp32 tolerances assume IEEE fp32 math. cuDNN and cuBLAS(Lt) read this before their
#: first use and then never use TF32 for fp32 operands; a user who sets it keeps their value.
TF32_ENV = "NVIDIA_TF32_OVERRIDE"
os.environ.setdefault(TF32_ENV, "0")


#: Numerical notes of engines that compute below the graph's float compute type: lower-precision
#: inputs or partial sums (seen on an H200: the heuristic wgrad plan for the fp16 ResNet stem missed
#: hipDNN's tolerance by 9.4 absolute); deselected for every graph whose compute type is float.
REDUCED_NOTES = ("DOWN_CONVERT_INPUTS", "REDUCED_PRECISION_REDUCTION")
#: For fp32 operands tensor cores mean TF32, which fails hipDNN's fp32 tolerances.
FP32_UNSAFE_NOTES = ("TENSOR_CORE", *REDUCED_NOTES)
HEURISTICS = ("A", "FALLBACK")


#: cuDNN versions up to this one crash (cudaErrorIllegalAddress at execute) on MoE GATHER, reproduced
#: outside the harness on an H100 with 9.19 (docs/nvidia.md); an illegal address poisons the CUDA context
#: of the whole process, so such graphs are refused before anything is built. Raise when a fixed cuDNN ships.
MOE_GATHER_CRASHES_UP_TO = 91900


def _refuse_known_crashes(plan: Plan, backend_version: int) -> None:
    for op in plan.ops:
        mode = op.attrs.get("mode")
        if (op.method == "moe_grouped_matmul" and getattr(mode, "member", None) == "GATHER"
                and backend_version <= MOE_GATHER_CRASHES_UP_TO):
            raise UnsupportedError(f"cuDNN {backend_version} crashes executing MoE GATHER ({op.node!r}: illegal "
                                   "address, which would poison this process's CUDA context); refused")


def notes_to_deselect(plan: Plan) -> tuple[str, ...]:
    if plan.fp32_math:
        return FP32_UNSAFE_NOTES
    if plan.compute in (None, "FLOAT", "DOUBLE"):
        return REDUCED_NOTES
    return ()


def _cudnn() -> Any:
    try:
        import cudnn
    except ImportError as exc:
        raise ToolMissingError(f"the cudnn backend needs nvidia-cudnn-frontend ({exc}); "
                               "pip install 'hipdnn-trace[nvidia]'") from None
    return cudnn


def _enum(cudnn: Any, value: EnumValue) -> Any:
    family = getattr(cudnn, value.family, None)
    if family is None:
        family = getattr(getattr(cudnn, "_pybind_module", None), value.family, None)
    member = getattr(family, value.member, None) if family is not None else None
    if member is None:
        raise UnsupportedError(f"this cuDNN frontend has no {value.family}.{value.member}")
    return member


def _plain(value: Any) -> Any:
    """Knob keys/values as JSON-friendly names and ints."""
    name = getattr(value, "name", None)
    if name is not None:
        return str(name)
    try:
        return int(value)
    except (TypeError, ValueError):
        return str(value)


def ragged_offsets(decl: TensorDecl, lengths: Any) -> np.ndarray:
    """The int32 ragged offsets of packed attention rows from the bound seq_len_q values."""
    if device_tensors.is_device_tensor(lengths):
        lengths = lengths.detach().cpu().numpy()
    assert decl.offsets_of is not None
    per_row, seq_q, token = decl.offsets_of
    lq = [int(x) for x in np.asarray(lengths).reshape(-1)[: decl.dims[0] - 1]]
    return np.asarray(attention.ragged_element_offsets(lq, per_row, seq_q, token), dtype=np.int32)


def _host_ints(value: Any) -> list[int]:
    if device_tensors.is_device_tensor(value):
        value = value.detach().cpu().numpy()
    return [int(x) for x in np.asarray(value).reshape(-1)]


def ragged_element_offsets(decl: TensorDecl, value: Any) -> np.ndarray:
    """An RFC 0014 offset tensor as the int32 element offsets cuDNN reads: values x multiplier."""
    assert decl.ragged_elements is not None
    elements = [v * decl.ragged_elements[0] for v in _host_ints(value)[: decl.dims[0]]]
    if max(elements, default=0) >= 2**31:
        raise UnsupportedError(f"{decl.name}: element offsets past 2^31 do not fit cuDNN's int32 ragged offsets")
    return np.asarray(elements, dtype=np.int32)


def ragged_lengths(decl: TensorDecl, value: Any) -> np.ndarray:
    """Per-sequence lengths (int32) from an RFC 0014 offset tensor, for cuDNN's padding mask."""
    assert decl.lengths_of is not None
    mult, token, _ = decl.lengths_of
    bounds = [v * mult // token for v in _host_ints(value)[: decl.dims[0] + 1]]
    return np.asarray(ragged.lengths(bounds), dtype=np.int32)


class BuiltGraph:
    """A plan replayed on a cudnn.pygraph, with its execution-plan list created."""

    def __init__(self, plan: Plan, handle: Any, *, deselect: bool = True) -> None:
        cudnn = _cudnn()
        self.plan = plan
        self.deselected = notes_to_deselect(plan) if deselect else ()
        dt = cudnn.data_type
        kwargs = {k: getattr(dt, v) for k, v in (("io_data_type", plan.io),
                                                  ("intermediate_data_type", plan.intermediate),
                                                  ("compute_data_type", plan.compute)) if v}
        g = cudnn.pygraph(handle=handle, **kwargs)
        made: dict[str, Any] = {}
        for t in plan.inputs:
            made[t.key] = g.tensor(name=t.name, dim=list(t.dims), stride=list(t.strides),
                                   data_type=getattr(dt, t.dtype), is_pass_by_value=t.is_scalar, uid=t.uid)
        for t in plan.inputs:   # packed attention rows (docs/hipdnn-format.md 3.10, ragged attention)
            if t.ragged_offset is not None:
                made[t.key].set_ragged_offset(made[t.ragged_offset])
        for op in plan.ops:
            kw: dict[str, Any] = {k: made[v] for k, v in op.tensors.items() if v is not None}
            for kwarg, key in op.output_kwargs.items():   # outputs the method takes as arguments
                decl = plan.output(key)
                made[key] = g.tensor(name=decl.name, dim=list(decl.dims), stride=list(decl.strides),
                                     data_type=getattr(dt, decl.dtype), uid=decl.uid).set_output(True)
                kw[kwarg] = made[key]
            kw.update({k: _enum(cudnn, v) if isinstance(v, EnumValue) else v for k, v in op.attrs.items()})
            if op.compute:
                kw["compute_data_type"] = getattr(dt, op.compute)
            try:
                result = getattr(g, op.method)(name=op.name, **kw)
            except (TypeError, AttributeError) as exc:
                raise UnsupportedError(f"cuDNN frontend rejected {op.method} for {op.node!r}: {exc}") from None
            results = list(result) if isinstance(result, (list, tuple)) else [result]
            for key, tensor in zip(op.outputs, results):
                if key is None or tensor is None:
                    continue
                decl = plan.output(key)
                tensor.set_dim(list(decl.dims)).set_stride(list(decl.strides)).set_data_type(getattr(dt, decl.dtype))
                if not decl.virtual:
                    tensor.set_output(True).set_uid(decl.uid)
                if decl.ragged_offset is not None:
                    tensor.set_ragged_offset(made[decl.ragged_offset])
                made[key] = tensor
        self.graph = g
        try:
            g.validate()
            g.build_operation_graph()
            g.create_execution_plans([getattr(cudnn.heur_mode, h) for h in HEURISTICS])
            if self.deselected:
                g.deselect_numeric_notes([getattr(cudnn.numerical_note, n) for n in self.deselected])
            g.check_support()
        except Exception as exc:   # cudnnGraphNotSupportedError and friends: the graph is not expressible
            raise UnsupportedError(f"cuDNN: {' '.join(str(exc).split())[:400]}") from None

    def count(self) -> int:
        return int(self.graph.get_execution_plan_count())

    def candidates_exist(self) -> bool:
        return self.count() > 0

    def describe(self, index: int) -> tuple[str, int | None, dict[str, Any]]:
        g = self.graph
        name = str(g.get_plan_name_at_index(index))
        try:
            engine_id, knobs = g.get_engine_and_knobs_at_index(index)
            knobs = {_plain(k): _plain(v) for k, v in dict(knobs or {}).items()}
        except Exception:  # a delegating entry has no (id, knobs)
            engine_id, knobs = None, {}
        return name, engine_id, knobs

    def build(self, index: int) -> Engine:
        """Build plan ``index`` and select it; raises when it cannot be built."""
        name, engine_id, knobs = self.describe(index)
        self.graph.build_plan_at_index(index)
        workspace = int(self.graph.get_workspace_size_plan_at_index(index))
        detail = f"engine_id={engine_id}" if engine_id is not None else ""
        return Engine(index=index, name=name, knobs={"engine_id": engine_id, **knobs}, workspace_bytes=workspace,
                      detail=detail)

    def candidates(self) -> tuple[list[Engine], list[str]]:
        """Every plan that builds (one Engine each) and why the others did not."""
        engines, skipped = [], []
        for index in range(self.count()):
            try:
                engines.append(self.build(index))
            except Exception as exc:  # a plan that does not build is not a candidate
                skipped.append(f"{index}: {' '.join(str(exc).split())[:160]}")
        return engines, skipped

    def select(self, engine: Engine | None) -> Engine:
        """Build the requested plan (matched by name, else engine id + knobs) or the first that builds."""
        count = self.count()
        if engine is None:
            errors = []
            for index in range(count):
                try:
                    return self.build(index)
                except Exception as exc:
                    errors.append(str(exc))
            raise UnsupportedError(f"cuDNN: none of {count} plans builds ({'; '.join(errors)[:300]})")
        for index in range(count):
            if self.describe(index)[0] == engine.name:
                return self.build(index)
        engine_id = engine.knobs.get("engine_id") if engine.knobs else None
        if engine_id is None:
            raise UnsupportedError(f"cuDNN: plan {engine.name!r} is not among this graph's plans")
        cudnn = _cudnn()
        knobs = {getattr(cudnn.knob_type, k): int(v) for k, v in engine.knobs.items() if k != "engine_id"}
        self.graph.create_execution_plan(int(engine_id), knobs)
        return self.build(self.count() - 1)


def build_graph(plan: Plan, handle: Any) -> BuiltGraph:
    """The plan on a pygraph, first without engines whose numerical notes fall below the graph's
    compute type (see ``notes_to_deselect``), then -- if none is left -- with every engine; for
    fp32 that still keeps TF32 off through NVIDIA_TF32_OVERRIDE=0."""
    try:
        return BuiltGraph(plan, handle)
    except UnsupportedError:
        if not notes_to_deselect(plan):
            raise
    try:
        built = BuiltGraph(plan, handle, deselect=False)
    except UnsupportedError as exc:
        if plan.fp32_math:
            raise UnsupportedError(f"no cuDNN engine runs this fp32 graph without TF32 ({TF32_ENV}=0, tensor-core "
                                   f"engines deselected); {exc}") from None
        raise
    if not built.candidates_exist():
        raise UnsupportedError("cuDNN: no execution plan for this graph")
    return built


class CudnnSession:
    """Device buffers, a stream and a built plan for one graph."""

    def __init__(self, graph: Graph, plan: Plan, engine: Engine | None, options: RunOptions) -> None:
        cudnn = _cudnn()
        self.graph = graph
        self.plan = plan
        self.options = options
        self._buffers: dict[str, cuda.DeviceBuffer] = {}
        self._host_scalars: dict[str, np.ndarray] = {}
        self._elements: dict[str, list[int]] = {}   # RFC 0014 offset key -> element offsets, set at bind
        self._cuda_graph: cuda.CudaGraph | None = None
        self._flush: cuda.L2Flush | None = None
        self.workspace: cuda.DeviceBuffer | None = None
        cuda.set_device(options.device)
        self.stream = cuda.Stream()
        self.handle = _take_handle(cudnn, options.device)
        cudnn.set_stream(self.handle, self.stream.handle)
        try:
            self.built, self.engine = self._plan(cudnn, engine)
            self._allocate()
            self.timer = cuda.make_timer(self.stream.handle, options.timing, options.device)
            if options.cache == "cold":
                self._flush = cuda.L2Flush(options.device)
        except BaseException:
            self.close()
            raise

    def _plan(self, cudnn: Any, engine: Engine | None) -> tuple[Any, Engine]:
        """The execution plan: restored from the plan cache when a verified entry is there, else built
        (and stored). ``plan_source`` and ``plan_cache_note`` say which, for run.json."""
        cache = self.options.extra.get(plan_cache.OPTION)
        self.plan_source, self.plan_cache_note = "built", None
        key = None
        if isinstance(cache, plan_cache.PlanCache):
            key = cudnn_plan_store.plan_key(cudnn, self.plan, engine, notes_to_deselect(self.plan), self.options.device)
            found = cudnn_plan_store.restore(cudnn, cache, key, self.handle)
            if isinstance(found, tuple):
                self.plan_source = "cache"
                return found
            self.plan_cache_note = found
            refused = cudnn_plan_store.remembered_failure(cache, key)
            if refused is not None:
                raise UnsupportedError(refused)
        try:
            built = build_graph(self.plan, self.handle)
            chosen = built.select(engine)
        except UnsupportedError as exc:
            if key is not None:
                cudnn_plan_store.remember_failure(cache, key, exc)
            raise
        if key is not None:
            note = cudnn_plan_store.store(cache, key, built.graph, chosen, built.deselected)
            self.plan_cache_note = self.plan_cache_note or note
        return built, chosen

    # ----------------------------------------------------------------- buffers

    def _nbytes(self, decl: TensorDecl | OutputDecl) -> int:
        if isinstance(decl, TensorDecl) and (decl.offsets_of or decl.ragged_elements or decl.lengths_of):
            return decl.dims[0] * 4   # int32 ragged offsets or lengths, computed at bind
        if decl.hipdnn_uid is not None and decl.hipdnn_uid in self.graph.by_uid:
            t = self.graph.by_uid[decl.hipdnn_uid]
            cast = getattr(decl, "cast", None)
            return t.storage_elements * numpy_dtype(cast or t.data_type).itemsize
        return layout.storage_elements(decl.dims, decl.strides) * 4   # synthesized: float32

    def _allocate(self) -> None:
        for decl in self.plan.buffers:
            self._buffers[decl.key] = cuda.DeviceBuffer(self._nbytes(decl))
            if isinstance(decl, TensorDecl) and decl.fill is not None:
                count = layout.storage_elements(decl.dims, decl.strides)
                dtype = numpy_dtype({v: k for k, v in cudnn_graph.DTYPES.items()}[decl.dtype])
                self._buffers[decl.key].upload(np.full(count, decl.fill, dtype=dtype))
        for decl in self.plan.inputs:
            if decl.is_scalar:
                value = 0.0 if decl.by_value is None else decl.by_value
                kind = np.int64 if decl.dtype == "INT64" else np.int32 if decl.dtype == "INT32" else np.float32
                self._host_scalars[decl.key] = np.array([value], dtype=kind)
        self.workspace = cuda.DeviceBuffer(self.engine.workspace_bytes or 0)
        self.variant_pack = {decl.uid: self._buffers[decl.key].ptr for decl in self.plan.buffers}
        self.variant_pack.update({d.uid: int(self._host_scalars[d.key].ctypes.data)
                                  for d in self.plan.inputs if d.is_scalar})

    def _bind_offsets(self, tensors: Mapping[int, np.ndarray]) -> None:
        """RFC 0014 offset tensors (element offsets, kept for packing) and the lengths derived from them."""
        self._elements.clear()
        for decl in self.plan.inputs:
            if decl.ragged_elements is not None:
                offsets = ragged_element_offsets(decl, tensors[decl.hipdnn_uid])   # type: ignore[index]
                self._elements[decl.key] = offsets.tolist()
                self._buffers[decl.key].upload(offsets)
            elif decl.lengths_of is not None:
                self._buffers[decl.key].upload(ragged_lengths(decl, tensors[decl.hipdnn_uid]))   # type: ignore[index]

    def _bounds(self, decl: TensorDecl | OutputDecl, t: Any) -> list[int] | None:
        """Token boundaries of a ragged (RFC 0014) tensor from its bound offsets; None when it is not one."""
        elements = self._elements.get(decl.ragged_offset or "")
        return None if elements is None else [e // ragged.token_stride(t) for e in elements]

    def _upload_ragged(self, decl: TensorDecl, t: Any, value: Any, bounds: list[int]) -> None:
        """A ragged tensor's logical array packed as its offsets say (graph/ragged.py) and uploaded."""
        if device_tensors.is_device_tensor(value):
            import torch

            flat = torch.zeros(t.storage_elements, dtype=value.dtype, device=value.device)
            ragged.pack(value, t, bounds, flat)
            self._buffers[decl.key].copy_from_device(flat.data_ptr(), flat.numel() * flat.element_size())
            return
        array = np.asarray(value).astype(numpy_dtype(t.data_type), copy=False)
        self._buffers[decl.key].upload(ragged.pack(array, t, bounds, np.zeros(t.storage_elements, array.dtype)))

    def bind(self, tensors: Mapping[int, np.ndarray]) -> None:
        self._bind_offsets(tensors)
        for decl in self.plan.inputs:
            if decl.hipdnn_uid is None or decl.fill is not None or decl.ragged_elements or decl.lengths_of:
                continue
            t = self.graph.by_uid[decl.hipdnn_uid]
            if decl.by_value_from_input:
                self._host_scalars[decl.key][0] = device_tensors.scalar_of(tensors[t.uid])
                continue
            if decl.is_scalar:
                continue
            value = tensors[t.uid]
            if decl.offsets_of is not None:
                self._buffers[decl.key].upload(ragged_offsets(decl, value))
                continue
            kind = decl.cast or t.data_type     # the type cuDNN reads (a sink token: float)
            bounds = self._bounds(decl, t)
            if bounds is not None:
                self._upload_ragged(decl, t, value, bounds)
                continue
            if device_tensors.is_device_tensor(value):   # made on the GPU: laid out and copied there
                if decl.cast is not None:
                    from hipdnn_trace.backends.torch_ops import TORCH_DTYPES

                    value = value.to(TORCH_DTYPES[decl.cast])
                flat = device_tensors.pack_on_device(value, t.strides)
                self._buffers[decl.key].copy_from_device(flat.data_ptr(), flat.numel() * flat.element_size())
                continue
            array = np.asarray(value).astype(numpy_dtype(kind), copy=False)
            self._buffers[decl.key].upload(layout.pack(array, t.strides))
        for decl in self.plan.outputs:
            if not decl.virtual:
                self._buffers[decl.key].fill(POISON_BYTE, self.stream.handle)
        self.stream.synchronize()
        if self.options.cuda_graph and self._cuda_graph is None:
            self._cuda_graph = cuda.CudaGraph(self.stream.handle, self._enqueue)

    # ----------------------------------------------------------------- running

    def _enqueue(self) -> None:
        self.built.graph.execute(self.variant_pack, self.workspace.ptr if self.workspace else 0, handle=self.handle)

    def execute(self) -> None:
        if self._cuda_graph is not None:
            self._cuda_graph.launch()
        else:
            self._enqueue()

    def synchronize(self) -> None:
        self.stream.synchronize()

    def prepare_iteration(self) -> None:
        if self._flush is not None:
            self._flush.flush(self.stream.handle)

    def fetch(self, uids: Iterable[int]) -> dict[int, np.ndarray]:
        self.stream.synchronize()
        by_uid = {d.hipdnn_uid: d for d in self.plan.outputs if d.hipdnn_uid is not None and not d.virtual}
        out = {}
        for uid in uids:
            t = self.graph.by_uid[uid]
            dtype = numpy_dtype(t.data_type)
            flat = self._buffers[by_uid[uid].key].download(dtype, t.storage_elements)
            bounds = self._bounds(by_uid[uid], t)
            if bounds is not None:   # packed (RFC 0014): each sequence's rows, the rest 0 (not compared)
                out[uid] = ragged.unpack(flat, t, bounds, np.zeros(t.dims, dtype))
                continue
            out[uid] = np.array(layout.view(flat, t.dims, t.strides))
        return out

    def fetch_device(self, uids: Iterable[int]) -> dict[int, Any]:
        """Outputs as torch tensors on this session's GPU (logical dims, the tensors' own types),
        copied device to device: a device validator judges them without a host copy."""
        import torch

        from hipdnn_trace.backends.torch_ops import TORCH_DTYPES

        self.stream.synchronize()
        by_uid = {d.hipdnn_uid: d for d in self.plan.outputs if d.hipdnn_uid is not None and not d.virtual}
        out = {}
        for uid in uids:
            t = self.graph.by_uid[uid]
            flat = torch.empty(t.storage_elements, dtype=TORCH_DTYPES[t.data_type],
                               device=f"cuda:{torch.cuda.current_device()}")
            self._buffers[by_uid[uid].key].copy_to_device(flat.data_ptr(), flat.numel() * flat.element_size())
            bounds = self._bounds(by_uid[uid], t)
            out[uid] = device_tensors.logical_view(flat, t.dims, t.strides) if bounds is None else \
                ragged.unpack(flat, t, bounds, torch.zeros(tuple(t.dims), dtype=flat.dtype, device=flat.device))
        return out

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {**cuda.timer_info(self.timer), "device": cuda.device_info(self.options.device).name,
                               "plan": self.engine.name, "plan_index": self.engine.index,
                               "engine_id": (self.engine.knobs or {}).get("engine_id"),
                               "workspace_bytes": self.engine.workspace_bytes, "cache": self.options.cache,
                               "cuda_graph": self._cuda_graph is not None, "stream": "own non-blocking stream",
                               "plan_source": self.plan_source}
        if self.plan_cache_note:
            out["plan_cache_note"] = self.plan_cache_note
        if self._cuda_graph is not None:
            out["cuda_graph_nodes"] = self._cuda_graph.nodes
        if self._flush is not None:
            out["l2_flush"] = self._flush.info()
        wanted = notes_to_deselect(self.plan)
        if wanted:
            out["numerical_notes_deselected"] = list(self.built.deselected) or \
                f"none: no engine left without {', '.join(wanted)}, all engines allowed"
        if self.plan.fp32_math:
            out["fp32_math"] = f"{TF32_ENV}={os.environ.get(TF32_ENV)}"
        if self.plan.notes:
            out["translation"] = list(self.plan.notes)
        return out

    def close(self) -> None:
        for closer in (self._cuda_graph, self._flush, getattr(self, "timer", None)):
            if closer is not None:
                closer.close()
        self._cuda_graph = self._flush = None
        for buf in self._buffers.values():
            buf.free()
        self._buffers.clear()
        if self.workspace is not None:
            self.workspace.free()
            self.workspace = None
        if getattr(self, "built", None) is not None:
            self.built = None
        if self.handle is not None:
            _give_back(self.options.device, self.handle)
            self.handle = None
        self.stream.destroy()


#: device -> cuDNN handles no open session holds. Creating one cost 1.6 ms a graph (an H100); a handle carries no
#: graph's state but its stream, which each session sets, and sessions open at once (an interleaved A/B) each
#: hold their own. They live as long as the process.
_IDLE_HANDLES: dict[int, list[Any]] = {}


def _take_handle(cudnn: Any, device: int) -> Any:
    """An idle handle of ``device`` (the current device), or a new one."""
    idle = _IDLE_HANDLES.get(device)
    return idle.pop() if idle else cudnn.create_handle()


def _give_back(device: int, handle: Any) -> None:
    """``handle`` idle again, for the next session of ``device`` (which sets its own stream on it)."""
    _IDLE_HANDLES.setdefault(device, []).append(handle)


class CudnnBackend:
    name = "cudnn"
    vendor = "nvidia"
    #: run --oracle's tuned plan: the fastest of the plans ``engines`` lists that builds (bench/oracle.py)
    oracle_tuning = "autotune"
    #: built plans go to the plan cache and come back from it (backends/cudnn_plan_store.py)
    caches_plans = True
    #: what a worker's fork server imports before it forks children (no device context is made)
    preload = ("cudnn", "torch", "torch.nn.functional")

    def __init__(self) -> None:
        self._listing: dict[tuple[str, int], tuple[list[Engine], list[str]]] = {}

    def available(self) -> Support:
        try:
            _cudnn()
        except ToolMissingError as exc:
            return Support(False, str(exc))
        if cuda.device_count() < 1:
            return Support(False, "no CUDA device visible")
        return SUPPORTED

    def installed(self) -> Support:
        """The frontend is on the path (found, not imported: the parent of isolated children stays
        light; a child that cannot import it says why on the graph's row)."""
        if not installed.present("cudnn"):
            return Support(False, "the cudnn backend needs nvidia-cudnn-frontend; pip install 'hipdnn-trace[nvidia]'")
        return SUPPORTED

    def check(self, graph: Graph) -> Support:
        try:
            cudnn_graph.plan(graph)
        except UnsupportedError as exc:
            return Support(False, str(exc))
        return SUPPORTED

    def _plan(self, graph: Graph) -> Plan:
        return cudnn_graph.plan(graph)

    def engines(self, graph: Graph, options: RunOptions) -> list[Engine]:
        """Every execution plan of heuristics A + FALLBACK that builds, in heuristic order."""
        key = (graph.graph_id, options.device)
        if key not in self._listing:
            cudnn = _cudnn()
            cuda.set_device(options.device)
            handle = cudnn.create_handle()
            try:
                self._listing[key] = build_graph(self._plan(graph), handle).candidates()
            finally:
                cudnn.destroy_handle(handle)
        return list(self._listing[key][0])

    def warm_up(self, options: RunOptions) -> None:
        """The CUDA context and cuDNN's libraries, loaded by the first handle (about a second),
        and torch's device state, which the device data of every graph uses."""
        cudnn = _cudnn()
        cuda.set_device(options.device)
        _give_back(options.device, cudnn.create_handle())   # the first session's handle, made here
        device_tensors.warm_torch_device(options.device)

    def prepare(self, graph: Graph, engine: Engine | None, options: RunOptions) -> CudnnSession:
        plan = self._plan(graph)
        _refuse_known_crashes(plan, _cudnn().backend_version())
        return CudnnSession(graph, plan, engine, options)

    def known_refusal(self, graph: Graph, engine: Engine | None, options: RunOptions) -> str | None:
        """What ``prepare`` would raise without building anything, or None: a cuDNN known to crash on
        the graph, or a refusal the plan cache remembers for its plan (and no plan stored beside it, which
        a session would restore first). ``run`` asks before it makes inputs and the reference, which a
        refused row never reads (8 graphs/perf rows: 1.2 s of inputs and 0.7 s of reference on an H100)."""
        cudnn = _cudnn()
        plan = self._plan(graph)
        try:
            _refuse_known_crashes(plan, cudnn.backend_version())
        except UnsupportedError as exc:
            return str(exc)
        cache = options.extra.get(plan_cache.OPTION)
        if not isinstance(cache, plan_cache.PlanCache):
            return None
        key = cudnn_plan_store.plan_key(cudnn, plan, engine, notes_to_deselect(plan), options.device)
        refused = cudnn_plan_store.remembered_failure(cache, key)
        if refused is None or cache.has(key):
            return None
        return refused

    def package_versions(self) -> dict[str, str]:
        """The installed distributions' versions, nothing imported (the parent of isolated children)."""
        return installed.dist_versions(("cuda-bindings", "nvidia-cudnn-frontend"))

    def versions(self) -> dict[str, str]:
        """Library versions as loaded (the cuDNN library's own); creates no CUDA context."""
        cudnn = _cudnn()
        return {"cudnn_frontend": str(getattr(cudnn, "__version__", "?")),
                "cudnn": str(cudnn.backend_version_string()), **self.package_versions()}

    def gpu_info(self, device: int = 0) -> dict[str, Any] | None:
        """From NVML: asking CUDA here would create a context in the suite process."""
        from hipdnn_trace.device.nvml import gpu_info

        return gpu_info(device)

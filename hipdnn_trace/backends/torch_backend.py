"""The ``torch`` backend: eager PyTorch on a GPU (CUDA or ROCm build, same code) or the CPU.

A baseline row: what a framework user gets for the same graph. Node semantics live
in :mod:`.torch_ops`; this module binds inputs in the graph's own strides (so
kernels see NHWC as NHWC), runs the nodes in order on the session's stream, and
times them with device events (cuda-bindings events and staged timing on NVIDIA,
torch events elsewhere). TF32 and reduced-precision reductions are switched off:
hipDNN's fp32 and fp16 tolerances assume neither.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from hipdnn_trace.backends import device_tensors, installed
from hipdnn_trace.backends.base import SUPPORTED, Engine, RunOptions, SecondOpinion, Support
from hipdnn_trace.backends.torch_tuning import enable_tuning
from hipdnn_trace.device.timers import HostTimer
from hipdnn_trace.errors import ToolMissingError, UnsupportedError
from hipdnn_trace.graph import layout
from hipdnn_trace.graph.attention import SDPA as SDPA_NODE
from hipdnn_trace.graph.dtypes import numpy_dtype
from hipdnn_trace.graph.load import execution_order
from hipdnn_trace.graph.model import Graph, Tensor


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise ToolMissingError("the torch backend needs PyTorch (pip install 'hipdnn-trace[torch]')") from None
    return torch


def _ops() -> Any:
    from hipdnn_trace.backends import torch_ops

    return torch_ops


def gpu_vendor() -> str | None:
    """"nvidia" / "amd" when torch is a GPU build and such a device node exists, else None.

    Decided from the build and /dev without calling into CUDA/HIP: the suite process
    asks before it starts isolated workers, and must not hold a device context then.
    """
    build = installed.torch_build()   # read, not imported: the parent of workers stays light
    if build is None:
        try:
            torch = _torch()
        except ToolMissingError:
            return None
        build = installed.TorchBuild(torch.__version__, getattr(torch.version, "cuda", None),
                                     getattr(torch.version, "hip", None))
    if build.hip:
        return "amd" if os.path.exists("/dev/kfd") else None
    if build.cuda:
        return "nvidia" if glob.glob("/dev/nvidia[0-9]*") else None
    return None


def strict_math() -> dict[str, Any]:
    """Switch off TF32 and reduced-precision reductions; returns what was set, for run.json."""
    torch = _torch()
    settings = {"torch.backends.cuda.matmul.allow_tf32": False, "torch.backends.cudnn.allow_tf32": False,
                "allow_fp16_reduced_precision_reduction": False, "allow_bf16_reduced_precision_reduction": False}
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    matmul = torch.backends.cuda.matmul
    for name in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        if hasattr(matmul, name):
            setattr(matmul, name, False)
    return settings


def to_torch(array: np.ndarray, t: Tensor, device: Any) -> Any:
    """A logical array -> a device tensor laid out by the graph's strides."""
    torch = _torch()
    ops = _ops()
    dtype = ops.TORCH_DTYPES[t.data_type]
    if device_tensors.is_device_tensor(array):   # made on the device already: laid out there
        flat = device_tensors.pack_on_device(array.to(device=device, dtype=dtype), t.strides)
        return torch.as_strided(flat, tuple(t.dims), tuple(t.strides))
    flat = layout.pack(np.asarray(array).astype(numpy_dtype(t.data_type), copy=False), t.strides)
    if flat.dtype.kind == "V" or flat.dtype.name in ("bfloat16",) or flat.dtype.name.startswith(("float8", "float4")):
        host = torch.from_numpy(flat.view(np.int16 if flat.itemsize == 2 else np.uint8)).view(dtype)
    else:
        host = torch.from_numpy(flat)
    return torch.as_strided(host.to(device), tuple(t.dims), tuple(t.strides))


def to_numpy(tensor: Any, t: Tensor) -> np.ndarray:
    """A device tensor -> a logical host array in the tensor's hipDNN dtype."""
    torch = _torch()
    want = numpy_dtype(t.data_type)
    host = tensor.detach().to("cpu").contiguous()
    if t.data_type == "fp4_e2m1":   # one e2m1 code per byte (ops.TORCH_DTYPES)
        return host.numpy().view(want).reshape(tuple(t.dims))
    if host.dtype in (torch.bfloat16,) or "float8" in str(host.dtype):
        raw = host.view(torch.int16 if host.element_size() == 2 else torch.uint8).numpy()
        return raw.view(want).reshape(tuple(t.dims))
    return host.numpy().astype(want, copy=False).reshape(tuple(t.dims))


class TorchEventTimer:
    """torch.cuda.Event pairs on the session stream (works on ROCm builds too)."""

    kind = "torch-event"
    fallback_reason: str | None = None

    def __init__(self, stream: Any) -> None:
        torch = _torch()
        self.stream = stream
        self._start = torch.cuda.Event(enable_timing=True)
        self._stop = torch.cuda.Event(enable_timing=True)

    def start(self) -> None:
        self._start.record(self.stream)

    def stop(self) -> None:
        self._stop.record(self.stream)

    def elapsed_ms(self) -> float:
        return float(self._start.elapsed_time(self._stop))

    def close(self) -> None:
        pass


class TorchSession:
    engine: Engine | None = None

    def __init__(self, graph: Graph, options: RunOptions, device: Any) -> None:
        torch = self._torch = _torch()   # kept: execute() is timed and must not re-import
        ops = _ops()
        self.graph = graph
        self.options = options
        self.device = device
        self.gpu = device.type == "cuda"
        self.tuning: dict[str, Any] | None = None   # run --oracle's tuned twin: what was switched on
        self._bound: dict[int, Any] = {}
        self._results: dict[int, Any] = {}
        self._cuda_graph: Any = None
        self._flush: Any = None
        self.math = strict_math() if self.gpu else {}
        self.steps = []
        for index in execution_order(graph):
            node = graph.nodes[index]
            ins = list(graph.reads(node).items())   # ragged offsets too (Graph.reads)
            self.steps.append((node, ops.OPS[node.type], ins, dict(node.outputs)))
        self.ctx = ops.Ctx(graph, device, {t.uid: float(t.value) for t in graph.value_tensors
                                           if isinstance(t.value, (int, float))})
        self.ctx.sdpa_backend = str((options.extra or {}).get("torch_sdpa_backend", "default"))
        if self.gpu:
            self.stream = torch.cuda.Stream(device=device)
            self.timer = self._gpu_timer()
            if options.cache == "cold":
                self._flush = self._l2_flush()
                self._flush_value = 0
        else:
            self.stream = None
            self.timer = HostTimer()
            if options.timing == "staged":
                self.timer_note = "staged timing needs a GPU; the CPU is timed with the host clock"

    def _l2_flush(self) -> Any:
        """A cudaMemsetAsync flush on NVIDIA (no kernel: invisible to CUPTI and ncu), else a fill_ kernel."""
        torch = _torch()
        if gpu_vendor() == "nvidia":
            try:
                from hipdnn_trace.device import cuda

                return cuda.L2Flush(self.device.index or 0)
            except ToolMissingError:
                pass
        l2 = int(getattr(torch.cuda.get_device_properties(self.device), "L2_cache_size", 0) or (64 << 20))
        return torch.empty(2 * l2, dtype=torch.uint8, device=self.device)

    def _gpu_timer(self) -> Any:
        handle = int(self.stream.cuda_stream)
        if gpu_vendor() == "nvidia":
            try:
                from hipdnn_trace.device import cuda

                cuda.rt()
                return cuda.make_timer(handle, self.options.timing, self.device.index or 0)
            except ToolMissingError:
                pass
        timer = TorchEventTimer(self.stream)
        if self.options.timing == "staged":
            timer.fallback_reason = "staged timing needs cuda-bindings on an NVIDIA GPU; torch events used"
        return timer

    # ----------------------------------------------------------------- data

    def bind(self, tensors: Mapping[int, np.ndarray]) -> None:
        torch = _torch()
        for t in self.graph.input_tensors:
            self._bound[t.uid] = to_torch(tensors[t.uid], t, self.device)
            if t.numel == 1:
                self.ctx.scalars[t.uid] = device_tensors.scalar_of(tensors[t.uid])
        for t in self.graph.value_tensors:
            if isinstance(t.value, (int, float)):
                self._bound[t.uid] = torch.full(tuple(t.dims), float(t.value), dtype=torch.float32,
                                                device=self.device)
        if self.gpu:
            torch.cuda.synchronize(self.device)
            if self.options.cuda_graph and self._cuda_graph is None:
                self._capture()

    def _capture(self) -> None:
        torch = _torch()
        with torch.cuda.stream(self.stream):
            self._run()          # warm-up outside capture (lazy init, cuBLAS workspaces)
        self.stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=self.stream):
            self._run()
        self._cuda_graph = graph

    def _run(self) -> None:
        values = dict(self._bound)
        graph, ctx = self.graph, self.ctx
        for node, fn, ins, outs in self.steps:
            x = {p: values[u] for p, u in ins}
            for port, tensor in fn(node, graph, x, ctx).items():
                values[outs[port]] = tensor
        self._results = values

    def execute(self) -> None:
        if not self.gpu:
            self._run()
            return
        with self._torch.cuda.stream(self.stream):
            if self._cuda_graph is not None:
                self._cuda_graph.replay()
            else:
                self._run()

    def synchronize(self) -> None:
        if self.stream is not None:
            self.stream.synchronize()

    def prepare_iteration(self) -> None:
        if self._flush is None:
            return
        if hasattr(self._flush, "flush"):
            self._flush.flush(int(self.stream.cuda_stream))
            return
        torch = _torch()
        self._flush_value = (self._flush_value + 1) & 0xFF
        with torch.cuda.stream(self.stream):
            self._flush.fill_(self._flush_value)

    def fetch(self, uids: Iterable[int]) -> dict[int, np.ndarray]:
        self.synchronize()
        out = {}
        for uid in uids:
            if uid not in self._results:
                raise RuntimeError(f"tensor {self.graph.by_uid[uid].name!r} was not produced")
            out[uid] = to_numpy(self._results[uid], self.graph.by_uid[uid])
        return out

    def fetch_device(self, uids: Iterable[int]) -> dict[int, Any]:
        """Outputs as the torch tensors the ops produced (on the session's device, logical dims,
        the tensors' own types): a device validator judges them without a host copy."""
        self.synchronize()
        out = {}
        for uid in uids:
            if uid not in self._results:
                raise RuntimeError(f"tensor {self.graph.by_uid[uid].name!r} was not produced")
            t = self.graph.by_uid[uid]
            out[uid] = self._results[uid].detach().to(_ops().TORCH_DTYPES[t.data_type]).reshape(tuple(t.dims))
        return out

    def info(self) -> dict[str, Any]:
        torch = _torch()
        out: dict[str, Any] = {"timer": getattr(self.timer, "kind", "host"), "torch": torch.__version__,
                               "device": torch.cuda.get_device_name(self.device) if self.gpu else "cpu",
                               "outputs": "tensors returned by torch ops (no preallocated, poisoned buffers)",
                               "cache": self.options.cache, "cuda_graph": self._cuda_graph is not None}
        reason = getattr(self.timer, "fallback_reason", None) or getattr(self, "timer_note", None)
        if reason:
            out["timing_fallback"] = reason
        if self.math:
            out["math"] = self.math
        if any(n.type.startswith("Sdpa") for n in self.graph.nodes):
            out["sdpa_backend"] = self.ctx.sdpa_backend
        if self._flush is not None:
            out["l2_flush"] = self._flush.info() if hasattr(self._flush, "info") else \
                {"flush_bytes": int(self._flush.numel()), "flush": "torch fill_"}
        if not self.gpu:
            out["precision"] = "half/bfloat16 conv and matmul operands widened to float32 on the CPU"
        if self.tuning is not None:
            out["tuning"] = self.tuning
        return out

    def close(self) -> None:
        close = getattr(self.timer, "close", None)
        if close is not None:
            close()
        self._bound.clear()
        self._results.clear()
        self._cuda_graph = None
        if hasattr(self._flush, "close"):
            self._flush.close()
        self._flush = None


class TorchBackend:
    name = "torch"
    #: run --oracle's tuned plan: cudnn.benchmark and TunableOp, in a process of its own (torch_tuning.py)
    oracle_tuning = "backend"
    #: what a worker's fork server imports before it forks children (no device context is made)
    preload = ("torch", "torch.nn.functional")

    @property
    def vendor(self) -> str | None:
        return gpu_vendor()

    def available(self) -> Support:
        try:
            _torch()
        except ToolMissingError as exc:
            return Support(False, str(exc))
        return SUPPORTED

    def installed(self) -> Support:
        """torch is on the path (found, not imported: importing it is the workers' job)."""
        if not installed.present("torch"):
            return Support(False, "the torch backend needs PyTorch (pip install 'hipdnn-trace[torch]')")
        return SUPPORTED

    def check(self, graph: Graph) -> Support:
        try:
            reason = _ops().check(graph)
        except ToolMissingError as exc:
            return Support(False, str(exc))
        return Support(False, reason) if reason else SUPPORTED

    def engines(self, graph: Graph, options: RunOptions) -> list[Engine]:
        return []

    def second_opinion(self, graph: Graph, options: RunOptions) -> SecondOpinion | None:
        """The recheck's other kernel (bench/recheck.py): torch's math SDPA kernel, for a graph with a forward
        SDPA that ran on a GPU kernel; None otherwise (on the CPU every SDPA is the math path already)."""
        chosen = str((options.extra or {}).get("torch_sdpa_backend", "default"))
        if chosen == "math" or self.device(options).type == "cpu":
            return None
        if not any(n.type == SDPA_NODE for n in graph.nodes):
            return None
        return SecondOpinion("torch's math SDPA kernel", None,
                             replace(options, extra={**(options.extra or {}), "torch_sdpa_backend": "math"}))

    def device(self, options: RunOptions) -> Any:
        torch = _torch()
        wanted = options.extra.get("torch_device") if options.extra else None
        if wanted:
            return torch.device(wanted)
        return torch.device("cuda", options.device) if torch.cuda.is_available() else torch.device("cpu")

    def warm_up(self, options: RunOptions) -> None:
        """torch's device state (context, allocator, cuBLAS), lazily made on a GPU's first use."""
        device = self.device(options)
        if device.type == "cuda":
            device_tensors.warm_torch_device(device.index or 0)

    def prepare(self, graph: Graph, engine: Engine | None, options: RunOptions) -> TorchSession:
        support = self.check(graph)
        if not support:
            raise UnsupportedError(support.reason)
        if engine is not None:
            raise UnsupportedError("the torch backend has no engines to choose from")
        if options.plugin_path:
            raise UnsupportedError("the torch backend takes no plugin path")
        session = TorchSession(graph, options, self.device(options))
        if options.extra.get("tuned"):
            session.tuning = enable_tuning(_torch(), graph, session.gpu)
        return session

    def process_key(self, options: RunOptions) -> str | None:
        """The tuned twin of run --oracle needs a process of its own (its switches are process-wide)."""
        return "tuned" if options.extra.get("tuned") else None

    def package_versions(self) -> dict[str, str]:
        """torch's version and toolkit from its build file, nothing imported (the parent of workers)."""
        build = installed.torch_build()
        if build is None:
            return {}
        found = {"torch": build.version, "torch_cuda": build.cuda, "torch_hip": build.hip}
        return {k: v for k, v in found.items() if v}

    def versions(self) -> dict[str, str]:
        torch = _torch()
        out = {"torch": torch.__version__}
        if getattr(torch.version, "cuda", None):
            out["torch_cuda"] = str(torch.version.cuda)
        if getattr(torch.version, "hip", None):
            out["torch_hip"] = str(torch.version.hip)
        try:
            if torch.backends.cudnn.is_available():
                out["torch_cudnn"] = str(torch.backends.cudnn.version())
        except Exception:  # versions never stop a run
            pass
        return out

    def gpu_info(self, device: int = 0) -> dict[str, Any] | None:
        """NVIDIA: from NVML (no CUDA context in the suite process); other GPUs: not recorded here."""
        if gpu_vendor() != "nvidia":
            return None
        from hipdnn_trace.device.nvml import gpu_info

        return gpu_info(device)

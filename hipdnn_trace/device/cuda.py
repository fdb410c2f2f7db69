"""CUDA plumbing through cuda-bindings: buffers, streams, event timers, staged timing,
L2 flush and CUDA-graph capture.

Backends use these so a GPU session needs no framework (the cuDNN backend runs on
cuda-bindings alone). Every call's status is checked: a CUDA error becomes
:class:`CudaError` with the call's name, never a silently wrong number.

Timing method (docs/nvidia.md): one CUDA event before and one after the enqueued
work, on the session's stream; elapsed time read after the harness synchronizes.
``staged`` timing additionally holds the stream on a host-released 32-bit flag
(``cuStreamWaitValue32`` on mapped pinned memory) while the work is enqueued, so
the start event fires only once every launch is queued: host launch gaps stay out
of the measured time. Where stream memory operations are unavailable the timer
falls back to plain events and says why (``fallback_reason``).
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from hipdnn_trace.errors import ExecutionError, ToolMissingError


class CudaError(ExecutionError):
    """A CUDA runtime or driver call failed."""


@cache
def _modules() -> tuple[Any, Any]:
    try:
        from cuda.bindings import driver, runtime
    except ImportError:
        raise ToolMissingError("NVIDIA GPU support needs the python package cuda-bindings "
                               "(pip install 'hipdnn-trace[nvidia]')") from None
    return runtime, driver


def rt() -> Any:
    return _modules()[0]


def drv() -> Any:
    return _modules()[1]


def _status_ok(status: Any) -> bool:
    return int(status) == 0


def check(result: Any, what: str) -> Any:
    """Unpack a cuda-bindings result tuple, raising CudaError on a failed status."""
    if isinstance(result, tuple):
        status, rest = result[0], result[1:]
    else:
        status, rest = result, ()
    if not _status_ok(status):
        name = getattr(status, "name", str(status))
        raise CudaError(f"{what} failed: {name}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


def as_int(handle: Any) -> int:
    """A CUDA handle object (stream, pointer) as the integer cuda-bindings also accepts."""
    if isinstance(handle, int):
        return handle
    try:
        return int(handle)
    except TypeError:
        return int(handle.getPtr())


# --------------------------------------------------------------------------- device

@dataclass(frozen=True)
class DeviceInfo:
    """What run.json records about the GPU a session runs on."""

    index: int
    name: str
    compute_capability: str
    sm_count: int
    l2_bytes: int
    memory_bytes: int
    driver_version: int
    runtime_version: int

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "arch": "sm_" + self.compute_capability.replace(".", ""),
                "compute_capability": self.compute_capability, "sm_count": self.sm_count,
                "l2_bytes": self.l2_bytes, "memory_bytes": self.memory_bytes,
                "cuda_driver": self.driver_version, "cuda_runtime": self.runtime_version}


def device_count() -> int:
    try:
        runtime = rt()
    except ToolMissingError:
        return 0
    status, count = runtime.cudaGetDeviceCount()
    return int(count) if _status_ok(status) else 0


@cache
def device_info(index: int = 0) -> DeviceInfo:
    runtime = rt()
    attr = runtime.cudaDeviceAttr
    prop = check(runtime.cudaGetDeviceProperties(index), "cudaGetDeviceProperties")
    name = prop.name.decode(errors="replace") if isinstance(prop.name, bytes) else str(prop.name)

    def get(a: Any) -> int:
        return int(check(runtime.cudaDeviceGetAttribute(a, index), "cudaDeviceGetAttribute"))

    major = get(attr.cudaDevAttrComputeCapabilityMajor)
    minor = get(attr.cudaDevAttrComputeCapabilityMinor)
    return DeviceInfo(
        index=index, name=name.rstrip("\x00"), compute_capability=f"{major}.{minor}",
        sm_count=get(attr.cudaDevAttrMultiProcessorCount), l2_bytes=get(attr.cudaDevAttrL2CacheSize),
        memory_bytes=int(prop.totalGlobalMem),
        driver_version=int(check(runtime.cudaDriverGetVersion(), "cudaDriverGetVersion")),
        runtime_version=int(check(runtime.cudaRuntimeGetVersion(), "cudaRuntimeGetVersion")),
    )


def set_device(index: int) -> None:
    check(rt().cudaSetDevice(index), f"cudaSetDevice({index})")


# --------------------------------------------------------------------------- memory

class DeviceBuffer:
    """One cudaMalloc'ed allocation; freed by ``free()`` (sessions free theirs at close)."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = int(nbytes)
        self.ptr = as_int(check(rt().cudaMalloc(max(self.nbytes, 1)), f"cudaMalloc({self.nbytes} B)"))

    def upload(self, host: np.ndarray) -> None:
        data = np.ascontiguousarray(host)
        if data.nbytes > self.nbytes:
            raise ValueError(f"host array of {data.nbytes} B does not fit a {self.nbytes} B buffer")
        if data.nbytes:
            runtime = rt()
            check(runtime.cudaMemcpy(self.ptr, data.ctypes.data, data.nbytes,
                                     runtime.cudaMemcpyKind.cudaMemcpyHostToDevice), "cudaMemcpy H2D")

    def download(self, dtype: np.dtype, count: int) -> np.ndarray:
        out = np.empty(count, dtype=dtype)
        if out.nbytes > self.nbytes:
            raise ValueError(f"{out.nbytes} B requested from a {self.nbytes} B buffer")
        if out.nbytes:
            runtime = rt()
            check(runtime.cudaMemcpy(out.ctypes.data, self.ptr, out.nbytes,
                                     runtime.cudaMemcpyKind.cudaMemcpyDeviceToHost), "cudaMemcpy D2H")
        return out

    def fill(self, byte: int, stream: int = 0) -> None:
        """Set every byte (poison 0xFF, zeros) asynchronously on ``stream``."""
        if self.nbytes:
            check(rt().cudaMemsetAsync(self.ptr, int(byte), self.nbytes, stream), "cudaMemsetAsync")

    def free(self) -> None:
        if self.ptr:
            check(rt().cudaFree(self.ptr), "cudaFree")
            self.ptr = 0


class Stream:
    """A non-blocking CUDA stream owned by a session."""

    def __init__(self) -> None:
        runtime = rt()
        self.handle = as_int(check(runtime.cudaStreamCreateWithFlags(runtime.cudaStreamNonBlocking),
                                   "cudaStreamCreateWithFlags"))

    def synchronize(self) -> None:
        check(rt().cudaStreamSynchronize(self.handle), "cudaStreamSynchronize")

    def destroy(self) -> None:
        if self.handle:
            check(rt().cudaStreamDestroy(self.handle), "cudaStreamDestroy")
            self.handle = 0


def synchronize_stream(handle: int) -> None:
    check(rt().cudaStreamSynchronize(handle), "cudaStreamSynchronize")


# --------------------------------------------------------------------------- timers

class EventTimer:
    """CUDA events around the enqueued work on one stream (``Timer`` protocol)."""

    kind = "cuda-event"
    fallback_reason: str | None = None

    def __init__(self, stream: int) -> None:
        runtime = rt()
        self.stream = stream
        self._start = check(runtime.cudaEventCreate(), "cudaEventCreate")
        self._stop = check(runtime.cudaEventCreate(), "cudaEventCreate")

    def start(self) -> None:
        check(rt().cudaEventRecord(self._start, self.stream), "cudaEventRecord")

    def stop(self) -> None:
        check(rt().cudaEventRecord(self._stop, self.stream), "cudaEventRecord")

    def elapsed_ms(self) -> float:
        return float(check(rt().cudaEventElapsedTime(self._start, self._stop), "cudaEventElapsedTime"))

    def close(self) -> None:
        runtime = rt()
        for event in (self._start, self._stop):
            if event is not None:
                runtime.cudaEventDestroy(event)
        self._start = self._stop = None


class StallGate:
    """Hold a stream on a host-released flag: ``arm()`` enqueues a wait, ``release()`` frees it.

    The flag lives in mapped pinned host memory; the GPU polls it
    (``cuStreamWaitValue32`` with GEQ on a generation counter, so no reset is needed).
    A watchdog thread releases a gate held longer than ``timeout_s`` (work that
    synchronizes inside the held region would otherwise deadlock) and records it.
    """

    def __init__(self, timeout_s: float = 10.0) -> None:
        runtime = rt()
        self._host = as_int(check(runtime.cudaHostAlloc(4, runtime.cudaHostAllocMapped), "cudaHostAlloc"))
        self._dev = as_int(check(runtime.cudaHostGetDevicePointer(self._host, 0), "cudaHostGetDevicePointer"))
        self._flag = ctypes.c_uint32.from_address(self._host)
        self._flag.value = 0
        self._gen = 0
        self._armed_at: float | None = None
        self.timeouts = 0
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._watchdog = threading.Thread(target=self._watch, name="hipdnn-trace-stall-gate", daemon=True)
        self._watchdog.start()

    def _watch(self) -> None:
        while not self._closed.wait(0.2):
            with self._lock:
                if self._armed_at is not None and time.monotonic() - self._armed_at > self._timeout_s:
                    self._flag.value = self._gen
                    self._armed_at = None
                    self.timeouts += 1

    def arm(self, stream: int) -> None:
        driver = drv()
        with self._lock:
            self._gen = (self._gen + 1) & 0x7FFFFFFF or 1
            gen = self._gen
            self._armed_at = time.monotonic()
        check(driver.cuStreamWaitValue32(stream, self._dev, gen,
                                         driver.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ),
              "cuStreamWaitValue32")

    def release(self) -> None:
        with self._lock:
            self._flag.value = self._gen
            self._armed_at = None

    def close(self) -> None:
        self._closed.set()
        self.release()
        if self._host:
            rt().cudaFreeHost(self._host)
            self._host = 0


def probe_stall_gate(stream: int) -> str | None:
    """None when a held stream can be released from the host here; else why not."""
    try:
        gate = StallGate(timeout_s=2.0)
    except CudaError as exc:
        return f"mapped pinned memory unavailable ({exc})"
    try:
        gate.arm(stream)
        gate.release()
        synchronize_stream(stream)
        if gate.timeouts:
            return "the held stream was released only by the watchdog"
        return None
    except CudaError as exc:
        return f"stream memory operations unavailable ({exc})"
    finally:
        gate.close()


class StagedEventTimer(EventTimer):
    """Events whose start fires only after all work is enqueued (see the module docstring).

    If enqueueing ever waits on the held stream (the watchdog had to release it: seen
    with CUPTI activity tracing on an H200), staging is switched off for the rest of
    the session and the timer says so: that iteration's time includes the wait.
    """

    kind = "cuda-event-staged"
    HOLD_TIMEOUT_S = 1.0

    def __init__(self, stream: int) -> None:
        super().__init__(stream)
        self.gate = StallGate(timeout_s=self.HOLD_TIMEOUT_S)
        self.staged = True

    def start(self) -> None:
        if self.staged:
            self.gate.arm(self.stream)
        super().start()

    def stop(self) -> None:
        super().stop()
        if not self.staged:
            return
        self.gate.release()
        if self.gate.timeouts:
            self.staged = False
            self.kind = "cuda-event"
            self.fallback_reason = (f"staged timing switched off: enqueueing waited on the held stream for "
                                    f"{self.HOLD_TIMEOUT_S:g} s (something in execute synchronizes, e.g. CUPTI "
                                    "activity tracing); plain events from then on")

    def close(self) -> None:
        self.gate.close()
        super().close()


def make_timer(stream: int, timing: str) -> EventTimer:
    """The event timer ``--timing`` asks for; staged falls back to events with a reason."""
    if timing == "staged":
        reason = probe_stall_gate(stream)
        if reason is None:
            return StagedEventTimer(stream)
        timer = EventTimer(stream)
        timer.fallback_reason = f"staged timing unavailable, plain events used: {reason}"
        return timer
    return EventTimer(stream)


def timer_info(timer: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"timer": getattr(timer, "kind", "unknown")}
    reason = getattr(timer, "fallback_reason", None)
    if reason:
        out["timing_fallback"] = reason
    gate = getattr(timer, "gate", None)
    if gate is not None and gate.timeouts:
        out["staged_watchdog_releases"] = gate.timeouts
    return out


# --------------------------------------------------------------------------- cache

class L2Flush:
    """Evicts the L2 cache between iterations by writing a buffer twice its size.

    Every access to device memory goes through L2, so writing 2x its capacity
    leaves nothing of the previous iteration's working set in it. The write is a
    ``cudaMemsetAsync`` on the session's stream, enqueued before the timed region.
    """

    def __init__(self, device: int = 0, factor: int = 2) -> None:
        self.l2_bytes = device_info(device).l2_bytes
        self.buffer = DeviceBuffer(max(self.l2_bytes, 1 << 20) * factor)
        self._value = 0

    def flush(self, stream: int) -> None:
        self._value = (self._value + 1) & 0xFF   # a changing value: no write can be elided
        self.buffer.fill(self._value, stream)

    def info(self) -> dict[str, Any]:
        return {"l2_bytes": self.l2_bytes, "flush_bytes": self.buffer.nbytes, "flush": "cudaMemsetAsync"}

    def close(self) -> None:
        self.buffer.free()


# --------------------------------------------------------------------------- graphs

class CudaGraph:
    """One execution captured from a stream and replayed with ``cudaGraphLaunch``."""

    def __init__(self, stream: int, enqueue: Callable[[], None]) -> None:
        runtime = rt()
        self.stream = stream
        check(runtime.cudaStreamBeginCapture(stream, runtime.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal),
              "cudaStreamBeginCapture")
        try:
            enqueue()
        except BaseException:
            runtime.cudaStreamEndCapture(stream)
            raise
        self._graph = check(runtime.cudaStreamEndCapture(stream), "cudaStreamEndCapture")
        self._exec = check(runtime.cudaGraphInstantiate(self._graph, 0), "cudaGraphInstantiate")
        self.nodes = self._node_count()

    def _node_count(self) -> int | None:
        try:
            result = rt().cudaGraphGetNodes(self._graph)
            return int(result[-1]) if _status_ok(result[0]) else None
        except Exception:  # noqa: BLE001 - only informative
            return None

    def kernel_nodes(self) -> int:
        """Kernel launches in the captured execution (memset/memcpy nodes excluded)."""
        runtime = rt()
        count = int(check(runtime.cudaGraphGetNodes(self._graph, 0), "cudaGraphGetNodes")[1])
        nodes, _ = check(runtime.cudaGraphGetNodes(self._graph, count), "cudaGraphGetNodes")
        kernel = runtime.cudaGraphNodeType.cudaGraphNodeTypeKernel
        return sum(1 for n in nodes if check(runtime.cudaGraphNodeGetType(n), "cudaGraphNodeGetType") == kernel)

    def launch(self) -> None:
        check(rt().cudaGraphLaunch(self._exec, self.stream), "cudaGraphLaunch")

    def close(self) -> None:
        runtime = rt()
        if self._exec is not None:
            runtime.cudaGraphExecDestroy(self._exec)
            self._exec = None
        if self._graph is not None:
            runtime.cudaGraphDestroy(self._graph)
            self._graph = None

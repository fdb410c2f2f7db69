"""CUDA plumbing through cuda-bindings: buffers, streams, event timers, staged timing,
L2 flush and CUDA-graph capture.

Backends use these so a GPU session needs no framework (the cuDNN backend runs on
cuda-bindings alone). Every call's status is checked: a CUDA error becomes
:class:`CudaError` with the call's name, never a silently wrong number.

Timing method (docs/nvidia.md): one CUDA event before and one after the enqueued
work, on the session's stream; elapsed time read after the harness synchronizes.
``staged`` timing additionally holds the stream while the work is enqueued (a
one-thread kernel spinning on a host-released flag in mapped pinned memory, with a
timeout of its own), so the start event fires only once every launch is queued:
host launch gaps stay out of the measured time. Where the hold kernel cannot be
built the timer falls back to plain events and says why (``fallback_reason``).
"""

from __future__ import annotations

import ctypes
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


@cache
def device_count() -> int:
    """CUDA devices this process sees. Asked once: the runtime reads the visibility variable when it
    initialises and the answer cannot change after it, and each query through cuda-bindings cost ~3 ms
    (a backend's ``available()`` asks it for every graph)."""
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

    def copy_from_device(self, src: int, nbytes: int) -> None:
        """Device-to-device copy of ``nbytes`` from pointer ``src`` (a torch tensor's storage) into this
        buffer, complete on return (the device is synchronized, so no stream ordering is assumed)."""
        if nbytes > self.nbytes:
            raise ValueError(f"device array of {nbytes} B does not fit a {self.nbytes} B buffer")
        if nbytes:
            runtime = rt()
            check(runtime.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
            check(runtime.cudaMemcpy(self.ptr, src, nbytes, runtime.cudaMemcpyKind.cudaMemcpyDeviceToDevice),
                  "cudaMemcpy D2D")
            check(runtime.cudaDeviceSynchronize(), "cudaDeviceSynchronize")

    def copy_to_device(self, dst: int, nbytes: int) -> None:
        """Device-to-device copy of this buffer's first ``nbytes`` to pointer ``dst``, complete on return."""
        if nbytes > self.nbytes:
            raise ValueError(f"{nbytes} B requested from a {self.nbytes} B buffer")
        if nbytes:
            runtime = rt()
            check(runtime.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
            check(runtime.cudaMemcpy(dst, self.ptr, nbytes, runtime.cudaMemcpyKind.cudaMemcpyDeviceToDevice),
                  "cudaMemcpy D2D")
            check(runtime.cudaDeviceSynchronize(), "cudaDeviceSynchronize")

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
    """CUDA events around the enqueued work on one stream (``Timer`` protocol).

    Each start/stop pair is recorded into its own slot of a ring of event pairs, so the
    loop can read the elapsed times of many iterations at once after they ran
    (``take_laps``) instead of querying two events every iteration.
    """

    kind = "cuda-event"
    fallback_reason: str | None = None
    #: laps kept before ``take_laps`` must be called
    capacity = 256

    def __init__(self, stream: int) -> None:
        self.stream = stream
        self._starts: list[Any] = []
        self._stops: list[Any] = []
        self._slot = 0          # the slot the next start() records into
        self._untaken = 0       # laps recorded since the last take_laps()
        self._grow()

    def _grow(self) -> None:
        runtime = rt()
        for _ in range(self.capacity):
            self._starts.append(check(runtime.cudaEventCreate(), "cudaEventCreate"))
            self._stops.append(check(runtime.cudaEventCreate(), "cudaEventCreate"))

    def start(self) -> None:
        check(rt().cudaEventRecord(self._starts[self._slot], self.stream), "cudaEventRecord")

    def stop(self) -> None:
        check(rt().cudaEventRecord(self._stops[self._slot], self.stream), "cudaEventRecord")
        self._slot = (self._slot + 1) % self.capacity
        self._untaken = min(self._untaken + 1, self.capacity)

    def _elapsed(self, slot: int) -> float:
        return float(check(rt().cudaEventElapsedTime(self._starts[slot], self._stops[slot]),
                           "cudaEventElapsedTime"))

    def elapsed_ms(self) -> float:
        """The last lap (call after synchronizing)."""
        self._untaken = 0
        return self._elapsed((self._slot - 1) % self.capacity)

    def take_laps(self) -> list[float]:
        """Every lap since the last call, oldest first (call after synchronizing, at least every
        ``capacity`` laps: older ones are overwritten)."""
        n, self._untaken = self._untaken, 0
        return [self._elapsed((self._slot - n + k) % self.capacity) for k in range(n)]

    def close(self) -> None:
        runtime = rt()
        for event in (*self._starts, *self._stops):
            if event is not None:
                runtime.cudaEventDestroy(event)
        self._starts, self._stops = [], []


#: The hold kernel's name: profilers drop it from kernel traces (it is timing machinery).
HOLD_KERNEL = "hipdnn_trace_hold"

_HOLD_SOURCE = r"""
extern "C" __global__ void hipdnn_trace_hold(volatile unsigned int* flag, unsigned int gen,
                                             unsigned long long timeout_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while ((int)(flag[0] - gen) < 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) {
            atomicAdd((unsigned int*)&flag[1], 1u);
            return;
        }
    }
}
"""


@cache
def _hold_function(major: int, minor: int) -> Any:
    """The hold kernel, compiled once per process with NVRTC (PTX, JIT-loaded by the driver)."""
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        raise ToolMissingError("staged timing needs NVRTC through cuda-bindings") from None
    driver = drv()
    prog = check(nvrtc.nvrtcCreateProgram(_HOLD_SOURCE.encode(), b"hipdnn_trace_hold.cu", 0, [], []),
                 "nvrtcCreateProgram")
    opts = [f"--gpu-architecture=compute_{major}{minor}".encode()]
    result = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    if not _status_ok(result[0]):
        size = check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise CudaError(f"compiling the hold kernel failed: {log.decode(errors='replace').strip()[:300]}")
    size = check(nvrtc.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
    ptx = b" " * size
    check(nvrtc.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
    module = check(driver.cuModuleLoadData(np.frombuffer(ptx, dtype=np.uint8).ctypes.data), "cuModuleLoadData")
    return check(driver.cuModuleGetFunction(module, HOLD_KERNEL.encode()), "cuModuleGetFunction")


class StallGate:
    """Hold a stream until the host says go: ``arm()`` enqueues the hold, ``release()`` frees it.

    The hold is a one-thread kernel spinning on a flag in mapped pinned host memory
    (a generation counter, so nothing is reset) -- with its own timeout on the GPU's
    global timer. A host-side wait (``cuStreamWaitValue32``) deadlocks when anything
    in the enqueued work waits for the stream while holding Python's GIL: seen on an
    H200 with cuDNN. The kernel instead gives up after ``timeout_s`` and counts it
    (``timeouts``), so the worst case is a slow iteration, never a hang.
    """

    def __init__(self, device: int = 0, timeout_s: float = 0.1) -> None:
        runtime = rt()
        info = device_info(device)
        major, minor = (int(v) for v in info.compute_capability.split("."))
        self._fn = _hold_function(major, minor)
        self._host = as_int(check(runtime.cudaHostAlloc(8, runtime.cudaHostAllocMapped), "cudaHostAlloc"))
        self._dev = as_int(check(runtime.cudaHostGetDevicePointer(self._host, 0), "cudaHostGetDevicePointer"))
        self._flag = (ctypes.c_uint32 * 2).from_address(self._host)
        self._flag[0] = self._flag[1] = 0
        self._gen = 0
        self._timeout_ns = int(timeout_s * 1e9)
        self._arg_flag = np.array([self._dev], dtype=np.uint64)
        self._arg_gen = np.array([0], dtype=np.uint32)
        self._arg_timeout = np.array([self._timeout_ns], dtype=np.uint64)
        self._args = np.array([a.ctypes.data for a in (self._arg_flag, self._arg_gen, self._arg_timeout)],
                              dtype=np.uint64)

    @property
    def timeouts(self) -> int:
        """Holds the GPU ended itself (read after the stream synchronized)."""
        return int(self._flag[1]) if self._host else 0

    def arm(self, stream: int) -> None:
        self._gen = (self._gen + 1) & 0x7FFFFFFF or 1
        self._arg_gen[0] = self._gen
        check(drv().cuLaunchKernel(self._fn, 1, 1, 1, 1, 1, 1, 0, stream, self._args, 0), "cuLaunchKernel(hold)")

    def release(self) -> None:
        self._flag[0] = self._gen

    def close(self) -> None:
        if self._host:
            self.release()
            rt().cudaFreeHost(self._host)
            self._host = 0


def probe_stall_gate(stream: int, device: int = 0) -> str | None:
    """None when a held stream can be released from the host here; else why not."""
    try:
        gate = StallGate(device, timeout_s=2.0)
    except (CudaError, ToolMissingError) as exc:
        return f"the hold kernel is unavailable ({exc})"
    try:
        gate.arm(stream)
        gate.release()
        synchronize_stream(stream)
        if gate.timeouts:
            return "the hold kernel never saw the host's release"
        return None
    except CudaError as exc:
        return f"cannot launch the hold kernel ({exc})"
    finally:
        gate.close()


class StagedEventTimer(EventTimer):
    """Events whose start fires only after all work is enqueued (see the module docstring).

    The start event follows a hold kernel that ends when the host, done enqueueing,
    releases it. If enqueueing itself waits for the stream, the hold ends on its own
    timeout (``HOLD_TIMEOUT_S``); after ``MAX_TIMEOUTS`` such iterations staging is
    switched off for the rest of the session, and the timer says why.
    """

    kind = "cuda-event-staged"
    HOLD_TIMEOUT_S = 0.1
    MAX_TIMEOUTS = 3

    def __init__(self, stream: int, device: int = 0) -> None:
        super().__init__(stream)
        self.gate = StallGate(device, timeout_s=self.HOLD_TIMEOUT_S)
        self.staged = True

    def start(self) -> None:
        if self.staged:
            self.gate.arm(self.stream)
        super().start()

    def stop(self) -> None:
        super().stop()
        if self.staged:
            self.gate.release()

    def _check_timeouts(self) -> None:
        """After the harness synchronized: the hold's timeout count is final."""
        if self.staged and self.gate.timeouts >= self.MAX_TIMEOUTS:
            self.staged = False
            self.kind = "cuda-event"
            self.fallback_reason = (f"staged timing switched off after {self.gate.timeouts} iterations whose "
                                    f"enqueueing waited on the held stream (hold timed out after "
                                    f"{self.HOLD_TIMEOUT_S:g} s); plain events from then on")

    def elapsed_ms(self) -> float:
        value = super().elapsed_ms()
        self._check_timeouts()
        return value

    def take_laps(self) -> list[float]:
        laps = super().take_laps()
        self._check_timeouts()
        return laps

    def close(self) -> None:
        self.gate.close()
        super().close()


def make_timer(stream: int, timing: str, device: int = 0) -> EventTimer:
    """The event timer ``--timing`` asks for; staged falls back to events with a reason."""
    if timing == "staged":
        reason = probe_stall_gate(stream, device)
        if reason is None:
            return StagedEventTimer(stream, device)
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
        out["staged_hold_timeouts"] = gate.timeouts
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
        except Exception:  # only informative
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

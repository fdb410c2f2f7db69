"""SM and memory clocks from NVML, sampled while the timed iterations run.

Every call of :class:`ClockSampler` reads both clocks. The measurement loop does not call it:
``bench.sampling.BackgroundSampler`` does, on a thread of its own every 100 ms, and each row gets
the reading in force at its start. On an H100 one reading cost enough that reading every 5 ms
from the loop added ~20 us to each 230 us iteration of a GEMM (benchmarks/loop_cost_probe.py).
``results.rows`` flags iterations whose SM clock is below 90% of the measurement's maximum
(``clock_flag``, kept); ``bench.loop`` flags those below the throttle threshold of the reference clock
(``throttled``, left out of the statistic; docs/timing.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from hipdnn_trace.errors import ToolMissingError


def _pynvml() -> Any:
    try:
        import pynvml
    except ImportError:
        raise ToolMissingError("clock sampling needs the python package nvidia-ml-py") from None
    return pynvml


class ClockSampler:
    """Callable returning ``{"sm_clock_mhz": .., "mem_clock_mhz": ..}`` for one GPU."""

    def __init__(self, device: int = 0) -> None:
        _pynvml()   # fail early (one line) when NVML's python package is missing
        self.device = device
        self._nvml: Any = None
        self._handle: Any = None
        self.reads = 0

    def __getstate__(self) -> dict[str, Any]:
        """Picklable for isolated child runs: NVML is opened lazily in the process that samples."""
        state = dict(self.__dict__)
        state["_nvml"] = state["_handle"] = None
        return state

    def _open(self) -> None:
        self._nvml = _pynvml()
        self._nvml.nvmlInit()
        self._handle = self._nvml.nvmlDeviceGetHandleByIndex(self.device)

    def read(self) -> dict[str, float | None]:
        if self._handle is None:
            self._open()
        nvml = self._nvml
        self.reads += 1
        return {
            "sm_clock_mhz": float(nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_SM)),
            "mem_clock_mhz": float(nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_MEM)),
        }

    def __call__(self) -> dict[str, float | None]:
        return self.read()

    def info(self, interval_ms: float) -> dict[str, Any]:
        """What run.json says about how clocks were sampled (every ``interval_ms`` on a thread)."""
        return {"source": "nvml", "device": self.device, "interval_ms": interval_ms,
                "rule": "read on a thread of its own every interval_ms while a measurement runs; each "
                        "iteration carries the lowest reading taken during it, else the latest before it; "
                        "SM clock < 90% of the run's max sets clock_flag; below --throttle-threshold of the "
                        "reference clock (timing.throttle) sets throttled"}

    def close(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # shutting down twice is harmless
                pass
            self._nvml = self._handle = None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@contextlib.contextmanager
def opened() -> Iterator[Any | None]:
    """NVML's module, initialised for the block and shut down after it; None where NVML cannot
    start (no package, no driver: not an NVIDIA machine). Creates no CUDA context."""
    try:
        nvml = _pynvml()
        nvml.nvmlInit()
    except Exception:  # no NVML
        yield None
        return
    try:
        yield nvml
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass


def gpu_info(device: int = 0) -> dict[str, Any] | None:
    """What run.json records about an NVIDIA GPU, from NVML (creates no CUDA context,
    so the suite process can ask before it starts isolated children). None without NVML."""
    with opened() as nvml:
        if nvml is None:
            return None
        try:
            return _facts(nvml, device)
        except Exception:
            return None


def gpu_count() -> int | None:
    """NVIDIA GPUs NVML sees (None without NVML)."""
    with opened() as nvml:
        if nvml is None:
            return None
        try:
            return int(nvml.nvmlDeviceGetCount())
        except Exception:
            return None


def _facts(nvml: Any, device: int) -> dict[str, Any]:
    h = nvml.nvmlDeviceGetHandleByIndex(device)
    out: dict[str, Any] = {"index": device, "name": _text(nvml.nvmlDeviceGetName(h)),
                           "driver": _text(nvml.nvmlSystemGetDriverVersion())}
    probes = {
        "compute_capability": lambda: ".".join(str(v) for v in nvml.nvmlDeviceGetCudaComputeCapability(h)),
        "memory_bytes": lambda: int(nvml.nvmlDeviceGetMemoryInfo(h).total),
        "max_sm_clock_mhz": lambda: int(nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM)),
        "max_mem_clock_mhz": lambda: int(nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_MEM)),
        # the base clock throttling is judged against when clocks are not locked (nvbench's default clock)
        "default_sm_clock_mhz": lambda: int(nvml.nvmlDeviceGetDefaultApplicationsClock(h, nvml.NVML_CLOCK_GRAPHICS)),
        "power_limit_w": lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
        "uuid": lambda: _text(nvml.nvmlDeviceGetUUID(h)),
    }
    for key, probe in probes.items():
        try:
            out[key] = probe()
        except Exception:  # a missing fact is left out
            continue
    if "compute_capability" in out:
        out["arch"] = "sm_" + out["compute_capability"].replace(".", "")
    return out

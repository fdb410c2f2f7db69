"""SM and memory clocks from NVML, sampled around the timed iterations.

The harness calls a sampler after each iteration (outside the timed region). An
NVML query costs microseconds, which would dominate the loop of a tiny graph, so
the clocks are read at most every ``interval_ms`` and the iterations in between
carry the last reading: clocks are sampled *per block* of iterations. With
``interval_ms=0`` every iteration reads them. ``results.rows`` flags iterations
whose SM clock is below 90% of the measurement's maximum (flagged, not dropped).
"""

from __future__ import annotations

import time
from typing import Any

from hipdnn_trace.errors import ToolMissingError

DEFAULT_INTERVAL_MS = 5.0


def _pynvml() -> Any:
    try:
        import pynvml
    except ImportError:
        raise ToolMissingError("clock sampling needs the python package nvidia-ml-py") from None
    return pynvml


class ClockSampler:
    """Callable returning ``{"sm_clock_mhz": .., "mem_clock_mhz": ..}`` for one GPU."""

    def __init__(self, device: int = 0, interval_ms: float = DEFAULT_INTERVAL_MS) -> None:
        self._nvml = _pynvml()
        self._nvml.nvmlInit()
        self._handle = self._nvml.nvmlDeviceGetHandleByIndex(device)
        self.device = device
        self.interval_ns = int(interval_ms * 1e6)
        self._last_ns = -(1 << 62)
        self._last: dict[str, float | None] = {"sm_clock_mhz": None, "mem_clock_mhz": None}
        self.reads = 0

    def read(self) -> dict[str, float | None]:
        nvml = self._nvml
        self.reads += 1
        return {
            "sm_clock_mhz": float(nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_SM)),
            "mem_clock_mhz": float(nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_MEM)),
        }

    def __call__(self) -> dict[str, float | None]:
        now = time.monotonic_ns()
        if now - self._last_ns >= self.interval_ns:
            self._last = self.read()
            self._last_ns = now
        return dict(self._last)

    def info(self) -> dict[str, Any]:
        """What run.json says about how clocks were sampled."""
        return {"source": "nvml", "device": self.device, "interval_ms": self.interval_ns / 1e6,
                "rule": "read at most every interval_ms after an iteration; iterations in between carry "
                        "the last reading; SM clock < 90% of the run's max is flagged"}

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down twice is harmless
            pass


def gpu_name(device: int = 0) -> str | None:
    """The NVML product name (what profiles/peaks.toml matches on), None without NVML."""
    try:
        nvml = _pynvml()
        nvml.nvmlInit()
        name = nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(device))
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001 - no NVML, no name
        return None

"""Lock the GPU's clocks for a run (``--clocks lock-base|lock-max|off``) and always give them back.

A boosting GPU moves a >= 1 ms graph's median by 8-19% between runs minutes apart (issue 16);
locked clocks take that away. Locks are device-wide and outlive the process, so restoring them
matters as much as setting them: a ``finally`` (the run command's ``with``), an ``atexit`` hook,
and handlers for terminating signals that nobody else handles (SIGHUP, SIGQUIT, SIGTERM outside
the run's interrupt guard) all restore. A SIGKILL or a segfault runs none of them, so before
locking, a state file is written (``hipdnn-trace-clocks-<vendor><device>.json`` in the system's
temp folder, or ``$HIPDNN_TRACE_CLOCK_STATE_DIR``); it is removed after restoring. The next run
that finds one whose process is gone resets the clocks and says so.

NVIDIA: NVML (``nvidia-ml-py``) ``nvmlDeviceSetGpuLockedClocks`` at the default applications
clock (lock-base) or the maximum SM clock (lock-max), memory clocks likewise where the GPU
allows it; reset with ``nvmlDeviceResetGpuLockedClocks`` / ``...MemoryLockedClocks``.
AMD: amd-smi's Python API (``amdsmi``): lock-base is the ``STABLE_STD`` performance level
(the driver's fixed profiling clocks), lock-max is performance determinism at the maximum GFX
clock (``amdsmi_set_gpu_perf_determinism_mode``, what ``amd-smi set --perf-determinism`` does),
or ``STABLE_PEAK`` where determinism is not supported; restored by setting the performance level
read before locking (``AUTO`` by default). Device indices are the management library's.

Refusals (not root, a GPU that does not allow it, no management library) are never errors: one
warning line, and run.json says ``unlocked (<reason>)``.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

POLICIES = ("off", "lock-base", "lock-max")
STATE_DIR_ENV = "HIPDNN_TRACE_CLOCK_STATE_DIR"
#: signals whose default action ends the process; a restoring handler goes where none is set
_FATAL_SIGNALS = tuple(getattr(signal, name) for name in ("SIGHUP", "SIGQUIT", "SIGTERM") if hasattr(signal, name))


class Refused(Exception):
    """The clocks could not be locked (or read); the message is the reason, in words."""


class ClockControl(Protocol):
    """One GPU's clock controls in one management library."""

    vendor: str

    def lock(self, policy: str) -> dict[str, Any]:
        """Lock; returns what was requested and what restoring needs (saved in the state file)."""
        ...

    def restore(self, saved: dict[str, Any]) -> None: ...

    def observed(self) -> dict[str, float | None]: ...

    def close(self) -> None: ...


# ------------------------------------------------------------------------- NVIDIA

class NvmlClocks:
    """NVML locked clocks (``nvidia-ml-py``)."""

    vendor = "nvidia"

    def __init__(self, device: int = 0) -> None:
        try:
            import pynvml
        except ImportError:
            raise Refused("nvidia-ml-py (pynvml) is not installed") from None
        self.nvml = pynvml
        try:
            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(device)
        except pynvml.NVMLError as exc:
            raise Refused(f"NVML: {exc}") from None

    def _targets(self, policy: str) -> tuple[int, int | None]:
        nvml, h = self.nvml, self.handle
        if policy == "lock-max":
            sm = nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_SM)
            mem = nvml.nvmlDeviceGetMaxClockInfo(h, nvml.NVML_CLOCK_MEM)
        else:
            try:
                sm = nvml.nvmlDeviceGetDefaultApplicationsClock(h, nvml.NVML_CLOCK_GRAPHICS)
                mem = nvml.nvmlDeviceGetDefaultApplicationsClock(h, nvml.NVML_CLOCK_MEM)
            except nvml.NVMLError as exc:
                raise Refused(f"no default applications clock to lock to ({exc})") from None
        return int(sm), (int(mem) if mem else None)

    def lock(self, policy: str) -> dict[str, Any]:
        nvml, h = self.nvml, self.handle
        try:
            sm, mem = self._targets(policy)
            nvml.nvmlDeviceSetGpuLockedClocks(h, sm, sm)
        except nvml.NVMLError as exc:
            raise Refused(_nvml_reason(nvml, exc)) from None
        out: dict[str, Any] = {"requested": {"sm_mhz": sm, "mem_mhz": mem}, "memory": "not requested"}
        if mem is not None:
            try:
                nvml.nvmlDeviceSetMemoryLockedClocks(h, mem, mem)
                out["memory"] = "locked"
            except nvml.NVMLError as exc:   # HBM parts often refuse: SM clocks still hold
                out["memory"] = f"unlocked ({_nvml_reason(nvml, exc)})"
        return out

    def restore(self, saved: dict[str, Any]) -> None:
        nvml, h = self.nvml, self.handle
        try:
            nvml.nvmlDeviceResetGpuLockedClocks(h)
            if saved.get("memory") == "locked":
                nvml.nvmlDeviceResetMemoryLockedClocks(h)
        except nvml.NVMLError as exc:
            raise Refused(_nvml_reason(nvml, exc)) from None

    def observed(self) -> dict[str, float | None]:
        nvml, h = self.nvml, self.handle
        try:
            return {"sm_mhz": float(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)),
                    "mem_mhz": float(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM))}
        except nvml.NVMLError:
            return {"sm_mhz": None, "mem_mhz": None}

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except Exception:  # shutting down twice is harmless
            pass


def _nvml_reason(nvml: Any, exc: Exception) -> str:
    value = getattr(exc, "value", None)
    if value == getattr(nvml, "NVML_ERROR_NO_PERMISSION", object()):
        return "permission denied: locking clocks needs root"
    if value == getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", object()):
        return "this GPU does not support locked clocks"
    return f"NVML: {exc}"


# ---------------------------------------------------------------------------- AMD

class AmdSmiClocks:
    """amd-smi performance levels / determinism (``amdsmi``)."""

    vendor = "amd"
    _PREFIX = "AMDSMI_DEV_PERF_LEVEL_"

    def __init__(self, device: int = 0) -> None:
        try:
            import amdsmi
        except ImportError:
            raise Refused("amd-smi's Python package (amdsmi) is not installed") from None
        self.smi = amdsmi
        try:
            amdsmi.amdsmi_init()
            handles = amdsmi.amdsmi_get_processor_handles()
        except amdsmi.AmdSmiException as exc:
            raise Refused(f"amd-smi: {_amd_reason(exc)}") from None
        if device >= len(handles):
            raise Refused(f"amd-smi sees {len(handles)} GPU(s), no device {device}")
        self.handle = handles[device]

    def lock(self, policy: str) -> dict[str, Any]:
        smi, h = self.smi, self.handle
        try:
            previous = str(smi.amdsmi_get_gpu_perf_level(h)).removeprefix(self._PREFIX)
            if policy == "lock-base":
                smi.amdsmi_set_gpu_perf_level(h, smi.AmdSmiDevPerfLevel.STABLE_STD)
                return {"requested": {"sm_mhz": None, "mem_mhz": None}, "method": "perf level STABLE_STD",
                        "previous_perf_level": previous}
            top = int(smi.amdsmi_get_clock_info(h, smi.AmdSmiClkType.GFX)["max_clk"])
            try:
                smi.amdsmi_set_gpu_perf_determinism_mode(h, top)
                method = f"perf determinism at {top} MHz"
            except smi.AmdSmiLibraryException as exc:
                if "NOT_SUPPORTED" not in _amd_reason(exc):
                    raise
                smi.amdsmi_set_gpu_perf_level(h, smi.AmdSmiDevPerfLevel.STABLE_PEAK)
                method, top = "perf level STABLE_PEAK (no perf determinism here)", None
        except smi.AmdSmiException as exc:
            raise Refused(f"amd-smi: {_amd_reason(exc)}") from None
        return {"requested": {"sm_mhz": top, "mem_mhz": None}, "method": method, "previous_perf_level": previous}

    def restore(self, saved: dict[str, Any]) -> None:
        smi = self.smi
        name = saved.get("previous_perf_level") or "AUTO"
        level = smi.AmdSmiDevPerfLevel.__members__.get(name, smi.AmdSmiDevPerfLevel.AUTO)
        if level in (smi.AmdSmiDevPerfLevel.DETERMINISM, smi.AmdSmiDevPerfLevel.UNKNOWN):
            level = smi.AmdSmiDevPerfLevel.AUTO
        try:
            smi.amdsmi_set_gpu_perf_level(self.handle, level)
        except smi.AmdSmiException as exc:
            raise Refused(f"amd-smi: {_amd_reason(exc)}") from None

    def observed(self) -> dict[str, float | None]:
        smi, h = self.smi, self.handle
        try:
            return {"sm_mhz": float(smi.amdsmi_get_clock_info(h, smi.AmdSmiClkType.GFX)["clk"]),
                    "mem_mhz": float(smi.amdsmi_get_clock_info(h, smi.AmdSmiClkType.MEM)["clk"])}
        except smi.AmdSmiException:
            return {"sm_mhz": None, "mem_mhz": None}

    def close(self) -> None:
        try:
            self.smi.amdsmi_shut_down()
        except Exception:
            pass


def _amd_reason(exc: Exception) -> str:
    info = getattr(exc, "get_error_info", None)
    text = str(info() if callable(info) else exc)
    return "permission denied: locking clocks needs root" if "NO_PERM" in text else " ".join(text.split())


CONTROLS: dict[str, Callable[[int], ClockControl]] = {"nvidia": NvmlClocks, "amd": AmdSmiClocks}


# ------------------------------------------------------------------ the run's lock

def state_path(vendor: str, device: int) -> Path:
    folder = Path(os.environ.get(STATE_DIR_ENV) or tempfile.gettempdir())
    return folder / f"hipdnn-trace-clocks-{vendor}{device}.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ClockLock:
    """``with ClockLock(policy, vendor, device) as lock:`` locks (or records why not), restores at
    the end however the block ends; ``lock.record()`` is run.json's ``clocks`` block."""

    def __init__(self, policy: str, vendor: str | None, device: int = 0, *, run_dir: str | None = None,
                 warn: Callable[[str], None] | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(policy)
        self.policy, self.vendor, self.device, self.run_dir = policy, vendor, device, run_dir
        self.warn = warn or (lambda line: print(f"hipdnn-trace: warning: {line}", file=sys.stderr))
        self.control: ClockControl | None = None
        self.saved: dict[str, Any] | None = None
        self.info: dict[str, Any] = {"policy": policy, "state": "off" if policy == "off" else "unlocked",
                                     "vendor": vendor, "device": device}
        self._signals: dict[int, Any] = {}

    # -- stale locks
    def _reset_stale(self) -> None:
        """A lock a killed hipdnn-trace left: reset it (whatever this run's policy) and say so."""
        if self.vendor is None:
            return
        path = state_path(self.vendor, self.device)
        try:
            stale = json.loads(path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError):
            stale = {}
        pid = int(stale.get("pid") or 0)
        if pid and pid != os.getpid() and _alive(pid):
            raise Refused(f"another hipdnn-trace run (pid {pid}) holds this GPU's clock lock")
        where = f" (run {stale['run_dir']})" if stale.get("run_dir") else ""
        try:
            control = self._control()
            control.restore(stale.get("saved") or {})
        except Refused as exc:
            self.warn(f"clocks locked by a hipdnn-trace run that was killed (pid {pid}){where}; "
                      f"could not reset them: {exc}")
            self.info["stale_lock"] = f"left by pid {pid}{where}; not reset ({exc})"
            return
        path.unlink(missing_ok=True)
        self.warn(f"clocks were still locked by a hipdnn-trace run that was killed (pid {pid}){where}; reset them")
        self.info["stale_lock"] = f"left by pid {pid}{where}; reset"

    def _control(self) -> ClockControl:
        if self.control is None:
            if self.vendor not in CONTROLS:
                raise Refused("this run uses no GPU" if self.vendor is None else f"no clock control for {self.vendor}")
            self.control = CONTROLS[self.vendor](self.device)
        return self.control

    # -- lock and restore
    def __enter__(self) -> ClockLock:
        try:
            self._reset_stale()   # no vendor or no state file: nothing to reset
            if self.policy != "off":
                self._lock()
        except Refused as exc:
            if self.policy != "off":
                self.info["state"] = f"unlocked ({exc})"
                self.warn(f"--clocks {self.policy}: clocks not locked: {exc}")
            else:
                self.info["stale_lock"] = str(exc)
        except Exception as exc:  # a management library failing never stops a run
            self.info["state"] = f"unlocked ({type(exc).__name__}: {exc})" if self.policy != "off" else "off"
            if self.policy != "off":
                self.warn(f"--clocks {self.policy}: clocks not locked: {exc}")
        return self

    def _lock(self) -> None:
        control = self._control()
        path = state_path(control.vendor, self.device)
        state = {"pid": os.getpid(), "policy": self.policy, "vendor": control.vendor, "device": self.device,
                 "run_dir": self.run_dir, "locked_at": time.time(), "saved": {}}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(state))          # before locking: a kill in between is still found
        try:
            saved = control.lock(self.policy)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        state["saved"] = saved
        path.write_text(json.dumps(state))
        self.saved = saved
        atexit.register(self.restore)
        self._install_signal_handlers()
        self.info.update(state="locked", requested=saved.get("requested"),
                         **{k: v for k, v in saved.items() if k not in ("requested", "previous_perf_level")})
        self.info["observed_start"] = control.observed()

    def restore(self) -> None:
        """Give the clocks back (idempotent); the state file goes once they are."""
        if self.saved is None or self.control is None:
            return
        saved, self.saved = self.saved, None
        self.info["observed_end"] = self.control.observed()
        try:
            self.control.restore(saved)
        except Refused as exc:
            self.warn(f"could not restore the GPU clocks: {exc}; reset them with "
                      f"{'nvidia-smi -rgc' if self.control.vendor == 'nvidia' else 'amd-smi reset --clocks'}")
            self.info["restored"] = f"failed ({exc})"
            return
        state_path(self.control.vendor, self.device).unlink(missing_ok=True)
        self.info["restored"] = True

    def __exit__(self, *exc: object) -> None:
        try:
            self.restore()
        finally:
            self._uninstall_signal_handlers()
            atexit.unregister(self.restore)
            if self.control is not None:
                self.control.close()

    def _install_signal_handlers(self) -> None:
        for sig in _FATAL_SIGNALS:
            try:
                if signal.getsignal(sig) == signal.SIG_DFL:
                    self._signals[sig] = signal.signal(sig, self._on_signal)
            except ValueError:   # not the main thread: the finally and atexit still restore
                return

    def _uninstall_signal_handlers(self) -> None:
        for sig, previous in self._signals.items():
            try:
                signal.signal(sig, previous)
            except ValueError:
                pass
        self._signals = {}

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.restore()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)   # die of it, as without us

    def record(self) -> dict[str, Any]:
        """run.json's ``clocks`` block: policy, state (``locked``/``off``/``unlocked (reason)``),
        requested and observed MHz."""
        return dict(self.info)



def reference_clock(record: dict[str, Any] | None, gpu: dict[str, Any] | None) -> tuple[float | None, str | None]:
    """(MHz, what it is) that throttling is judged against: the locked SM clock when ``--clocks`` held
    (run.json ``clocks``), else the GPU's default applications clock from NVML (nvbench's default clock
    rate). (None, None) where neither is known (CPU backends, AMD without a locked clock)."""
    record = record or {}
    if record.get("state") == "locked":
        locked = (record.get("requested") or {}).get("sm_mhz")
        if locked:
            return float(locked), f"locked clock ({record.get('policy')})"
    default = (gpu or {}).get("default_sm_clock_mhz")
    if default:
        return float(default), "default applications clock (NVML)"
    return None, None

"""--clocks: locking, restoring (also after a crash, a signal or a kill) and refusals.

No GPU here: NVML and amd-smi are stand-in modules (every such test says "mocked" in its name),
written against the real APIs' names and error types; the test marked gpu + cuda uses real NVML.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hipdnn_trace.compare.method import clock_policy
from hipdnn_trace.device import clock_lock
from hipdnn_trace.device.clock_lock import STATE_DIR_ENV, ClockLock, state_path

#: a stand-in pynvml: same function names, NVMLError with .value, calls logged to a file
STAND_IN_PYNVML = '''
import json, os
NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION = 3, 4
class NVMLError(Exception):
    def __init__(self, value):
        self.value = value
        super().__init__({3: "Not Supported", 4: "Insufficient Permissions"}.get(value, str(value)))
def _log(*call):
    with open(os.environ["STANDIN_NVML_LOG"], "a") as fh:
        fh.write(json.dumps(call) + "\\n")
def _deny(what):
    code = os.environ.get("STANDIN_NVML_DENY_" + what)
    if code:
        raise NVMLError(int(code))
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlDeviceGetHandleByIndex(i): return ("gpu", i)
def nvmlDeviceGetMaxClockInfo(h, kind): return 1980 if kind == NVML_CLOCK_SM else 2619
def nvmlDeviceGetDefaultApplicationsClock(h, kind):
    _deny("DEFAULT")
    return 1755 if kind == NVML_CLOCK_GRAPHICS else 2619
def nvmlDeviceGetClockInfo(h, kind):
    return (float(os.environ.get("STANDIN_NVML_SM", 1755)) if kind == NVML_CLOCK_SM else 2619.0)
def nvmlDeviceSetGpuLockedClocks(h, lo, hi):
    _deny("LOCK"); _log("lock_sm", lo, hi)
def nvmlDeviceSetMemoryLockedClocks(h, lo, hi):
    _deny("MEM"); _log("lock_mem", lo, hi)
def nvmlDeviceResetGpuLockedClocks(h): _log("reset_sm")
def nvmlDeviceResetMemoryLockedClocks(h): _log("reset_mem")
'''


@pytest.fixture
def nvml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The stand-in pynvml importable here and in child processes; returns a reader of its calls."""
    (tmp_path / "standin").mkdir()
    (tmp_path / "standin" / "pynvml.py").write_text(STAND_IN_PYNVML)
    log = tmp_path / "nvml.log"
    log.write_text("")
    monkeypatch.setenv("STANDIN_NVML_LOG", str(log))
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    monkeypatch.syspath_prepend(str(tmp_path / "standin"))
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    return lambda: [tuple(json.loads(line)) for line in log.read_text().splitlines()]


def _quiet() -> tuple[list[str], callable]:
    lines: list[str] = []
    return lines, lines.append


def test_lock_max_locks_sm_and_memory_then_restores_with_mocked_nvml(nvml) -> None:
    warnings, warn = _quiet()
    with ClockLock("lock-max", "nvidia", 0, run_dir="runs/x", warn=warn) as lock:
        assert nvml() == [("lock_sm", 1980, 1980), ("lock_mem", 2619, 2619)]
        saved = json.loads(state_path("nvidia", 0).read_text())
        assert saved["pid"] == os.getpid() and saved["run_dir"] == "runs/x"
        record = lock.record()
        assert record["state"] == "locked" and record["policy"] == "lock-max"
        assert record["requested"] == {"sm_mhz": 1980, "mem_mhz": 2619}
        assert record["observed_start"] == {"sm_mhz": 1755.0, "mem_mhz": 2619.0}
    assert nvml()[2:] == [("reset_sm",), ("reset_mem",)]
    assert not state_path("nvidia", 0).exists()
    assert lock.record()["restored"] is True and warnings == []


def test_lock_base_uses_the_default_applications_clock_with_mocked_nvml(nvml) -> None:
    with ClockLock("lock-base", "nvidia", 0, warn=lambda _: None) as lock:
        assert lock.record()["requested"] == {"sm_mhz": 1755, "mem_mhz": 2619}
    assert nvml()[0] == ("lock_sm", 1755, 1755)


def test_memory_lock_refused_keeps_sm_locked_with_mocked_nvml(nvml, monkeypatch) -> None:
    monkeypatch.setenv("STANDIN_NVML_DENY_MEM", "3")
    with ClockLock("lock-max", "nvidia", 0, warn=lambda _: None) as lock:
        assert lock.record()["state"] == "locked"
        assert lock.record()["memory"] == "unlocked (this GPU does not support locked clocks)"
    assert nvml() == [("lock_sm", 1980, 1980), ("reset_sm",)]   # memory was never locked: not reset


def test_permission_denied_is_a_warning_and_unlocked_with_mocked_nvml(nvml, monkeypatch) -> None:
    monkeypatch.setenv("STANDIN_NVML_DENY_LOCK", "4")
    warnings, warn = _quiet()
    with ClockLock("lock-max", "nvidia", 0, warn=warn) as lock:
        pass
    assert lock.record()["state"] == "unlocked (permission denied: locking clocks needs root)"
    assert len(warnings) == 1 and "needs root" in warnings[0] and "\n" not in warnings[0]
    assert nvml() == [] and not state_path("nvidia", 0).exists()
    assert clock_policy({"clocks": lock.record()}) == "off"


def test_a_crash_inside_the_run_restores_with_mocked_nvml(nvml) -> None:
    with pytest.raises(RuntimeError):
        with ClockLock("lock-max", "nvidia", 0, warn=lambda _: None):
            raise RuntimeError("segfault stand-in")
    assert nvml()[-2:] == [("reset_sm",), ("reset_mem",)]
    assert not state_path("nvidia", 0).exists()


def _child(script: str, tmp_path: Path) -> subprocess.Popen:
    package_root = str(Path(clock_lock.__file__).resolve().parents[2])   # this checkout's hipdnn_trace
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "standin"), package_root,
                                                        os.environ.get("PYTHONPATH", "")])}
    code = textwrap.dedent(f"""
        import os, signal, sys, time
        signal.signal(signal.SIGHUP, signal.SIG_DFL)   # as a terminal gives it (nohup would pass it on ignored)
        from hipdnn_trace.device.clock_lock import ClockLock
        lock = ClockLock("lock-max", "nvidia", 0, run_dir="runs/killed", warn=lambda _: None)
        lock.__enter__()
        {script}
    """)
    return subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tmp_path)


def test_sighup_restores_before_dying_with_mocked_nvml(nvml, tmp_path: Path) -> None:
    child = _child("os.kill(os.getpid(), signal.SIGHUP); time.sleep(30)", tmp_path)
    assert child.wait(timeout=60) == -signal.SIGHUP
    assert nvml() == [("lock_sm", 1980, 1980), ("lock_mem", 2619, 2619), ("reset_sm",), ("reset_mem",)]
    assert not state_path("nvidia", 0).exists()


def test_exit_without_the_with_block_restores_through_atexit_with_mocked_nvml(nvml, tmp_path: Path) -> None:
    child = _child("sys.exit(0)", tmp_path)
    assert child.wait(timeout=60) == 0
    assert nvml()[-2:] == [("reset_sm",), ("reset_mem",)]


def test_the_next_run_resets_a_lock_left_by_a_killed_run_with_mocked_nvml(nvml, tmp_path: Path) -> None:
    child = _child("os.kill(os.getpid(), signal.SIGKILL)", tmp_path)
    assert child.wait(timeout=60) == -signal.SIGKILL
    assert nvml() == [("lock_sm", 1980, 1980), ("lock_mem", 2619, 2619)]   # nothing restored
    assert state_path("nvidia", 0).exists()
    warnings, warn = _quiet()
    with ClockLock("off", "nvidia", 0, warn=warn) as lock:   # even a run that locks nothing
        pass
    assert nvml()[2:] == [("reset_sm",), ("reset_mem",)]
    assert not state_path("nvidia", 0).exists()
    assert "killed" in warnings[0] and "runs/killed" in warnings[0] and "reset" in warnings[0]
    assert lock.record()["stale_lock"].endswith("reset") and lock.record()["state"] == "off"


def test_a_lock_held_by_a_live_run_is_left_alone_with_mocked_nvml(nvml) -> None:
    path = state_path("nvidia", 0)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"pid": os.getppid(), "saved": {"memory": "locked"}}))
    warnings, warn = _quiet()
    with ClockLock("lock-max", "nvidia", 0, warn=warn) as lock:
        pass
    assert lock.record()["state"].startswith("unlocked (another hipdnn-trace run")
    assert nvml() == [] and path.exists()


def test_no_gpu_and_no_library_are_refusals_not_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
    monkeypatch.setitem(sys.modules, "pynvml", None)   # import fails: no nvidia-ml-py
    with ClockLock("lock-max", "nvidia", 0, warn=lambda _: None) as lock:
        pass
    assert lock.record()["state"] == "unlocked (nvidia-ml-py (pynvml) is not installed)"
    with ClockLock("lock-base", None, 0, warn=lambda _: None) as lock:
        pass
    assert lock.record()["state"] == "unlocked (this run uses no GPU)"


def test_run_records_the_clocks_and_warns_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    import graph_dicts as hg

    from hipdnn_trace.cli import main

    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    hg.write(tmp_path / "graphs", [hg.add_relu()])
    assert main(["run", str(tmp_path / "graphs"), "--out", str(tmp_path / "runs"), "--run-id", "c",
                 "-w", "1", "-i", "2", "--quiet", "--clocks", "lock-max"]) == 0
    meta = json.loads((tmp_path / "runs" / "c" / "run.json").read_text())
    assert meta["clocks"]["policy"] == "lock-max"
    assert meta["clocks"]["state"] == "unlocked (this run uses no GPU)"
    assert meta["timing"]["clock_lock"] == "lock-max"
    err = [line for line in capsys.readouterr().err.splitlines() if "--clocks" in line]
    assert len(err) == 1


# ------------------------------------------------------------------------- AMD

class _AmdSmiException(Exception):
    pass


class _AmdSmiLibraryException(_AmdSmiException):
    def __init__(self, info: str) -> None:
        super().__init__(info)
        self.info = info

    def get_error_info(self) -> str:
        return self.info


def _stand_in_amdsmi(*, determinism: bool = True, deny: bool = False):
    import enum
    import types

    calls: list[tuple] = []
    mod = types.ModuleType("amdsmi")
    mod.AmdSmiException, mod.AmdSmiLibraryException = _AmdSmiException, _AmdSmiLibraryException
    mod.AmdSmiDevPerfLevel = enum.IntEnum("AmdSmiDevPerfLevel", "AUTO LOW HIGH MANUAL STABLE_STD STABLE_PEAK "
                                          "STABLE_MIN_MCLK STABLE_MIN_SCLK DETERMINISM UNKNOWN")
    mod.AmdSmiClkType = enum.IntEnum("AmdSmiClkType", "SYS GFX DF DCEF SOC MEM")
    mod.amdsmi_init = lambda *a: None
    mod.amdsmi_shut_down = lambda: None
    mod.amdsmi_get_processor_handles = lambda: ["gpu0"]
    mod.amdsmi_get_gpu_perf_level = lambda h: "AMDSMI_DEV_PERF_LEVEL_AUTO"
    mod.amdsmi_get_clock_info = lambda h, kind: {"clk": 2100 if kind == mod.AmdSmiClkType.GFX else 1300,
                                                 "min_clk": 500, "max_clk": 2100, "clk_locked": 0}

    def set_level(h, level):
        if deny:
            raise _AmdSmiLibraryException("AMDSMI_STATUS_NO_PERM - Permission Denied")
        calls.append(("perf_level", level.name))

    def set_determinism(h, mhz):
        if deny:
            raise _AmdSmiLibraryException("AMDSMI_STATUS_NO_PERM - Permission Denied")
        if not determinism:
            raise _AmdSmiLibraryException("AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported")
        calls.append(("determinism", mhz))

    mod.amdsmi_set_gpu_perf_level = set_level
    mod.amdsmi_set_gpu_perf_determinism_mode = set_determinism
    return mod, calls


@pytest.mark.parametrize("determinism, expected", [
    (True, [("determinism", 2100), ("perf_level", "AUTO")]),
    (False, [("perf_level", "STABLE_PEAK"), ("perf_level", "AUTO")]),
])
def test_amd_lock_max_and_restore_with_mocked_amdsmi(monkeypatch, tmp_path, determinism, expected) -> None:
    mod, calls = _stand_in_amdsmi(determinism=determinism)
    monkeypatch.setitem(sys.modules, "amdsmi", mod)
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
    with ClockLock("lock-max", "amd", 0, warn=lambda _: None) as lock:
        assert lock.record()["state"] == "locked"
        assert lock.record()["observed_start"] == {"sm_mhz": 2100.0, "mem_mhz": 1300.0}
    assert calls == expected and not state_path("amd", 0).exists()


def test_amd_lock_base_is_the_stable_std_level_with_mocked_amdsmi(monkeypatch, tmp_path) -> None:
    mod, calls = _stand_in_amdsmi()
    monkeypatch.setitem(sys.modules, "amdsmi", mod)
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
    with ClockLock("lock-base", "amd", 0, warn=lambda _: None):
        pass
    assert calls == [("perf_level", "STABLE_STD"), ("perf_level", "AUTO")]


def test_amd_permission_denied_is_unlocked_with_mocked_amdsmi(monkeypatch, tmp_path) -> None:
    mod, calls = _stand_in_amdsmi(deny=True)
    monkeypatch.setitem(sys.modules, "amdsmi", mod)
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
    with ClockLock("lock-max", "amd", 0, warn=lambda _: None) as lock:
        pass
    assert lock.record()["state"] == "unlocked (amd-smi: permission denied: locking clocks needs root)"
    assert calls == []


# ----------------------------------------------------------------- real GPU

#: Locking a real GPU's clocks changes a machine's state for everyone on it: this test runs only where the
#: owner of the GPU asks for it (never on shared or lent GPUs, whose clocks must not be changed).
OWN_GPU_CLOCKS = "HIPDNN_TRACE_TEST_REAL_CLOCK_LOCK"


@pytest.mark.gpu
@pytest.mark.cuda
@pytest.mark.skipif(os.environ.get(OWN_GPU_CLOCKS) != "1",
                    reason=f"changes the GPU's clocks: only on a GPU you own, with {OWN_GPU_CLOCKS}=1")
def test_lock_max_on_a_real_nvidia_gpu_restores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Locks where permitted (root), else says why; either way nothing stays locked."""
    pynvml = pytest.importorskip("pynvml")
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
    with ClockLock("lock-max", "nvidia", 0, warn=lambda _: None) as lock:
        record = lock.record()
        if record["state"] == "locked":
            pynvml.nvmlInit()
            h = pynvml.nvmlDeviceGetHandleByIndex(0)
            assert record["requested"]["sm_mhz"] == pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)
        else:
            assert record["state"].startswith("unlocked (")
    assert not state_path("nvidia", 0).exists()
    if record["state"] == "locked":
        assert lock.record()["restored"] is True

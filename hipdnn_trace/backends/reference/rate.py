"""The float64 matmul rate the reference's time is judged at: measured once per machine, then kept.

``inspect``, ``run`` and run's isolated children are separate processes. Each used to measure the
rate itself, and two measurements of a 20 ms product on a busy host differ by tens of percent (25
and 38 GFLOP/s a minute apart on the 2-core development VM), so a graph whose estimate sat near
``--max-reference-seconds`` got "cannot run" from ``inspect`` and a start from ``run`` (issue 33).

Now the first measurement on a machine is written to the user's cache folder, one small JSON file
per *fingerprint* (what sets the rate: the CPU model, the CPUs this process may use and its cgroup
quota, numpy and its BLAS, the BLAS thread variables; on a GPU its name and torch's build), the
first writer winning, and every later process reads that number: one rate, one verdict. A home
folder shared by the nodes of a cluster keeps one file per kind of node.

``HIPDNN_TRACE_FLOAT64_GFLOPS`` sets the CPU rate instead (a cluster's agreed number; a test's
injection): no measurement, no file. Delete the file to measure again (docs/reliability.md).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hipdnn_trace import read_gate
from hipdnn_trace.errors import UserError

#: the variable that sets the CPU's float64 rate in GFLOP/s (no measurement, no cache file)
RATE_ENV = "HIPDNN_TRACE_FLOAT64_GFLOPS"
#: the cache's subfolder of $XDG_CACHE_HOME/hipdnn-trace (else ~/.cache/hipdnn-trace)
SUBDIR = "float64-rate"
_CALIBRATION_N = 768
_CALIBRATION_N_GPU = 2048
#: products timed after a first untimed one (BLAS threads start, pages fault): the fastest counts
_TRIES = 5
#: environment variables that change how many threads BLAS uses
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


@dataclass(frozen=True)
class Rate:
    """FLOP/s of a float64 matmul and where the number came from (the refusal line says it)."""

    flops_per_s: float
    origin: str          # "measured here" | "set by HIPDNN_TRACE_FLOAT64_GFLOPS"


def override() -> float | None:
    """The CPU rate ``HIPDNN_TRACE_FLOAT64_GFLOPS`` sets, in FLOP/s; None when unset.
    A value that is not a positive finite number is one UserError line."""
    text = os.environ.get(RATE_ENV, "").strip()
    if not text:
        return None
    try:
        gflops = float(text)
    except ValueError:
        gflops = float("nan")
    if not (np.isfinite(gflops) and gflops > 0):
        raise UserError(f"{RATE_ENV}={text!r}: not a positive number of GFLOP/s (unset it to measure the rate)")
    return gflops * 1e9


@functools.lru_cache(maxsize=2)
def float64_rate(device: str = "cpu") -> Rate:
    """The float64 matmul rate where the reference runs (``cpu`` or ``cuda``): the variable's for
    the CPU, else the machine's kept measurement, else measured now and kept."""
    if device != "cuda":
        fixed = override()
        if fixed is not None:
            return Rate(fixed, f"set by {RATE_ENV}")
    key = fingerprint(device)
    path = cache_path(key)
    kept = _read(path, key)
    if kept is None:
        kept = _keep(path, key, _measure(device))
    return Rate(kept, "measured here")


def _measure(device: str) -> float:
    return _cuda_float64_rate() if device == "cuda" else _cpu_float64_rate()


def _cpu_float64_rate() -> float:
    """FLOP/s of a 768^3 float64 product on the CPU (about 20 ms): the fastest of five after a
    first one, so a busy moment or the BLAS threads' start does not lower the rate."""
    a = np.random.default_rng(0).standard_normal((_CALIBRATION_N, _CALIBRATION_N))
    a @ a
    best = float("inf")
    for _ in range(_TRIES):
        t0 = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - t0)
    return 2 * _CALIBRATION_N**3 / max(best, 1e-9)


def _cuda_float64_rate() -> float:
    """torch float64 matmul FLOP/s on the current GPU (the reference's ``cuda`` namespace)."""
    import torch

    n = _CALIBRATION_N_GPU
    a = torch.randn(n, n, dtype=torch.float64, device="cuda")
    a @ a   # first call: library loading and autotuning are not the rate
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(_TRIES):
        t0 = time.perf_counter()
        a @ a
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / max(best, 1e-9)


# ------------------------------------------------------------------------ the machine's file

def fingerprint(device: str = "cpu") -> dict[str, str]:
    """What sets the rate on ``device``: a different value is another machine (another file)."""
    if device == "cuda":
        return _gpu_fingerprint()
    blas = (getattr(np, "__config__", None) and getattr(np.__config__, "CONFIG", {}) or {}) \
        .get("Build Dependencies", {}).get("blas", {})
    return {
        "device": "cpu",
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpus": str(os.cpu_count()),
        "usable_cpus": str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()),
        "cpu_quota": _cpu_quota(),
        "numpy": np.__version__,
        "blas": f"{blas.get('name', '?')} {blas.get('version', '?')}",
        **{name: os.environ.get(name, "") for name in _THREAD_VARIABLES},
    }


def _gpu_fingerprint() -> dict[str, str]:
    import torch

    return {"device": "cuda", "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "toolkit": str(torch.version.cuda or torch.version.hip)}


def _cpu_model() -> str:
    """/proc/cpuinfo's first "model name" (a kernel file, read line by line as results/metadata.py does)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name") and ":" in line:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _cpu_quota() -> str:
    """The cgroup v2 CPU quota (``max 100000``: none); empty outside a cgroup v2 container."""
    try:
        with open("/sys/fs/cgroup/cpu.max") as fh:
            return fh.readline().strip()
    except OSError:
        return ""


def cache_folder() -> Path:
    """$XDG_CACHE_HOME/hipdnn-trace/float64-rate, else ~/.cache/hipdnn-trace/float64-rate."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hipdnn-trace" / SUBDIR


def cache_path(key: dict[str, str]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_folder() / f"{key['device']}-{digest}.json"


def _read(path: Path, key: dict[str, str]) -> float | None:
    """The rate kept for ``key``; None when there is none or the file is not one of ours."""
    try:
        kept = read_gate.read_json(path, read_gate.RATE_CACHE)
    except UserError:   # absent, unreadable, not a regular file, not JSON
        return None
    if not isinstance(kept, dict) or kept.get("fingerprint") != key:
        return None
    rate = kept.get("flops_per_s")
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not (np.isfinite(rate) and rate > 0):
        return None
    return float(rate)


def _keep(path: Path, key: dict[str, str], rate: float) -> float:
    """Write ``rate`` for ``key`` unless another process was first; the rate every process uses.
    A folder that cannot be written keeps the rate for this process alone."""
    body = json.dumps({"fingerprint": key, "flops_per_s": rate,
                       "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError:
        return rate
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(body)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        try:
            os.link(tmp, path)            # fails when another process kept its rate first
        except FileExistsError:
            first = _read(path, key)
            if first is not None:
                return first
            os.replace(tmp, path)         # not one of ours (corrupt, another version): ours replaces it
        return rate
    except OSError:
        return rate
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass

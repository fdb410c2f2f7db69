"""Available host memory = the least of MemAvailable, the rlimits and the cgroup limits (fake /proc
and /sys trees under tmp_path; real rlimits in a subprocess)."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import REPO

from hipdnn_trace.backends.reference.memory import available_memory_bytes

GiB = 1 << 30


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _meminfo(kib: int) -> str:
    return f"MemTotal:       99999999 kB\nMemFree:        1 kB\nMemAvailable:   {kib} kB\n"


@pytest.fixture
def no_rlimits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test process's own rlimits out of the way of the fake trees."""
    monkeypatch.setattr(resource, "getrlimit", lambda _: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def test_meminfo_alone(tmp_path, no_rlimits):
    root = _tree(tmp_path, {"proc/meminfo": _meminfo(8 * GiB // 1024)})
    assert available_memory_bytes(root) == 8 * GiB


def test_nothing_readable_is_none(tmp_path, no_rlimits):
    assert available_memory_bytes(tmp_path) is None


def test_cgroup_v2_limit_less_usage_wins(tmp_path, no_rlimits):
    root = _tree(tmp_path, {
        "proc/meminfo": _meminfo(64 * GiB // 1024),
        "proc/self/cgroup": "0::/slurm/job_42/step_0\n",
        "sys/fs/cgroup/slurm/job_42/step_0/memory.max": "max\n",
        "sys/fs/cgroup/slurm/job_42/memory.max": f"{6 * GiB}\n",     # the job's limit, one level up
        "sys/fs/cgroup/slurm/job_42/memory.current": f"{2 * GiB}\n",
        "sys/fs/cgroup/slurm/memory.max": f"{100 * GiB}\n",
        "sys/fs/cgroup/slurm/memory.current": f"{10 * GiB}\n",
    })
    assert available_memory_bytes(root) == 4 * GiB


def test_cgroup_v2_hybrid_mount_and_container_namespace(tmp_path, no_rlimits):
    """The path in /proc/self/cgroup names the host's hierarchy; the container's mount shows its root."""
    root = _tree(tmp_path, {
        "proc/meminfo": _meminfo(64 * GiB // 1024),
        "proc/self/cgroup": "0::/docker/abc123\n",
        "sys/fs/cgroup/unified/memory.max": f"{3 * GiB}\n",
        "sys/fs/cgroup/unified/memory.current": f"{1 * GiB}\n",
    })
    assert available_memory_bytes(root) == 2 * GiB


def test_cgroup_v1_limit_less_usage_and_unlimited_v1(tmp_path, no_rlimits):
    files = {
        "proc/meminfo": _meminfo(64 * GiB // 1024),
        "proc/self/cgroup": "9:pids:/\n4:memory:/process_api/xyz\n0::/\n",
        "sys/fs/cgroup/memory/process_api/xyz/memory.limit_in_bytes": f"{5 * GiB}\n",
        "sys/fs/cgroup/memory/process_api/xyz/memory.usage_in_bytes": f"{GiB}\n",
        "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",   # v1's "no limit"
        "sys/fs/cgroup/memory/memory.usage_in_bytes": f"{50 * GiB}\n",
    }
    assert available_memory_bytes(_tree(tmp_path / "a", files)) == 4 * GiB
    files["sys/fs/cgroup/memory/process_api/xyz/memory.limit_in_bytes"] = "9223372036854771712\n"
    assert available_memory_bytes(_tree(tmp_path / "b", files)) == 64 * GiB


def test_a_cgroup_already_over_its_limit_leaves_nothing(tmp_path, no_rlimits):
    root = _tree(tmp_path, {
        "proc/meminfo": _meminfo(64 * GiB // 1024),
        "proc/self/cgroup": "0::/\n",
        "sys/fs/cgroup/memory.max": f"{GiB}\n",
        "sys/fs/cgroup/memory.current": f"{2 * GiB}\n",
    })
    assert available_memory_bytes(root) == 0


@pytest.mark.parametrize("limit", ["RLIMIT_AS", "RLIMIT_DATA"])
def test_a_soft_rlimit_caps_it(limit):
    """ulimit -v / -d in a real subprocess: the limit less what the process already maps."""
    code = (
        "import resource\n"
        "from hipdnn_trace.backends.reference.memory import available_memory_bytes\n"
        "before = available_memory_bytes()\n"
        f"lim = resource.{limit}\n"
        "used = int(next(l.split()[1] for l in open('/proc/self/status') "
        f"if l.startswith('{'VmSize' if limit == 'RLIMIT_AS' else 'VmData'}:'))) * 1024\n"
        "resource.setrlimit(lim, (used + 300 * 2**20, resource.getrlimit(lim)[1]))\n"
        "after = available_memory_bytes()\n"
        "print(before, after)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, check=True).stdout.split()
    before, after = int(out[0]), int(out[1])
    assert after <= 300 * 2**20 and after > 200 * 2**20    # reading the files maps a little
    assert after < before

"""Does the CPU a measuring process runs on change what an iteration costs?

For every CPU this process may use, a child pinned to that one CPU builds cuDNN sessions for the
graphs and times a bare ``execute(); synchronize()`` loop (median of 3 rounds of N); printed
beside the CPUs the PCI device of GPU 0 calls local (sysfs ``local_cpulist``, the NUMA node
that ``nvidia-smi topo -m`` shows as "CPU Affinity"). Run on the GPU machine:

    python benchmarks/cpu_placement.py [--iters N] [graph.json ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SYSFS_PCI = Path("/sys/bus/pci/devices")


def parse_cpulist(text: str) -> set[int]:
    """``0-3,8,10-11`` -> {0, 1, 2, 3, 8, 10, 11} (the kernel's cpulist format)."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def pci_local_cpus(bus_id: str, root: Path = SYSFS_PCI) -> set[int] | None:
    """CPUs local to the PCI device ``bus_id`` (``0000:19:00.0``; NVML's 8-digit domain is accepted)."""
    parts = bus_id.strip().lower().split(":")
    if len(parts) == 2:
        parts.insert(0, "0")
    if len(parts) != 3:
        return None
    name = f"{parts[0][-4:].rjust(4, '0')}:{parts[1]}:{parts[2]}"
    try:
        cpus = parse_cpulist((root / name / "local_cpulist").read_text())
    except (OSError, ValueError):
        return None
    return cpus or None


def nvidia_bus_id(index: int) -> str | None:
    """PCI bus id of NVIDIA GPU ``index`` (NVML's numbering), or None without NVML."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            info = pynvml.nvmlDeviceGetPciInfo(pynvml.nvmlDeviceGetHandleByIndex(index))
            bus = info.busId
            return bus.decode() if isinstance(bus, bytes) else str(bus)
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        return None


def gpu_local_cpus(index: int) -> set[int] | None:
    """CPUs local to NVIDIA GPU ``index``, or None where that cannot be known here."""
    bus = nvidia_bus_id(index)
    return None if bus is None else pci_local_cpus(bus)


GRAPHS = ["graphs/pointwise/relu_clip_fp16.json", "graphs/perf/norm/llm_layernorm_8x2048x4096_fp16.json"]


def child(cpu: int, graphs: list[str], n: int) -> None:
    """Pinned to ``cpu``: us per bare iteration of each graph, as one JSON line."""
    os.sched_setaffinity(0, {cpu})
    sys.path.insert(0, str(ROOT))
    from harness_overhead import bare_loop_us  # this folder's: the same bare loop as the overhead table's

    out = {Path(relative).stem: round(bare_loop_us(ROOT / relative, n), 2) for relative in graphs}
    print(json.dumps(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("graphs", nargs="*", default=GRAPHS)
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child, args.graphs, args.iters)
        return 0
    local = gpu_local_cpus(0)
    print(f"CPUs local to GPU 0: {sorted(local) if local else 'unknown'}")
    print("| cpu | local | " + " | ".join(Path(g).stem for g in args.graphs) + " |")
    print("|---|---|" + "---|" * len(args.graphs))
    for cpu in sorted(os.sched_getaffinity(0)):
        done = subprocess.run([sys.executable, __file__, "--child", str(cpu), "--iters", str(args.iters), *args.graphs],
                              capture_output=True, text=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if not lines:
            print(f"| {cpu} | failed: {done.stderr.strip()[-200:]} |")
            continue
        values = json.loads(lines[-1])
        mark = "yes" if local and cpu in local else "no" if local else "?"
        cells = " | ".join(f"{values[Path(g).stem]:.2f}" for g in args.graphs)
        print(f"| {cpu} | {mark} | " + cells + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

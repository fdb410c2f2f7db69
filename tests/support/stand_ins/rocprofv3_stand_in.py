"""STAND-IN for rocprofv3 — not rocprofiler-sdk. Tests copy it onto PATH as ``rocprofv3``.

It understands the options hipdnn-trace passes (rocprofiler-sdk ``source/bin/rocprofv3.py``):
``--kernel-trace``, ``--marker-trace``, ``--selected-regions``, ``-i FILE`` (``pmc:`` lines),
``--output-format``, ``-d DIR``, ``-o NAME``, ``--version``, ``--help``, then ``-- app...``.
It runs the application with ``STAND_IN_ROCTX_LOG`` set, so the stand-in Python ``roctx``
module logs every marker call with its CLOCK_BOOTTIME time, and afterwards writes CSV
files with rocprofv3 1.0's column sets (marker_api_trace, kernel_trace, agent_info,
counter_collection) from that log:

* every roctx range becomes a ``MARKER_CORE_API`` row; pause/resume become
  ``MARKER_CONTROL_API`` rows; correlation ids are handed out in call order, like the
  SDK's process-wide counter;
* there is no GPU, so the stand-in invents the dispatches: one kernel inside every
  ``hipdnn_trace:iter N`` range and one inside every ``hipdnn_trace:init`` range, timed
  within its range and correlated right after the range's push;
* with ``--selected-regions`` nothing is recorded until ``roctxProfilerResume`` and after
  ``roctxProfilerPause`` (ranges pushed while paused are lost, as in rocprofv3);
* with ``-i`` it writes into ``DIR/pmc_1`` (one ``pmc:`` line, one run, as rocprofv3 does)
  and adds one counter row per recorded dispatch and counter with made-up values.

Only CSV is written whatever ``--output-format`` says (it reports SDK 0.6.0, which had no
rocpd output). The values mean nothing; the files' shapes and the timestamps' order are
what the harness's parsers and joins are tested on.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HELP = """usage: rocprofv3 [options] -- <application> [args]
  --kernel-trace  --marker-trace  --hip-runtime-trace  -i INPUT  -o OUTPUT_FILE
  -d OUTPUT_DIRECTORY  -f/--output-format {csv,json,pftrace,otf2,rocpd}  --pmc  --selected-regions
  (stand-in: these are the options hipdnn-trace uses)"""

KERNEL_HEADER = ["Kind", "Agent_Id", "Queue_Id", "Stream_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id",
                 "Kernel_Name", "Correlation_Id", "Start_Timestamp", "End_Timestamp", "Private_Segment_Size",
                 "Group_Segment_Size", "Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z",
                 "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z"]
MARKER_HEADER = ["Domain", "Function", "Process_Id", "Thread_Id", "Correlation_Id", "Start_Timestamp",
                 "End_Timestamp"]
COUNTER_HEADER = ["Correlation_Id", "Dispatch_Id", "Agent_Id", "Queue_Id", "Process_Id", "Thread_Id", "Grid_Size",
                  "Kernel_Id", "Kernel_Name", "Workgroup_Size", "LDS_Block_Size", "Scratch_Size", "VGPR_Count",
                  "Accum_VGPR_Count", "SGPR_Count", "Counter_Name", "Counter_Value", "Start_Timestamp",
                  "End_Timestamp"]
AGENT_HEADER = ["Node_Id", "Logical_Node_Id", "Agent_Type", "Cpu_Cores_Count", "Simd_Count", "Wave_Front_Size",
                "Num_Xcc", "Cu_Count", "Max_Engine_Clk_Fcompute", "Name", "Vendor_Name", "Product_Name"]


def parse(argv: list[str]) -> tuple[dict, list[str]]:
    if "--" not in argv:
        sys.exit("rocprofv3 (stand-in): expected -- <application>")
    cut = argv.index("--")
    opts, app = argv[:cut], argv[cut + 1:]
    out: dict = {"flags": set(), "formats": ["rocpd"], "dir": os.getcwd(), "name": "out", "input": None}
    i = 0
    while i < len(opts):
        a = opts[i]
        if a in ("-d", "--output-directory"):
            out["dir"], i = opts[i + 1], i + 2
        elif a in ("-o", "--output-file"):
            out["name"], i = opts[i + 1], i + 2
        elif a in ("-i", "--input"):
            out["input"], i = opts[i + 1], i + 2
        elif a in ("-f", "--output-format"):
            out["formats"], i = [], i + 1
            while i < len(opts) and not opts[i].startswith("-"):
                out["formats"].append(opts[i])
                i += 1
        elif a.startswith("--"):
            out["flags"].add(a)
            i += 1
        else:
            sys.exit(f"rocprofv3 (stand-in): unknown option {a}")
    return out, app


def pmc_lines(path: str) -> list[list[str]]:
    lines = []
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0]
        if "pmc:" in line:
            lines.append(line.replace("pmc:", "").split())
    return lines


def convert(log: list[dict], selected: bool) -> tuple[list[list], list[list]]:
    """(marker rows, kernel rows) from the roctx log, as rocprofv3 would have recorded them."""
    markers, kernels = [], []
    stacks: dict[int, list[tuple[str, int, int, bool]]] = {}
    collecting = not selected
    corr = 0
    dispatch = 0
    for ev in log:
        corr += 10
        tid, pid, t = ev["tid"], ev["pid"], ev["t"]
        if ev["op"] == "push":
            stacks.setdefault(tid, []).append((ev["msg"], t, corr, collecting))
        elif ev["op"] == "pop":
            name, start, push_corr, recorded = stacks[tid].pop()
            if recorded:
                markers.append(["MARKER_CORE_API", name, pid, tid, push_corr, start, t])
            if name.startswith(("hipdnn_trace:iter ", "hipdnn_trace:init")):
                dispatch += 1             # the dispatch happens whether or not it is recorded
                if recorded:
                    span = max(t - start, 4)
                    k_start, k_end = start + span // 4, start + 3 * span // 4
                    kind = "init" if name.endswith("init") else "iter"
                    kernels.append(["KERNEL_DISPATCH", "Agent 1", 1, 1, tid, dispatch, 7 if kind == "iter" else 3,
                                    f"stand_in_{kind}_kernel(float*, float const*)", push_corr + 1, k_start, k_end,
                                    0, 0, 256, 1, 1, 4096, 1, 1])
        elif ev["op"] == "mark":
            if collecting:
                markers.append(["MARKER_CORE_API", ev["msg"], pid, tid, corr, t, t])
        elif ev["op"] in ("pause", "resume"):
            if ev["op"] == "resume":
                collecting = True
            markers.append(["MARKER_CONTROL_API", f"roctxProfiler{ev['op'].capitalize()}", pid, tid, corr, t, t + 1])
            if ev["op"] == "pause" and selected:
                collecting = False
    return markers, kernels


def write(path: Path, header: list[str], rows: list[list]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_NONNUMERIC)
        w.writerow(header)
        w.writerows(rows)


def main(argv: list[str]) -> int:
    if "--version" in argv:
        print("    version: 0.6.0\n    rocm_version: 6.4.0 (stand-in)")
        return 0
    if "--help" in argv or "-h" in argv:
        print(HELP)
        return 0
    opts, app = parse(argv)
    out = Path(opts["dir"])
    counters: list[str] = []
    if opts["input"]:
        lines = pmc_lines(opts["input"])
        if len(lines) != 1:
            sys.exit("rocprofv3 (stand-in): supports exactly one pmc line")
        counters = lines[0]
        out = out / "pmc_1"
    fd, log_path = tempfile.mkstemp(prefix="stand-in-roctx-", suffix=".jsonl")
    os.close(fd)
    env = {**os.environ, "STAND_IN_ROCTX_LOG": log_path}
    rc = subprocess.call(app, env=env)
    log = [json.loads(line) for line in Path(log_path).read_text().splitlines() if line.strip()]
    os.unlink(log_path)
    out.mkdir(parents=True, exist_ok=True)      # output appears when the application is done
    markers, kernels = convert(log, "--selected-regions" in opts["flags"])
    name = opts["name"]
    if "--marker-trace" in opts["flags"]:
        write(out / f"{name}_marker_api_trace.csv", MARKER_HEADER, markers)
    if "--kernel-trace" in opts["flags"]:
        write(out / f"{name}_kernel_trace.csv", KERNEL_HEADER, kernels)
    write(out / f"{name}_agent_info.csv", AGENT_HEADER, [
        [0, 0, "CPU", 64, 0, 0, 1, 64, 3700, "AMD EPYC (stand-in)", "CPU", "AMD EPYC (stand-in)"],
        [1, 1, "GPU", 0, 1216, 64, 8, 304, 2100, "gfx942", "AMD", "AMD Instinct MI300X (stand-in)"],
    ])
    if counters:
        rows = []
        for k in kernels:
            tid, dispatch, kid, kname, kcorr, start, end = k[4], k[5], k[6], k[7], k[8], k[9], k[10]
            for j, counter in enumerate(counters):
                value = float(1000 * (j + 1) + dispatch)
                rows.append([kcorr, dispatch, "Agent 1", 1, log[0]["pid"] if log else 0, tid, 4096, kid, kname, 256,
                             0, 0, 8, 0, 16, counter, value, start, end])
        write(out / f"{name}_counter_collection.csv", COUNTER_HEADER, rows)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

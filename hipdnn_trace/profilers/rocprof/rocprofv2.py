"""rocprofv2 CLI text output -> frames.

rocprofv2 (ROCm 5.x/6.x, ``ROCm/rocprofiler`` tests-v2 golden traces) prints one record
per line as ``Key(value), Key(value), ...``:

* counter records: ``Dispatch_ID(1), GPU_ID(4), ..., Kernel_Name("k"), Begin_Timestamp(..),
  End_Timestamp(..), Correlation_ID(0), GRBM_COUNT(40539.000000)`` -> kernels + counters;
* API records: ``Domain(HIP_API_DOMAIN), Function(hipMalloc), Start_Timestamp(..), ...``;
* roctx records: ``Domain(ROCTX_DOMAIN), Timestamp(..), ROCTX_ID(n), ROCTX_Message(..)``;
  a record without a message closes the most recent open range with that ROCTX_ID.

Lines that are not records (banners such as "Enabling API Tracing") are skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from hipdnn_trace.profilers.rocprof.frames import API, COUNTERS_FULL, KERNELS_FULL, MARKERS, columns_frame
from hipdnn_trace.profilers.rocprof.legacy import clean_kernel_name
from hipdnn_trace.profilers.rocprof.table import ProfileFormatError, parse_float, parse_int, read_lines

_RECORD_START = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\(")
_COUNTER_META = {
    "Dispatch_ID", "GPU_ID", "Queue_ID", "Process_ID", "Thread_ID", "Grid_Size", "Workgroup_Size",
    "LDS", "Scratch_Size", "Arch_VGPR", "Accumulative_VGPR", "SGPR", "Wave_Size", "Kernel_Name",
    "Begin_Timestamp", "End_Timestamp", "Correlation_ID",
}


def parse_record(line: str) -> dict[str, str] | None:
    """``A(1), B("x, y"), C(f(2))`` -> {"A": "1", "B": "x, y", "C": "f(2)"}; None if not a record."""
    s = line.strip()
    if not _RECORD_START.match(s):
        return None
    fields: dict[str, str] = {}
    i, n = 0, len(s)
    while i < n:
        j = s.find("(", i)
        if j < 0:
            return None
        key = s[i:j].strip()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            return None
        depth, k, quoted = 1, j + 1, False
        while k < n and depth:
            ch = s[k]
            if ch == '"':
                quoted = not quoted
            elif not quoted and ch == "(":
                depth += 1
            elif not quoted and ch == ")":
                depth -= 1
            k += 1
        if depth:
            return None
        value = s[j + 1 : k - 1]
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        fields[key] = value
        i = k
        while i < n and s[i] in ", ":
            i += 1
    return fields or None


def looks_like_rocprofv2(lines: list[str]) -> bool:
    for line in lines[:50]:
        if line.startswith("ROCProfilerV2"):
            return True
        rec = parse_record(line)
        if rec and ("Dispatch_ID" in rec or "Domain" in rec):
            return True
    return False


class _Records:
    """The four tables of one rocprofv2 text file, filled record by record."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.kern: dict[str, list] = {k: [] for k in (
            "name", "start_ns", "end_ns", "duration_ns", "device", "correlation_id", "dispatch_id", "queue", "stream",
            "thread_id", "process_id")}
        self.cnt: dict[str, list] = {k: [] for k in (
            "kernel", "correlation_id", "counter", "value", "dispatch_id", "device", "thread_id", "process_id",
            "start_ns", "end_ns")}
        self.api: dict[str, list] = {k: [] for k in ("domain", "function", "correlation_id", "start_ns", "end_ns")}
        self.marks: dict[str, list] = {k: [] for k in ("name", "start_ns", "end_ns")}
        self.open_ranges: dict[str, list[tuple[str, int]]] = {}

    def num(self, rec: dict[str, str], key: str, lineno: int) -> int | None:
        v = parse_int(rec.get(key))
        if v is not None and not isinstance(v, int):
            raise ProfileFormatError(f"{self.path}: line {lineno}: {key}({rec.get(key)}) is not an integer")
        return v  # type: ignore[return-value]

    def add(self, rec: dict[str, str], lineno: int) -> None:
        if "Dispatch_ID" in rec:
            self.dispatch(rec, lineno)
        elif rec.get("Domain", "").startswith("ROCTX"):
            self.roctx(rec, lineno)
        elif "Domain" in rec and "Function" in rec:
            num, api = self.num, self.api
            api["domain"].append(rec["Domain"])
            api["function"].append(rec["Function"])
            api["correlation_id"].append(num(rec, "Correlation_ID", lineno))
            api["start_ns"].append(num(rec, "Start_Timestamp", lineno))
            api["end_ns"].append(num(rec, "End_Timestamp", lineno))

    def dispatch(self, rec: dict[str, str], lineno: int) -> None:
        """A kernel dispatch, with the counters its record carries."""
        num, kern, cnt = self.num, self.kern, self.cnt
        name = clean_kernel_name(rec.get("Kernel_Name"))
        start, end = num(rec, "Begin_Timestamp", lineno), num(rec, "End_Timestamp", lineno)
        ids = {
            "dispatch_id": num(rec, "Dispatch_ID", lineno),
            "device": num(rec, "GPU_ID", lineno),
            "thread_id": num(rec, "Thread_ID", lineno),
            "process_id": num(rec, "Process_ID", lineno),
            "correlation_id": num(rec, "Correlation_ID", lineno),
        }
        kern["name"].append(name)
        kern["start_ns"].append(start)
        kern["end_ns"].append(end)
        kern["duration_ns"].append(end - start if start is not None and end is not None else None)
        kern["queue"].append(num(rec, "Queue_ID", lineno))
        kern["stream"].append(kern["queue"][-1])
        for k, v in ids.items():
            kern[k].append(v)
        for key, text in rec.items():
            if key in _COUNTER_META:
                continue
            value = parse_float(text)
            if not isinstance(value, float):
                raise ProfileFormatError(f"{self.path}: line {lineno}: counter {key}({text}) is not a number")
            cnt["kernel"].append(name)
            cnt["counter"].append(key)
            cnt["value"].append(value)
            cnt["start_ns"].append(start)
            cnt["end_ns"].append(end)
            for k, v in ids.items():
                cnt[k].append(v)

    def roctx(self, rec: dict[str, str], lineno: int) -> None:
        """A roctx mark, range start or range end."""
        marks = self.marks
        ts = self.num(rec, "Timestamp", lineno)
        rid = rec.get("ROCTX_ID", "0")
        msg = rec.get("ROCTX_Message")
        if msg is None:
            stack = self.open_ranges.get(rid)
            if not stack:
                raise ProfileFormatError(f"{self.path}: line {lineno}: roctx range end without a start "
                                         f"(ROCTX_ID {rid})")
            name, start = stack.pop()
            marks["name"].append(name)
            marks["start_ns"].append(start)
            marks["end_ns"].append(ts)
        elif msg.startswith("ROCTX-MARK:"):
            marks["name"].append(msg.removeprefix("ROCTX-MARK:").strip())
            marks["start_ns"].append(ts)
            marks["end_ns"].append(ts)
        else:
            self.open_ranges.setdefault(rid, []).append((msg.removeprefix("ROCTX-RANGE:").strip(), ts or 0))

    def frames(self) -> dict[str, pl.DataFrame]:
        n_k, n_c = len(self.kern["name"]), len(self.cnt["kernel"])
        return {
            "kernels": columns_frame({**self.kern, "source": ["rocprofv2"] * n_k}, KERNELS_FULL),
            "counters": columns_frame({**self.cnt, "source": ["rocprofv2"] * n_c}, COUNTERS_FULL),
            "api": columns_frame(self.api, API),
            "markers": columns_frame(self.marks, MARKERS),
        }


def read_rocprofv2(path: Path) -> dict[str, pl.DataFrame]:
    lines = read_lines(path)
    if not looks_like_rocprofv2(lines):
        raise ProfileFormatError(f"{path}: not rocprofv2 text output (no Key(value) records)")
    records = _Records(path)
    for lineno, line in enumerate(lines, 1):
        rec = parse_record(line)
        if rec is not None:
            records.add(rec, lineno)
    return records.frames()

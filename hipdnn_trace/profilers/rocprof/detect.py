"""Which AMD profiler file is this? Decided from content (header / magic), not the name.

``detect(path)`` returns a :class:`Detected` with a ``kind`` (what the file holds) and a
``format`` (which tool wrote it). Kinds with a parser: kernel_trace, counter_collection,
api_trace (Domain/Function rows: markers and host APIs), stats, agent_info, sysinfo, v1_results,
wide, rocpd, v1_db, rocprofv2. Files recognised but not parsed (memory-copy traces, PC
sampling, rocprof-compute's sysinfo/roofline, JSON traces) get kind ``ignored`` with the
reason; anything else is ``unknown``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hipdnn_trace.errors import UserError
from hipdnn_trace.profilers.ncu_csv import looks_like_ncu_raw
from hipdnn_trace.profilers.rocprof import legacy, rocpd_sqlite, rocprofv2
from hipdnn_trace.profilers.rocprof.table import ProfileFormatError, Table, read_lines, read_table

#: ``--format`` values and the kinds each accepts.
FORMATS: dict[str, tuple[str, ...]] = {
    "rocprofv3": ("kernel_trace", "counter_collection", "api_trace", "stats", "agent_info", "memory_trace"),
    "rocpd": ("rocpd", "kernel_trace", "counter_collection", "api_trace", "agent_info", "memory_trace"),
    "rocprof": ("v1_results", "v1_db", "stats"),
    "rocprofv2": ("rocprofv2", "wide"),
    "rocprof-compute": ("wide", "counter_collection", "sysinfo"),
    "ncu": ("ncu_raw", "ncu_report"),
}

#: rocprofv3's data-movement traces: parsed into the ``memory`` frame
MEMORY_HEADERS = (frozenset({"kind", "direction", "start_timestamp"}),
                  frozenset({"kind", "operation", "allocation_size", "start_timestamp"}),
                  frozenset({"kind", "operation", "alloc_flags", "start_timestamp"}))

_IGNORED_HEADERS: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"sample_timestamp", "exec_mask"}), "PC sampling"),
    (frozenset({"device", "hbmbw"}), "rocprof-compute roofline benchmark"),
    (frozenset({"workload_name"}), "rocprof-compute sysinfo"),
    (frozenset({"kernel_name", "count", "sum(ns)"}), "rocprof-compute kernel summary"),
    (frozenset({"codeobj", "vaddr", "instruction"}), "thread-trace instruction stats"),
)


@dataclass
class Detected:
    path: Path
    kind: str
    format: str
    note: str = ""
    table: Table | None = None

    @property
    def parsed(self) -> bool:
        return self.kind not in ("ignored", "unknown")


def detect(path: Path) -> Detected:
    """Classify one file; a malformed CSV raises a one-line ProfileFormatError."""
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    if rocpd_sqlite.is_sqlite(path):
        return _detect_sqlite(path)
    suffix = path.suffix.lower()
    if suffix == ".ncu-rep":   # binary: exported through ncu itself (profilers/ncu_why.py)
        return Detected(path, "ncu_report", "ncu")
    if suffix == ".json":
        return Detected(path, "ignored", "", "JSON trace: not parsed (ingest the CSV or database of the same run)")
    if suffix in (".pftrace", ".otf2", ".proto", ".yaml", ".yml", ".xml"):
        return Detected(path, "ignored", "", f"{suffix} file: not profiler data ingest reads")
    lines = read_lines(path, keepends=True)
    if suffix == ".csv" and looks_like_ncu_raw("".join(lines[:50])):
        return Detected(path, "ncu_raw", "ncu")
    if rocprofv2.looks_like_rocprofv2([line.rstrip("\r\n") for line in lines[:50]]):
        return Detected(path, "rocprofv2", "rocprofv2")
    if suffix != ".csv":
        return Detected(path, "unknown", "", "not a CSV, SQLite or rocprofv2 text file")
    table = read_table(path, text=lines, overflow_into_first=_is_stats_header(lines))
    return classify_table(table)


def _is_stats_header(lines: list[str]) -> bool:
    first = next((ln for ln in lines if ln.strip()), "").lower().replace('"', "")
    return first.startswith("name,calls,totaldurationns")


def classify_table(table: Table) -> Detected:
    names = table.names
    path = table.path
    rocpd_csv = "guid" in names or (table.header and table.header[0].lower() == "pid")
    fmt = "rocpd" if rocpd_csv else "rocprofv3"
    if {"kernel_name", "start_timestamp", "end_timestamp"} <= names and "kind" in names:
        return Detected(path, "kernel_trace", fmt, table=table)
    if {"counter_name", "counter_value", "kernel_name"} <= names:
        compute = "gpu_id" in names and "correlation_id" not in names
        return Detected(path, "counter_collection", "rocprof-compute" if compute else fmt, table=table)
    if {"domain", "function", "start_timestamp", "end_timestamp"} <= names:
        return Detected(path, "api_trace", fmt, table=table)
    if {"name", "calls", "totaldurationns"} <= names:
        return Detected(path, "stats", "rocprofv3" if "minns" in names else "rocprof", table=table)
    if {"node_id", "agent_type"} <= names:
        return Detected(path, "agent_info", fmt, table=table)
    if legacy.is_v1_results(names):
        if not legacy.counter_columns(table, legacy.V1_META) and "beginns" not in names:
            return Detected(path, "ignored", "rocprof", "dispatch list without timestamps or counters")
        return Detected(path, "v1_results", "rocprof", table=table)
    if legacy.is_wide(names):
        if not legacy.counter_columns(table, legacy.WIDE_META) and not names & {"start_timestamp", "beginns"}:
            return Detected(path, "ignored", "rocprof-compute", "dispatch list without timestamps or counters")
        fmt = "rocprofv2" if {"queue_id", "pid", "tid"} <= names else "rocprof-compute"
        return Detected(path, "wide", fmt, table=table)
    if legacy.is_compute_sysinfo(names):
        return Detected(path, "sysinfo", "rocprof-compute", table=table)
    if any(header <= names for header in MEMORY_HEADERS):
        return Detected(path, "memory_trace", fmt, table=table)
    for header, what in _IGNORED_HEADERS:
        if header <= names:
            return Detected(path, "ignored", "", f"{what}: not ingested")
    return Detected(path, "unknown", "", f"unrecognised CSV header ({', '.join(table.header[:6])}, ...)")


def _detect_sqlite(path: Path) -> Detected:
    from contextlib import closing

    with closing(rocpd_sqlite.connect(path)) as con:
        names = rocpd_sqlite.object_names(con)
    if rocpd_sqlite.is_rocpd(names):
        return Detected(path, "rocpd", "rocpd")
    if legacy.is_v1_db(names):
        return Detected(path, "v1_db", "rocprof")
    return Detected(path, "unknown", "", "SQLite database without rocpd or rocprof v1 tables")


def check_format(found: Detected, forced: str | None) -> None:
    """With ``--format``, a file of another kind is an error, not a silent guess."""
    if forced is None or not found.parsed:
        return
    if forced not in FORMATS:
        raise UserError(f"--format {forced}: unknown (choose from {', '.join(FORMATS)})")
    if found.kind not in FORMATS[forced]:
        raise ProfileFormatError(
            f"{found.path}: --format {forced} given but the file is a {found.format or 'unknown'} "
            f"{found.kind.replace('_', ' ')}"
        )

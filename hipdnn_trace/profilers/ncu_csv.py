"""Nsight Compute ``--csv --page raw`` output -> the project's kernels and counters frames.

Format (as ncu 2025.3 writes it, captured on an H200; tests/data/ncu/): a header row
starting ``"ID","Process ID","Process Name","Host Name"``, then NVTX columns when the
run used ``--nvtx`` (``thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg``),
``Kernel Name``, ``Context``, ``Stream``, ``Block Size``, ``Grid Size``, ``Device``,
``CC`` and one column per metric (``dram__bytes.sum``...). The second row holds each
column's unit (empty for the identity columns). Numbers carry thousands separators
(``"4,456,704"``); without ``--print-units base`` values are scaled (``Mbyte``, ``us``)
and are converted back to base units here. Lines ncu prints around the table
(``==PROF==``, ``==WARNING==``) are skipped.

The NVTX cell lists the thread's push/pop stack: ``<tid>  "domain:range:...:msg"  "..."``.
Kernels inside ``hipdnn_trace`` ranges ``graph <graph_id> <config>`` > ``execute`` >
``iter <i>`` get graph_id, config (the marker-safe spelling) and iteration.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from hipdnn_trace import read_gate
from hipdnn_trace.errors import UserError
from hipdnn_trace.markers import DOMAIN

#: Raw-page columns that describe the launch or device, not a measurement.
NOT_COUNTERS = ("device__attribute_", "launch__", "c2clink__", "nvlink__", "profiler__")
NVTX_PUSH_POP = "thread Domain:Push/Pop_Range"

_SI = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_TIME = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
_ELEMENT = re.compile(r'"([^"]*)"')
_GRAPH = re.compile(r"^graph (\S+) (.*)$")
_ITER = re.compile(r"^iter (\d+)$")


@dataclass
class RawTable:
    """One ncu raw CSV: column names, their units, and the rows as strings."""

    columns: list[str]
    units: dict[str, str]
    rows: list[list[str]]
    source: str = ""
    notes: list[str] = field(default_factory=list)

    def column(self, name: str) -> list[str]:
        i = self.columns.index(name)
        return [r[i] if i < len(r) else "" for r in self.rows]


def looks_like_ncu_raw(head: str) -> bool:
    """True when ``head`` (the first KBs of a file) holds an ncu raw-page header row."""
    for line in head.splitlines()[:50]:
        if line.startswith('"ID","Process ID","Process Name","Host Name"') and '"Kernel Name"' in line:
            return True
    return False


def read_raw_csv(source: str | Path, text: str | None = None) -> RawTable:
    """Parse the table; UserError (naming the file) when there is none."""
    name = str(source)
    if text is None:
        text = read_gate.read_text(source, read_gate.PROFILER_CAPTURE, errors="replace")
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"')), None)
    if start is None:
        raise UserError(f"{name}: no ncu raw CSV header (\"ID\",\"Process ID\",...): was it written with "
                        "--csv --page raw?")
    kept = [line for line in lines[start:] if not line.startswith("==")]
    rows = list(csv.reader(io.StringIO("\n".join(kept))))
    header, body = rows[0], rows[1:]
    if "Kernel Name" not in header:
        raise UserError(f"{name}: ncu CSV header has no 'Kernel Name' column")
    twice = sorted({c for c in header if c and header.count(c) > 1})
    if twice:
        raise UserError(f"{name}: ncu CSV header names column(s) {', '.join(map(repr, twice[:3]))} twice")
    units: dict[str, str] = {}
    if body and body[0] and body[0][0] == "":
        units = {c: u for c, u in zip(header, body[0]) if u}
        body = body[1:]
    body = [r for r in body if r and any(cell for cell in r)]
    return RawTable(columns=header, units=units, rows=body, source=name)


def number(text: str) -> float | None:
    """``"4,456,704"`` -> 4456704.0; ``"1,093.33"`` -> 1093.33; ``""``/``"n/a"`` -> None."""
    t = text.strip().replace(",", "")
    if not t or t.lower() in ("n/a", "nan", "-"):
        return None
    try:
        return float(t)
    except ValueError:
        return None


#: base units of a count, a time, a rate or a share: a negative value of one is a damaged file
_NON_NEGATIVE = ("byte", "inst", "cycle", "sector", "request", "warp", "thread", "block", "wavefront",
                 "transaction", "op", "flop", "ns", "%", "hz", "khz", "mhz", "ghz")
_INT64_MAX = 2**63 - 1


def checked(table: RawTable, row: int, column: str, value: float, unit: str) -> float:
    """A finite value that fits the frames: ``1e400`` (inf) is refused everywhere; a negative one
    where the unit is a count, time, rate or percent (a unitless metric may be a signed ratio)."""
    where = f"{table.source}: row {row + 1} column {column!r}"
    if not math.isfinite(value) or abs(value) > _INT64_MAX:
        raise UserError(f"{where} is {value:g} {unit}".rstrip() + "; not a value ncu writes")
    if value < 0 and unit.split("/")[0].lower() in _NON_NEGATIVE:
        raise UserError(f"{where} is {value:g} {unit}; a {unit} cannot be negative")
    return value


def ident(table: RawTable, row: int, column: str, text: str) -> int | None:
    """An id column (ID, Device, Stream, Process ID): empty, or a non-negative integer below 2**63."""
    value = number(text)
    if value is None:
        return None
    if not math.isfinite(value) or value < 0 or value != int(value) or value > _INT64_MAX:
        raise UserError(f"{table.source}: row {row + 1} column {column!r} is {text.strip()!r:.40}, not an id")
    return int(value)


def unit_scale(unit: str) -> tuple[float, str]:
    """(factor to base units, base unit): ``Mbyte`` -> (1e6, ``byte``), ``us`` -> (1e3, ``ns``),
    ``Gbyte/s`` -> (1e9, ``byte/s``)."""
    u = unit.strip()
    if not u:
        return 1.0, ""
    head, slash, tail = u.partition("/")
    if head in _TIME and not slash:
        return _TIME[head], "ns"
    factor, base = 1.0, head
    if len(head) > 1 and head[0] in _SI and head[0] != "" and head[1:] in ("byte", "inst", "cycle", "sector",
                                                                           "request", "warp", "thread", "block",
                                                                           "wavefront", "transaction", "op", "flop"):
        factor, base = _SI[head[0]], head[1:]
    if slash:
        if tail in ("second", "s"):
            return factor, f"{base}/s"
        if tail in _TIME:   # per usecond etc.: per second = value / time factor * 1e9
            return factor * 1e9 / _TIME[tail], f"{base}/s"
        return factor, f"{base}/{tail}"
    return factor, base


def nvtx_stack(cell: str) -> list[tuple[str, str]]:
    """(domain, range name) for each push/pop range of the cell, outermost first."""
    out = []
    for element in _ELEMENT.findall(cell):
        domain, _, rest = element.partition(":")
        # rest = range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg (five fields between the
        # range name and the message); for registered strings the range name and the
        # message are the same text, which may itself hold colons.
        parts = rest.split(":")
        name = rest
        if len(parts) >= 7:
            for cut in range(1, len(parts) - 5):
                head, tail = ":".join(parts[:cut]), ":".join(parts[cut + 5:])
                if head == tail:
                    name = head
                    break
            else:
                name = ":".join(parts[:-6])
        out.append((domain, name))
    return out


def harness_labels(stack: list[tuple[str, str]]) -> dict[str, object]:
    """graph_id, config, phase and iteration from the hipdnn_trace ranges of a stack."""
    labels: dict[str, object] = {"graph_id": None, "config": None, "phase": None, "iteration": None}
    names = [n for d, n in stack if d == DOMAIN]
    for n in names:
        m = _GRAPH.match(n)
        if m:
            labels["graph_id"], labels["config"] = m.group(1), m.group(2)
        elif n == "execute":
            labels["phase"] = "timed"
        elif n == "warmup":
            labels["phase"] = "warmup"
        else:
            m = _ITER.match(n)
            if m:
                labels["iteration"] = int(m.group(1))
    if labels["phase"] != "timed":
        labels["iteration"] = None
    return labels


def _dims(table: RawTable, row: int, column: str, text: str) -> tuple[int | None, int | None, int | None]:
    nums: list[int | None] = [int(v) if len(v) < 19 else _too_big(table, row, column) for v in
                              re.findall(r"\d+", text or "")]
    nums += [None] * (3 - len(nums))
    return nums[0], nums[1], nums[2]


def _too_big(table: RawTable, row: int, column: str) -> int:
    raise UserError(f"{table.source}: row {row + 1} column {column!r} holds a dimension over 2**63")


def counter_columns(table: RawTable, wanted: list[str] | None = None) -> list[str]:
    if wanted:
        missing = [m for m in wanted if m not in table.columns]
        if missing:
            table.notes.append(f"metrics not in the CSV: {', '.join(missing)}")
        return [m for m in wanted if m in table.columns]
    return [c for c in table.columns if "__" in c and not c.startswith(NOT_COUNTERS)]


def frames(table: RawTable, wanted: list[str] | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(kernels, counters) frames: one kernel row per profiled launch, counters long."""
    cols = table.columns
    idx = {c: i for i, c in enumerate(cols)}
    nvtx_col = next((c for c in cols if c.startswith(NVTX_PUSH_POP)), None)
    metrics = counter_columns(table, wanted)
    scales = {m: unit_scale(table.units.get(m, "")) for m in metrics}
    kernel_rows, counter_rows = [], []
    duration_col = "gpu__time_duration.sum" if "gpu__time_duration.sum" in idx else None

    def cell(row: list[str], name: str) -> str:
        i = idx.get(name)
        return row[i] if i is not None and i < len(row) else ""

    for r, row in enumerate(table.rows):
        kid = ident(table, r, "ID", cell(row, "ID"))
        if kid is None:
            continue
        labels = harness_labels(nvtx_stack(cell(row, nvtx_col))) if nvtx_col else \
            {"graph_id": None, "config": None, "phase": None, "iteration": None}
        name = cell(row, "Kernel Name")
        gx, gy, gz = _dims(table, r, "Grid Size", cell(row, "Grid Size"))
        bx, by, bz = _dims(table, r, "Block Size", cell(row, "Block Size"))
        duration = None
        if duration_col:
            raw = number(cell(row, duration_col))
            factor, base = scales.get(duration_col, unit_scale(table.units.get(duration_col, "")))
            duration = None if raw is None else int(round(checked(table, r, duration_col, raw * factor, base)))
        device = ident(table, r, "Device", cell(row, "Device"))
        kernel_rows.append({
            **labels, "name": name, "duration_ns": duration, "grid_x": gx, "grid_y": gy, "grid_z": gz,
            "block_x": bx, "block_y": by, "block_z": bz, "stream": ident(table, r, "Stream", cell(row, "Stream")),
            "device": device, "correlation_id": kid, "dispatch_id": kid,
            "process_id": ident(table, r, "Process ID", cell(row, "Process ID")), "source": "ncu",
        })
        for m in metrics:
            value = number(cell(row, m))
            if value is None:
                continue
            factor, base = scales[m]
            counter_rows.append({**labels, "kernel": name, "correlation_id": kid, "dispatch_id": kid,
                                 "device": device, "counter": m,
                                 "value": checked(table, r, m, value * factor, base), "unit": base, "source": "ncu"})
    kernel_schema = {"graph_id": pl.String, "config": pl.String, "phase": pl.String, "iteration": pl.Int64,
                     "name": pl.String, "duration_ns": pl.Int64, "grid_x": pl.Int64, "grid_y": pl.Int64,
                     "grid_z": pl.Int64, "block_x": pl.Int64, "block_y": pl.Int64, "block_z": pl.Int64,
                     "stream": pl.Int64, "device": pl.Int64, "correlation_id": pl.Int64, "dispatch_id": pl.Int64,
                     "process_id": pl.Float64, "source": pl.String}
    counter_schema = {"graph_id": pl.String, "config": pl.String, "phase": pl.String, "iteration": pl.Int64,
                      "kernel": pl.String, "correlation_id": pl.Int64, "dispatch_id": pl.Int64,
                      "device": pl.Int64, "counter": pl.String, "value": pl.Float64, "unit": pl.String,
                      "source": pl.String}
    kernels = pl.DataFrame(kernel_rows, schema=kernel_schema)
    counters = pl.DataFrame(counter_rows, schema=counter_schema)
    return kernels.with_columns(pl.col("process_id").cast(pl.Int64)), counters


def last_loop(frame: pl.DataFrame) -> pl.DataFrame:
    """Per graph x config, only the last timed loop (ordered by ncu ID).

    ``--autotune`` times each candidate engine in a short loop of its own before the
    measured one; iteration numbers restart at 0 in each. The measured loop is the last.
    """
    if frame.is_empty() or "iteration" not in frame.columns:
        return frame
    f = frame.sort("correlation_id").with_columns(
        (pl.col("iteration").fill_null(-1).diff().fill_null(0) < 0).cast(pl.Int64)
        .cum_sum().over(["graph_id", "config"]).alias("_loop"))
    last = f.group_by(["graph_id", "config"]).agg(pl.col("_loop").max().alias("_last"))
    return f.join(last, on=["graph_id", "config"], how="left", nulls_equal=True) \
        .filter(pl.col("_loop") == pl.col("_last")).drop("_loop", "_last")


def agents(table: RawTable) -> pl.DataFrame:
    """One row per profiled device: ``sm_XY`` from the CC column, product and SM count from the
    raw page's device attributes (so ``ingest`` can pick the profile and peak-table entry)."""
    rows = {}
    for row in table.rows:
        get = {c: (row[i] if i < len(row) else "") for i, c in enumerate(table.columns)}
        device = number(get.get("Device", ""))
        cc = get.get("CC", "")
        if device is None or not cc:
            continue
        sms = number(get.get("device__attribute_multiprocessor_count", ""))
        rows[int(device)] = {"node_id": int(device), "logical_node_id": int(device), "type": "GPU",
                             "arch": "sm_" + cc.replace(".", ""),
                             "product": get.get("device__attribute_display_name") or None,
                             "cu_count": None if sms is None else int(sms)}
    return pl.DataFrame(list(rows.values()), schema={"node_id": pl.Int64, "logical_node_id": pl.Int64,
                                                     "type": pl.String, "arch": pl.String, "product": pl.String,
                                                     "cu_count": pl.Int64})

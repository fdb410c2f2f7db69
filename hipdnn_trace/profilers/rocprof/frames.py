"""Frames the AMD parsers produce besides the project's ``kernels`` / ``counters``.

``KERNEL_EXTRAS`` / ``COUNTER_EXTRAS`` are appended after the schema columns (``conform``
keeps extras last); the other schemas are internal inputs of the marker join
(``MARKERS``, ``API``) or side outputs of ``ingest`` (``STATS``, ``AGENTS``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from hipdnn_trace.results.schemas import COUNTERS, KERNELS, Schema

#: Columns after KERNELS' own. ``dispatch_id`` is rocprofv3's per-process dispatch
#: counter (the key that matches a dispatch across counter passes and to its counters);
#: ``phase`` init|warmup|timed and ``join`` (api|correlation|time) come from the marker join;
#: ``pass`` is the counter pass (rocprofv3 ``pmc_<n>`` directory) and ``capture`` names the
#: profiled run a row came from (its output directory, relative to what was ingested).
KERNEL_EXTRAS: Schema = {
    "dispatch_id": pl.Int64(),
    "kernel_id": pl.Int64(),
    "queue": pl.Int64(),
    "thread_id": pl.Int64(),
    "process_id": pl.Int64(),
    "agent": pl.String(),
    "phase": pl.String(),
    "join": pl.String(),
    "pass": pl.Int64(),
    "capture": pl.String(),
}

COUNTER_EXTRAS: Schema = {
    "dispatch_id": pl.Int64(),
    "device": pl.Int64(),
    "thread_id": pl.Int64(),
    "process_id": pl.Int64(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "phase": pl.String(),
    "join": pl.String(),
    "pass": pl.Int64(),
    "capture": pl.String(),
}

KERNELS_FULL: Schema = {**KERNELS, **KERNEL_EXTRAS}
COUNTERS_FULL: Schema = {**COUNTERS, **COUNTER_EXTRAS}

#: roctx ranges and marks (instant marks have start_ns == end_ns).
MARKERS: Schema = {
    "name": pl.String(),
    "process_id": pl.Int64(),
    "thread_id": pl.Int64(),
    "correlation_id": pl.Int64(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
}

#: Host API calls (HIP runtime); a kernel's Correlation_Id names the call that launched it.
API: Schema = {
    "domain": pl.String(),
    "function": pl.String(),
    "process_id": pl.Int64(),
    "thread_id": pl.Int64(),
    "correlation_id": pl.Int64(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
}

#: Aggregate tables: rocprofv3 ``*_stats.csv``, legacy ``results.*stats.csv``.
STATS: Schema = {
    "domain": pl.String(),          # kernel | hip_api | hsa_api | memory_copy | marker | domain | ...
    "name": pl.String(),
    "calls": pl.Int64(),
    "total_ns": pl.Int64(),
    "average_ns": pl.Float64(),
    "percentage": pl.Float64(),
    "min_ns": pl.Int64(),
    "max_ns": pl.Int64(),
    "stddev_ns": pl.Float64(),
    "source": pl.String(),
    "file": pl.String(),
}

#: One row per HSA agent (agent_info.csv, rocpd_info_agent).
AGENTS: Schema = {
    "node_id": pl.Int64(),
    "logical_node_id": pl.Int64(),
    "type": pl.String(),            # CPU | GPU
    "arch": pl.String(),            # gfx942 ...
    "product": pl.String(),
    "num_xcc": pl.Int64(),
    "cu_count": pl.Int64(),
    "max_clock_mhz": pl.Int64(),
    "wave_size": pl.Int64(),
    # rocprof-compute sysinfo.csv facts its analysis formulas use (null elsewhere unless given)
    "max_waves_per_cu": pl.Int64(),
    "max_mem_clock_mhz": pl.Int64(),
    "hbm_channels": pl.Int64(),
    "l2_channels": pl.Int64(),
    "lds_banks_per_cu": pl.Int64(),
}


def columns_frame(columns: Mapping[str, Sequence[Any]], schema: Schema) -> pl.DataFrame:
    """Columns (missing ones null) -> a frame with exactly ``schema``'s columns and types."""
    n = max((len(v) for v in columns.values() if v is not None), default=0)
    data = {
        name: list(columns[name]) if columns.get(name) is not None else [None] * n for name in schema
    }
    return pl.DataFrame(data, schema=schema, strict=False)


def durations(start: Sequence[int | None], end: Sequence[int | None]) -> list[int | None]:
    """end - start per row; null where either end of the interval is missing."""
    return [e - s if e is not None and s is not None else None for s, e in zip(start, end)]


#: memory copies, allocations and scratch events of rocprofv3 (memory_copy_trace.csv, memory_allocation_trace.csv,
#: scratch_memory_trace.csv): what a capture of data movement holds (no kernels, no counters)
MEMORY: Schema = {
    "capture": pl.String(),
    "kind": pl.String(),            # MEMORY_COPY | MEMORY_ALLOCATION | SCRATCH_MEMORY
    "operation": pl.String(),       # direction of a copy (MEMORY_COPY_HOST_TO_DEVICE) or the allocation operation
    "src_agent": pl.Int64(),        # copies: source agent; allocations: the agent
    "dst_agent": pl.Int64(),
    "size_bytes": pl.Int64(),       # allocations (and copies where the file has a size column)
    "correlation_id": pl.Int64(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "duration_ns": pl.Int64(),
}

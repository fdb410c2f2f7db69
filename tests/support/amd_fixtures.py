"""Helpers shared by the AMD profiler tests (a module name no other test folder uses)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest


def upstream_file(root: Path, rel: str) -> Path:
    path = root / rel
    if not path.is_file():
        pytest.skip(f"upstream fixture {rel} not present")
    return path


def make_rocpd(path: Path) -> Path:
    """A minimal rocpd database: the tables and views data_views.sql defines, with the
    columns the reader uses (kernels, regions, counters_collection, rocpd_info_agent)."""
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE rocpd_metadata (id INTEGER, tag TEXT, value TEXT);
        INSERT INTO rocpd_metadata VALUES (1, 'schema_version', '3');
        CREATE TABLE rocpd_kernel_dispatch (id INTEGER);
        CREATE TABLE rocpd_info_agent (id INTEGER, guid TEXT, type TEXT, absolute_index INTEGER,
            logical_index INTEGER, type_index INTEGER, name TEXT, product_name TEXT, extdata TEXT);
        INSERT INTO rocpd_info_agent VALUES (0, 'g', 'CPU', 0, 0, 0, 'EPYC', 'EPYC', '{}'),
            (1, 'g', 'GPU', 1, 1, 0, 'gfx942', 'AMD Instinct MI300X',
             '{"num_xcc": 8, "cu_count": 304, "max_engine_clk_fcompute": 2100, "wave_front_size": 64}');
        CREATE TABLE kernels (name TEXT, start INTEGER, end INTEGER, grid_x INTEGER, grid_y INTEGER,
            grid_z INTEGER, workgroup_x INTEGER, workgroup_y INTEGER, workgroup_z INTEGER, stream_id INTEGER,
            queue_id INTEGER, agent_abs_index INTEGER, stack_id INTEGER, dispatch_id INTEGER,
            kernel_id INTEGER, tid INTEGER, pid INTEGER);
        INSERT INTO kernels VALUES ('gemm', 21000, 25000, 64, 1, 1, 256, 1, 1, 0, 1, 1, 9, 3, 12, 100, 100);
        CREATE TABLE regions (category TEXT, name TEXT, pid INTEGER, tid INTEGER, stack_id INTEGER,
            start INTEGER, end INTEGER);
        INSERT INTO regions VALUES ('MARKER_CORE_RANGE_API', 'hipdnn_trace:iter 0', 100, 100, 8, 20100, 30000),
            ('MARKER_CONTROL_API', 'roctxProfilerPause', 100, 100, 2, 1, 2),
            ('HIP_RUNTIME_API_EXT', 'hipLaunchKernel', 100, 100, 9, 20500, 20600);
        CREATE TABLE counters_collection (kernel_name TEXT, stack_id INTEGER, counter_name TEXT, value REAL,
            dispatch_id INTEGER, agent_abs_index INTEGER, tid INTEGER, pid INTEGER, start INTEGER, end INTEGER);
        INSERT INTO counters_collection VALUES ('gemm', 9, 'SQ_WAVES', 1024.0, 3, 1, 100, 100, 21000, 25000);
        """
    )
    con.commit()
    con.close()
    return path

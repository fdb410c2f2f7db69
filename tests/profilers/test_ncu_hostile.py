"""Hostile ncu raw CSVs (issue 33 item 7): metric values 1e400 or -5, huge ids and dimensions,
missing or duplicated columns are one line naming file, row and column, never a traceback.
Each file is a real H200 capture (tests/data/ncu/SOURCES.md) with one cell or header edited."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from one_line import one_line_error
from repo_paths import TEST_DATA

from hipdnn_trace.cli import main

ROOFLINE = TEST_DATA / "ncu" / "perf_cudnn_roofline_raw_base_units.csv"


def _edited(tmp_path: Path, column: str, value: str, *, header: str | None = None) -> Path:
    rows = list(csv.reader(ROOFLINE.open(newline="")))
    i = rows[0].index(column)
    if header is not None:
        rows[0][i] = header
    else:
        rows[2][i] = value      # rows[1] holds the units; rows[2] is the first kernel
    out = tmp_path / "ncu_raw.csv"
    with out.open("w", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(rows)
    return out


def _ingest(path: Path, tmp_path: Path) -> int:
    return main(["ingest", str(path), "--out", str(tmp_path / "o"), "-q"])


@pytest.mark.parametrize(
    ("column", "value", "words"),
    [
        ("dram__bytes_read.sum", "1e400", ("'dram__bytes_read.sum'", "inf byte", "not a value ncu writes")),
        ("dram__bytes_read.sum", "-5", ("'dram__bytes_read.sum'", "-5 byte", "cannot be negative")),
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "-1", ("-1 %", "cannot be negative")),
        ("gpu__time_duration.sum", "1e400", ("'gpu__time_duration.sum'", "inf ns")),
        ("gpu__time_duration.sum", "-19168", ("'gpu__time_duration.sum'", "cannot be negative")),
        ("gpu__time_duration.sum", "1e300", ("'gpu__time_duration.sum'", "1e+300 ns")),
        ("ID", "1e400", ("column 'ID'", "'1e400', not an id")),
        ("ID", "-3", ("column 'ID'", "not an id")),
        ("Device", "0.5", ("column 'Device'", "not an id")),
        ("Stream", "99999999999999999999999", ("column 'Stream'", "not an id")),
        ("Grid Size", "(99999999999999999999999, 1, 1)", ("column 'Grid Size'", "over 2**63")),
    ],
)
def test_values_no_capture_holds_are_one_line(tmp_path: Path, capsys, column, value, words) -> None:
    bad = _edited(tmp_path, column, value)
    assert _ingest(bad, tmp_path) == 1
    one_line_error(capsys, str(bad), "row 1", *words)


def test_a_duplicated_column_is_refused(tmp_path: Path, capsys) -> None:
    """Two columns of one name: one reader took the first, another the last."""
    bad = _edited(tmp_path, "dram__bytes_write.sum", "", header="dram__bytes_read.sum")
    assert _ingest(bad, tmp_path) == 1
    one_line_error(capsys, str(bad), "'dram__bytes_read.sum' twice")


def test_a_missing_id_column_is_refused_not_read_as_empty(tmp_path: Path, capsys) -> None:
    """Without ID no row has an id: refused at detection (the reader finds its table by '"ID","Process ID"')."""
    bad = _edited(tmp_path, "ID", "", header="Id")
    assert _ingest(bad, tmp_path) == 1
    one_line_error(capsys, str(bad), "not a profiler file ingest knows")


@pytest.mark.parametrize("unit", ["furlong", "Xbyte/fortnight", "", "%%"])
def test_an_unknown_unit_string_is_a_clean_read(tmp_path: Path, unit: str) -> None:
    """An odd unit is kept as written (no scale), not a crash."""
    rows = list(csv.reader(ROOFLINE.open(newline="")))
    rows[1][rows[0].index("dram__bytes_read.sum")] = unit
    path = tmp_path / "ncu_raw.csv"
    with path.open("w", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(rows)
    assert _ingest(path, tmp_path) == 0

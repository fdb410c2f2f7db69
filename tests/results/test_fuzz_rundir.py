"""Fuzzing the run folder's readers: a damaged run.json, summary, breakdown, iterations or validation
table given to ``run --resume``, ``merge``, ``compare`` and ``report`` gives a result (exit 0, 1 or 2)
or one line (exit 1), never a traceback.

Damage (hypothesis): the file removed, emptied, cut at any byte, bytes flipped or inserted, replaced
by arbitrary bytes; for run.json also any JSON value, or one of its keys deleted or given a value of
another type; for CSV tables also a column dropped, a cell replaced by hostile text, rows
duplicated. Each example damages a fresh copy of a real run folder (the reference backend, two
small graphs and a file that never loads). Deterministic like tests/graph/test_fuzz_loader.py
(derandomize, no example database); HIPDNN_TRACE_FUZZ_SCALE=10 searches longer.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from reliability_helpers import write_graphs

from hipdnn_trace.cli import main as cli_main

SCALE = float(os.environ.get("HIPDNN_TRACE_FUZZ_SCALE", "1"))
FLAGS = ["--backend", "reference", "--no-isolate", "-w", "1", "-i", "2", "-q", "--progress", "off"]
FILES = ["run.json", "summary.csv", "breakdown.csv", "iterations.parquet", "validation.csv", "summary.json"]
HOSTILE = ["", "nan", "inf", "-1", "1e400", "9" * 40, "\x00", "é\n", '"', "null", "[1, 2]", "{}", "\u202e"]


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(graphs, a whole run folder, a second run of the same graphs for compare)."""
    root = tmp_path_factory.mktemp("fuzz_rundir")
    graphs = root / "g"
    write_graphs(graphs, ["ok__a", "ok__b"])
    (graphs / "zz_broken.json").write_text('{"nodes": [')
    for rid in ("a", "b"):
        assert cli_main(["run", str(graphs), *FLAGS, "--out", str(root), "--run-id", rid]) == 1
    return graphs, root / "a", root / "b"


def _json_values() -> st.SearchStrategy:
    scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.text(max_size=8), inner, max_size=4), max_leaves=12)


@st.composite
def damage(draw) -> tuple[str, str, object]:
    name = draw(st.sampled_from(FILES))
    kinds = ["remove", "empty", "cut", "flip", "insert", "bytes"]
    if name == "run.json":
        kinds += ["json", "key-deleted", "key-retyped", "key-retyped"]
    if name.endswith(".csv"):
        kinds += ["column-dropped", "cell", "cell", "rows-doubled"]
    kind = draw(st.sampled_from(kinds))
    if kind in ("cut", "flip", "insert"):
        detail: object = (draw(st.floats(0, 1)), draw(st.binary(min_size=1, max_size=8)))
    elif kind == "bytes":
        detail = draw(st.binary(max_size=200))
    elif kind == "json":
        detail = draw(_json_values())
    elif kind in ("key-deleted", "key-retyped"):
        detail = (draw(st.sampled_from(["run_id", "status", "argv", "graphs", "timing", "configs", "seed",
                                        "validation", "shard", "inputs", "resumed", "created", "gpus"])),
                  draw(_json_values()))
    elif kind == "cell":
        detail = (draw(st.integers(0, 40)), draw(st.integers(0, 200)), draw(st.sampled_from(HOSTILE)))
    else:
        detail = draw(st.integers(0, 40))
    return name, kind, detail


def _apply(folder: Path, name: str, kind: str, detail) -> None:
    path = folder / name
    data = path.read_bytes()
    if kind == "remove":
        path.unlink()
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind in ("cut", "flip", "insert"):
        at, extra = detail
        i = int(at * len(data))
        if kind == "cut":
            path.write_bytes(data[:i])
        elif kind == "flip":
            path.write_bytes(data[:i] + bytes(b ^ 0xFF for b in extra) + data[i + len(extra):])
        else:
            path.write_bytes(data[:i] + extra + data[i:])
    elif kind == "bytes":
        path.write_bytes(detail)
    elif kind == "json":
        path.write_text(json.dumps(detail))
    elif kind in ("key-deleted", "key-retyped"):
        meta = json.loads(data)
        key, value = detail
        if kind == "key-deleted":
            meta.pop(key, None)
        else:
            meta[key] = value
        path.write_text(json.dumps(meta))
    else:
        _apply_table(path, kind, detail)


def _apply_table(path: Path, kind: str, detail) -> None:
    df = pl.read_csv(path, infer_schema_length=None)
    if kind == "column-dropped":
        df = df.drop(df.columns[detail % df.width])
    elif kind == "rows-doubled":
        df = pl.concat([df, df])
    else:
        row, column, text = detail
        if df.height:
            df = df.with_columns(pl.col(c).cast(pl.Utf8) for c in df.columns)
            col = df.columns[column % df.width]
            df = df.with_row_index("_r").with_columns(
                pl.when(pl.col("_r") == row % df.height).then(pl.lit(text)).otherwise(pl.col(col)).alias(col)
            ).drop("_r")
    df.write_csv(path)


def _check(argv: list[str]) -> None:
    """``argv`` exits 0, 1 or 2, with at most one error line (exactly one when compare, report or merge
    exits 1); any exception fails the test."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli_main(argv)
    text = err.getvalue()
    assert code in (0, 1, 2), (argv, code, text)
    assert "Traceback" not in text, text
    errors = [line for line in text.splitlines() if ": error: " in line]
    assert len(errors) <= 1, (argv, text)
    if code == 1 and argv[0] != "run":   # a run's 1 may be its error rows (the file that never loads)
        assert len(errors) == 1, (argv, text)


@settings(max_examples=int(30 * SCALE), deadline=None, database=None, derandomize=SCALE == 1, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(hurt=damage(), alone=st.booleans())
def test_readers_of_a_damaged_run_folder_give_a_result_or_one_line(good, hurt, alone):
    graphs, a, b = good
    name, kind, detail = hurt
    with tempfile.TemporaryDirectory() as tmp:
        damaged = Path(tmp) / "a"
        shutil.copytree(a, damaged)
        _apply(damaged, name, kind, detail)
        _check(["compare", str(b), str(damaged)])
        _check(["report", str(damaged), "-o", str(Path(tmp) / "r.html")])
        _check(["merge", str(damaged), "--out", str(Path(tmp) / "m"), "-q"])
        # the two ways to resume take turns (each runs the graphs again: the slow part)
        _check(["run", str(graphs), *FLAGS, "--resume", str(damaged)] if alone is False else
               ["run", "--resume", str(damaged), "-q"])

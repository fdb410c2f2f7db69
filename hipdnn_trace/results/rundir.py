"""The run directory: every file a run writes, and reading it back.

``<out>/<run_id>/`` holds run.json, summary.{csv,json}, validation.csv,
mismatches.csv, iterations.parquet (and the big frames in every format asked for),
kernels/counters when a profiler ran, and trace.pftrace. After each graph every
table is rewritten atomically (temp file + rename) and then the trace appended, so a
run killed at any point leaves complete, valid files for every finished graph (the
trace may lack the last one, when the kill fell between its tables and the trace).

``summary.csv`` is written last: a graph is *finished* once its summary rows are
there. A run killed between two renames may leave rows of the next graph in the
other tables; ``RunWriter(resume=True)`` drops those (they are re-run), so a
resumed run holds exactly what an uninterrupted one would. ``breakdown.csv`` (where each
graph's wall time went) is written after the trace, since it includes the writing itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from hipdnn_trace.bench.records import GraphRun
from hipdnn_trace.device.clock import now_ns
from hipdnn_trace.errors import UserError
from hipdnn_trace.results import rows as R
from hipdnn_trace.results import schemas
from hipdnn_trace.results.atomic import write_atomic, write_text_atomic
from hipdnn_trace.results.breakdown import breakdown_rows

#: Frames that can be big: written in the formats of --format (parquet by default).
BIG_FRAMES = ("iterations", "kernels", "counters")
FORMATS = ("csv", "json", "parquet")
#: --format dnnbench: also ROCm dnn-benchmarking's schema-v2 results file (results/dnnbench.py)
DNNBENCH = "dnnbench"


def _write_frame(path: Path, df: pl.DataFrame, fmt: str) -> None:
    if fmt == "csv":
        write_atomic(path, lambda fh: df.write_csv(fh))
    elif fmt == "json":
        write_atomic(path, lambda fh: df.write_json(fh))
    elif fmt == "parquet":
        write_atomic(path, lambda fh: df.write_parquet(fh))
    else:
        raise ValueError(fmt)


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, default=str) + "\n")


class RunWriter:
    """Accumulates frames graph by graph and keeps the files on disk current."""

    def __init__(self, folder: Path, meta: dict[str, Any], *, formats: Iterable[str] = ("parquet",),
                 trace: bool = True, resume: bool = False) -> None:
        self.folder = folder
        self.meta = meta
        formats = tuple(formats)
        self.dnnbench = DNNBENCH in formats   # not a frame format: one results file at the end
        self.formats = tuple(dict.fromkeys(["parquet", *(f for f in formats if f != DNNBENCH)]))
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:   # e.g. --out names a file
            raise UserError(f"{folder}: cannot create the run directory ({exc.strerror or exc})") from None
        self.frames: dict[str, list[pl.DataFrame]] = {name: [] for name in schemas.FRAMES}
        if resume:
            existing = finished_part(load_run(folder))
            for name in self.frames:
                df = getattr(existing, name)
                if df.height:
                    self.frames[name].append(df)
            self.formats = tuple(dict.fromkeys([*self.formats, *written_formats(folder)]))
        self.timeline = None
        if trace:
            from hipdnn_trace.results.timeline import Timeline
            from hipdnn_trace.trace.writer import TraceWriter

            self._trace_writer = TraceWriter(folder / "trace.pftrace", append=resume)
            self.timeline = Timeline(self._trace_writer, meta["run_id"])
        write_json(folder / "run.json", meta)

    @property
    def run_id(self) -> str:
        return str(self.meta["run_id"])

    def add_graph(self, g: GraphRun) -> None:
        rid = self.run_id
        t0 = now_ns()
        self.frames["iterations"].append(R.iterations_frame(rid, g))
        self.frames["summary"].append(schemas.frame(R.summary_rows(rid, g), schemas.SUMMARY))
        self.frames["validation"].append(schemas.frame(R.validation_rows(rid, g), schemas.VALIDATION))
        self.frames["mismatches"].append(schemas.frame(R.mismatch_rows(rid, g), schemas.MISMATCHES))
        for c in g.configs:
            for name in ("kernels", "counters"):
                df = getattr(c, name)
                if isinstance(df, pl.DataFrame) and df.height:
                    self.frames[name].append(schemas.conform(df, schemas.FRAMES[name]))
        self.write_tables()
        if self.timeline is not None:   # after the tables: a trace never shows an unfinished graph
            self.timeline.add_graph(g)
        # last, so it can say how long writing took; a kill just before loses only this row
        end = now_ns()
        rows = breakdown_rows(rid, g, write_ms=(end - t0) / 1e6, end_ns=end)
        self.frames["breakdown"].append(schemas.frame(rows, schemas.BREAKDOWN))
        self._write_breakdown()

    def _write_breakdown(self) -> None:
        df = self.frame("breakdown")
        if df.height:
            _write_frame(self.folder / "breakdown.csv", df, "csv")

    def add_frame(self, name: str, df: pl.DataFrame) -> None:
        """Frames made after the fact (a parsed external profiler run)."""
        self.frames[name].append(schemas.conform(df, schemas.FRAMES[name]))

    def frame(self, name: str) -> pl.DataFrame:
        parts = [f for f in self.frames[name] if f.height]
        if not parts:
            return schemas.empty(schemas.FRAMES[name])
        return pl.concat(parts, how="diagonal_relaxed")

    def write_tables(self) -> None:
        _write_frame(self.folder / "validation.csv", self.frame("validation"), "csv")
        _write_frame(self.folder / "mismatches.csv", self.frame("mismatches"), "csv")
        for name in BIG_FRAMES:
            df = self.frame(name)
            if name != "iterations" and not df.height:
                continue
            for fmt in self.formats:
                _write_frame(self.folder / f"{name}.{fmt}", df, fmt)
        summary = self.frame("summary")
        _write_frame(self.folder / "summary.json", summary, "json")
        if self.dnnbench:
            from hipdnn_trace.results.dnnbench import FILE_NAME, to_dnnbench

            result = to_dnnbench(self.meta, summary, self.frame("iterations"), self.frame("validation"))
            write_text_atomic(self.folder / FILE_NAME, json.dumps(result, indent=2) + "\n")
        _write_frame(self.folder / "summary.csv", summary, "csv")   # last: the commit point

    def finish(self, status: str, **extra: Any) -> None:
        self.meta["status"] = status
        self.meta.update(extra)
        self.write_tables()
        self._write_breakdown()
        if self.timeline is not None:
            self._trace_writer.close()
        write_json(self.folder / "run.json", self.meta)


#: run.json blocks that must match for a resumed run to equal an uninterrupted one.
RESUME_MUST_MATCH = ("timing", "configs", "seed", "validation", "shard", "graphs")


def _first_difference(old: Any, new: Any, where: str) -> str | None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in dict.fromkeys([*old, *new]):
            found = _first_difference(old.get(key), new.get(key), f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new)):
            found = _first_difference(a, b, f"{where}[{i}]")
            if found:
                return found
        return None
    if old != new:
        show = (lambda v: f"{len(v)} items" if isinstance(v, list) and len(v) > 3 else repr(v))
        return f"{where}: {show(old)} then, {show(new)} now"
    return None


def check_resumable(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """run.json for resuming the run ``old`` with settings ``new``; UserError when they differ.

    Keeps the run's identity (run_id, created, argv) and adds a ``resumed`` entry.
    """
    for key in RESUME_MUST_MATCH:
        if key == "graphs" and old.get("shard") != new.get("shard"):
            continue   # reported as the shard difference
        found = _first_difference(old.get(key), new.get(key), key)
        if found:
            raise UserError(f"--resume: not the same run ({found}); resume with the flags and graphs "
                            f"of the interrupted run")
    meta = dict(new)
    for key in ("run_id", "created", "argv"):
        if key in old:
            meta[key] = old[key]
    meta["resumed"] = [*old.get("resumed", []), {
        "at": new.get("created"), "argv": new.get("argv"), "previous_status": old.get("status"),
        "host": (new.get("machine") or {}).get("host")}]
    meta["status"] = "running"
    return meta


def written_formats(folder: Path) -> list[str]:
    """Formats the big frames of an existing run directory were written in."""
    found = [fmt for fmt in FORMATS if (folder / f"iterations.{fmt}").exists()]
    return found + ([DNNBENCH] if (folder / "results.dnnbench.json").exists() else [])


def finished_part(run: Run) -> Run:
    """``run`` without rows of graphs whose summary rows never made it to disk.

    Rows without a graph_id (profiler frames not tied to a graph) are kept.
    """
    s = run.summary
    sources = set(s.get_column("source").drop_nulls().to_list())
    key = pl.concat_str([pl.col("graph_id"), pl.col("config")], separator="\x00")
    finished = set(s.select(key.alias("k")).get_column("k").drop_nulls().to_list())

    def keep(df: pl.DataFrame, by_source: bool) -> pl.DataFrame:
        if not df.height:
            return df
        if by_source:
            df = df.filter(pl.col("source").is_in(sources))
        return df.filter(pl.col("graph_id").is_null() | key.is_in(finished))

    return Run(run.path, run.meta, s, keep(run.iterations, True), keep(run.validation, False),
               keep(run.mismatches, False), keep(run.kernels, False), keep(run.counters, False),
               keep(run.breakdown, True))


@dataclass
class Run:
    """A run directory read back: run.json and every frame (empty when absent)."""

    path: Path
    meta: dict[str, Any]
    summary: pl.DataFrame
    iterations: pl.DataFrame
    validation: pl.DataFrame
    mismatches: pl.DataFrame
    kernels: pl.DataFrame
    counters: pl.DataFrame
    breakdown: pl.DataFrame = field(default_factory=lambda: schemas.empty(schemas.BREAKDOWN))

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id", self.path.name))


def _read(folder: Path, name: str) -> pl.DataFrame:
    schema = schemas.FRAMES[name]
    for fmt in ("parquet", "csv", "json"):
        path = folder / f"{name}.{fmt}"
        if not path.exists():
            continue
        try:
            if fmt == "parquet":
                df = pl.read_parquet(path)
            elif fmt == "csv":
                df = pl.read_csv(path, infer_schema_length=None) if path.stat().st_size else pl.DataFrame()
            else:
                df = pl.read_json(path)
        except Exception as exc:   # polars raises several types for corrupt files
            raise UserError(f"{path}: cannot read ({' '.join(str(exc).split())[:200]})") from None
        return schemas.conform(df, schema) if df.width else schemas.empty(schema)
    return schemas.empty(schema)


def load_run(path: str | Path) -> Run:
    """Read a run directory (or its run.json / summary file) into frames."""
    folder = Path(path)
    if folder.is_file():
        folder = folder.parent
    meta_path = folder / "run.json"
    if not meta_path.exists():
        raise UserError(f"{folder}: not a run directory (no run.json)")
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"{meta_path}: unreadable run.json ({exc})") from None
    return Run(folder, meta, **{name: _read(folder, name) for name in schemas.FRAMES})

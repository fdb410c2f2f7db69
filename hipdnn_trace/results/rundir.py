"""The run directory: every file a run writes, and reading it back.

``<out>/<run_id>/`` holds run.json, summary.{csv,json}, validation.csv,
mismatches.csv, oracle.csv (run --oracle), ab.csv (interleaved A/B verdicts), iterations.parquet
(and the big frames in every format asked for), kernels/counters when a profiler ran, breakdown.csv
and trace.pftrace.

The commit order (docs/reliability.md "The commit order"), after each graph, every file
rewritten atomically (temp file + rename): validation, mismatches, the big frames, then
breakdown.csv with the graph's provisional row (its wall time up to here), then
summary.json (and the dnn-benchmarking files), then **summary.csv: the commit point**, a
graph is *finished* once its summary rows are there; then the trace is appended and
breakdown.csv rewritten with the final row (the trace append included). So a finished graph
has its rows in every table whatever the kill point; a kill before the commit leaves rows
of an unfinished graph, which ``RunWriter(resume=True)`` drops (the graph runs again), and a
kill after it a trace without the graph, which resume rebuilds from the tables. Writers'
temp files a kill left (``.NAME.XXXX.tmp``) are removed when a writer opens the folder and
when it finishes.

Every writer holds the folder's lock (``results/runlock.py``) from before it reads what is
recorded until it finishes, so two resumes of one folder cannot both run its graphs.

A new run claims its folder with one ``mkdir`` (atomic on local and network file
systems), so two runs given the same ``--out``/``--run-id`` cannot both write it. A
write that fails (disk full, quota, read-only or failing storage) is one
:class:`RunWriteError` line; the files stay as after the last finished graph, and
run.json says ``interrupted`` with the reason when it can still be written.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from hipdnn_trace import read_gate
from hipdnn_trace.atomic import write_atomic, write_text_atomic
from hipdnn_trace.bench.records import GraphRun
from hipdnn_trace.device.clock import now_ns
from hipdnn_trace.errors import UserError
from hipdnn_trace.results import frame_cells, frame_values, rows as R, schemas, summary_checks
from hipdnn_trace.results.breakdown import breakdown_rows
from hipdnn_trace.results.oracle import oracle_rows, pairs_of
from hipdnn_trace.results.run_record import RunRecord, as_record
from hipdnn_trace.results.runlock import LOCK_NAME, lock_run_dir, unlock_run_dir
from hipdnn_trace.results.speed_of_light import run_block as sol_block

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


class RunWriteError(UserError):
    """A run directory could not be written (disk full, quota, read-only or failing storage)."""


def describe_write_error(exc: OSError) -> str:
    """``<file>: cannot write (No space left on device)`` for any OSError of a write."""
    where = exc.filename or "run directory"
    return f"{where}: cannot write ({exc.strerror or exc})"


def create_run_dir(folder: Path) -> None:
    """Claim ``folder`` for a new run: one ``mkdir`` that fails when it exists, so of two runs
    given the same --out and --run-id exactly one gets it, on local and network file systems."""
    parent = folder.parent
    if parent.exists() and not parent.is_dir():   # mkdir(exist_ok) says "exists" for a file or a device
        raise UserError(f"{folder}: cannot create the run directory ({parent} is not a folder; --out must "
                        "name a folder)")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:   # a file on the way to it (runs/afile/sub), read-only or full storage
        raise UserError(f"{folder}: cannot create the run directory ({exc.strerror or exc})") from None
    try:
        os.mkdir(folder)
    except FileExistsError:
        raise UserError(f"{folder} already exists (another run with this --run-id, or an earlier one); "
                        "choose another --run-id or --out, or --resume it") from None
    except OSError as exc:   # e.g. --out names a file, or a read-only or full file system
        raise UserError(f"{folder}: cannot create the run directory ({exc.strerror or exc})") from None


def _is_temporary(name: str) -> bool:
    """A writer's temp file (``atomic.write_atomic``: ``.NAME.XXXXXXXX.tmp``)."""
    return name.startswith(".") and name.endswith(".tmp")


def is_stranded(folder: Path) -> bool:
    """``folder`` is a run directory left before its run.json was written (a kill or a full disk at
    the start): no run.json and nothing in it but empty files, writers' temp files and the lock."""
    if not folder.is_dir() or (folder / "run.json").exists():
        return False
    for entry in folder.iterdir():
        if entry.name == LOCK_NAME:
            continue
        if not entry.is_file() or not (_is_temporary(entry.name) or entry.stat().st_size == 0):
            return False
    return True


def clear_stranded(folder: Path) -> None:
    """Empty a stranded run directory (see :func:`is_stranded`) so a run can start in it; the
    lock file stays (removing a held lock's file would let another writer lock a new one)."""
    for entry in folder.iterdir():
        if entry.name != LOCK_NAME:
            entry.unlink(missing_ok=True)


def remove_stale_temporaries(folder: Path) -> list[str]:
    """Remove the temp files writers killed mid-write left in ``folder`` (names removed). Only
    under the folder's lock: a live writer's temp file would be taken from under it."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            if _is_temporary(entry.name) and entry.is_file():
                with contextlib.suppress(OSError):
                    entry.unlink()
                    removed.append(entry.name)
    return removed


def holds_results(folder: Path) -> bool:
    """``folder`` holds anything but its lock file (an existing output folder must be empty)."""
    return any(entry.name != LOCK_NAME for entry in folder.iterdir())


#: the tables built from row dicts (the others arrive as frames)
ROW_TABLES = ("summary", "oracle", "validation", "mismatches", "ab")


class RunWriter:
    """Accumulates frames graph by graph and keeps the files on disk current.

    ``exclusive=True`` (a new run): the folder is created here with :func:`create_run_dir`
    and removed again if run.json cannot be written, so a full disk at the start strands
    nothing. After a failed write the writer writes no more tables or trace
    (:attr:`failed`); :meth:`finish` then only tries to mark run.json interrupted.
    """

    def __init__(self, folder: Path, record: RunRecord | Mapping[str, Any], *, formats: Iterable[str] = ("parquet",),
                 trace: bool = True, resume: bool = False, exclusive: bool = False) -> None:
        self.folder = folder
        self.record = as_record(record)   # run.json; a mapping (a merge's, an older file's) is read as one
        self.failed: str | None = None
        formats = tuple(formats)
        self.dnnbench = DNNBENCH in formats   # not a frame format: one results file at the end
        self.formats = tuple(dict.fromkeys(["parquet", *(f for f in formats if f != DNNBENCH)]))
        # speed of light: the peaks of --peaks or of the run's GPU, in run.json with their source (before
        # the folder exists: a bad --peaks strands nothing)
        self.peaks = None
        if self.record.speed_of_light is not None:   # a run's (a merge of older runs has none to resolve)
            self.record.speed_of_light, self.peaks = sol_block(self.record.to_json())
        self._claim(folder, exclusive)
        self.frames: dict[str, list[pl.DataFrame]] = {name: [] for name in schemas.FRAMES}
        #: source -> position in the suite: when set, tables are written in suite order whatever order
        #: graphs finish in (--gpus); rows of one graph keep their order
        self.suite_order: dict[str, int] | None = None
        try:
            self._open(resume=resume, exclusive=exclusive, trace=trace)
        except BaseException:   # a writer that never opened holds no lock
            unlock_run_dir(folder)
            raise

    def _open(self, *, resume: bool, exclusive: bool, trace: bool) -> None:
        """Take in what a resumed folder holds, write run.json, open the trace."""
        folder = self.folder
        if resume:   # the finished graphs' rows; an unfinished graph's are dropped (it runs again)
            existing = split_finished(load_run(folder))[0]
            for name in self.frames:
                df = getattr(existing, name)
                if df.height:
                    self.frames[name].append(df)
            self.formats = tuple(dict.fromkeys([*self.formats, *written_formats(folder)]))
        try:
            self.write_record()   # first: a folder with files always has run.json
        except OSError as exc:
            if exclusive:
                unlock_run_dir(folder)
                with contextlib.suppress(OSError):
                    os.rmdir(folder)   # empty (the atomic writer removed its temp file): nothing stranded
            raise RunWriteError(f"{describe_write_error(exc)}; nothing was recorded") from None
        self.timeline = None
        if trace:
            from hipdnn_trace.results.timeline import Timeline
            from hipdnn_trace.trace.writer import TraceWriter

            with self._writing():
                self._trace_writer = TraceWriter(folder / "trace.pftrace", append=resume)
                self.timeline = Timeline(self._trace_writer, self.record.run_id)
                if resume:
                    self._rebuild_missing_trace()

    @staticmethod
    def _claim(folder: Path, exclusive: bool) -> None:
        """Create (``exclusive``: one ``mkdir``) or open ``folder``, hold its lock for the writer's life
        and remove the temp files a killed writer left in it."""
        if exclusive:
            create_run_dir(folder)
        else:
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:   # e.g. --out names a file
                raise UserError(f"{folder}: cannot create the run directory ({exc.strerror or exc})") from None
        try:
            lock_run_dir(folder)
        except UserError:
            if exclusive:   # a new folder that cannot even hold its lock: strand nothing
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
            raise
        remove_stale_temporaries(folder)

    @property
    def run_id(self) -> str:
        return str(self.record.run_id)

    @property
    def meta(self) -> dict[str, Any]:
        """run.json as it stands (a copy: change the run through :attr:`record`)."""
        return self.record.to_json()

    def write_record(self) -> None:
        """Write run.json from the record (atomically; an OSError is the caller's)."""
        write_json(self.folder / "run.json", self.record.to_json())

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Turn a failed write into one :class:`RunWriteError` line and stop writing."""
        if self.failed is not None:
            raise RunWriteError(self.failed)
        try:
            yield
        except OSError as exc:   # ENOSPC, EDQUOT, EROFS, EIO, ...: the file system took no more
            self.failed = (f"{describe_write_error(exc)}; {self.folder} keeps every graph finished before; "
                           f"once the file system takes writes again, finish with --resume {self.folder}")
            raise RunWriteError(self.failed) from None

    def _rebuild_missing_trace(self) -> None:
        """Add to the trace the finished graphs it lacks: a kill between the summary's rename and
        the trace's flush leaves a graph in the tables only. Rebuilt from the iterations table."""
        from hipdnn_trace.results.timeline import graphs_in_trace

        assert self.timeline is not None
        path = self.folder / "trace.pftrace"
        in_trace, ends = graphs_in_trace(path) if path.stat().st_size else (set(), None)
        summary = self.frame("summary")
        missing = [src for src in summary.get_column("source").unique(maintain_order=True).to_list()
                   if src not in in_trace]
        if not missing:
            return
        self.timeline.add_recorded(summary.filter(pl.col("source").is_in(missing)),
                                   self.frame("iterations"), self.frame("kernels"), at_ns=ends)

    def add_graph(self, g: GraphRun, lane: int | None = None) -> None:
        """Record a finished graph; ``lane``: the GPU it ran on in a --gpus run (its trace track)."""
        self.add_graphs([(g, lane)])

    def add_graphs(self, items: Sequence[tuple[GraphRun, int | None]]) -> None:
        """Record finished graphs as one commit: a --gpus run's records that waited for the one writer
        together cost one rewrite of the tables instead of one each (the writer is the pool's only
        serial stage; each graph's breakdown has its share of the batch's write time)."""
        with self._writing():
            self._add_graphs(items)

    def _add_graphs(self, items: Sequence[tuple[GraphRun, int | None]]) -> None:
        """Write ``items`` in the commit order (module docstring): every table, provisional breakdown rows,
        summary.csv (the commit), the trace, the final breakdown rows. Each table gets one frame per
        commit, not one per graph: building many one-row frames was most of the writer's time."""
        t0 = now_ns()
        self._append_rows([g for g, _ in items])
        self._write_graph_tables()
        # before the commit, so a finished graph always has its breakdown row: a kill before the final
        # ones below leaves these (wall time up to the summary, the trace append not counted)
        self.frames["breakdown"].append(self._breakdown(items, t0))
        self._write_breakdown()
        self._write_summary()   # the commit point
        if self.timeline is not None:   # after the commit: a trace never shows an unfinished graph
            for g, lane in items:
                if lane is None:
                    self.timeline.add_graph(g)
                else:
                    self.timeline.add_graph(g, lane)
        self.frames["breakdown"][-1] = self._breakdown(items, t0)   # final: the writing included
        self._write_breakdown()

    def _append_rows(self, graphs: Sequence[GraphRun]) -> None:
        """The rows of ``graphs`` in every frame, one frame per table (written by the caller, in the
        commit order)."""
        rid, pairs = self.run_id, pairs_of(self.record)
        rows: dict[str, list[dict[str, Any]]] = {name: [] for name in ROW_TABLES}
        for g in graphs:
            iterations = R.iterations_frame(rid, g)
            if iterations.height:
                self.frames["iterations"].append(iterations)
            summary = R.summary_rows(rid, g, self.peaks)
            rows["summary"] += summary
            if pairs:   # run --oracle: each graph's ootb plan against its tuned twin
                rows["oracle"] += oracle_rows(rid, g, summary, pairs)
            rows["validation"] += R.validation_rows(rid, g)
            rows["mismatches"] += R.mismatch_rows(rid, g)
            rows["ab"] += R.ab_rows(rid, g)
            for c in g.configs:
                for name in ("kernels", "counters"):
                    df = getattr(c, name)
                    if isinstance(df, pl.DataFrame) and df.height:
                        self.frames[name].append(schemas.conform(df, schemas.FRAMES[name]))
        for name, table_rows in rows.items():
            if table_rows:
                self.frames[name].append(schemas.frame(table_rows, schemas.FRAMES[name]))

    def _breakdown(self, items: Sequence[tuple[GraphRun, int | None]], t0: int) -> pl.DataFrame:
        """The rows of the graphs of the commit begun at ``t0``: each has an equal share of its time so far."""
        share = (now_ns() - t0) / 1e6 / len(items)
        rows = [row for g, _ in items for row in breakdown_rows(self.run_id, g, write_ms=share, commit_ns=t0)]
        return schemas.frame(rows, schemas.BREAKDOWN)

    def _write_breakdown(self) -> None:
        df = self.frame("breakdown")
        if df.height:
            _write_frame(self.folder / "breakdown.csv", df, "csv")

    def frame(self, name: str) -> pl.DataFrame:
        parts = [f for f in self.frames[name] if f.height]
        if not parts:
            return schemas.empty(schemas.FRAMES[name])
        df = pl.concat(parts, how="diagonal_relaxed")
        if self.suite_order is not None and "source" in df.columns:
            position = pl.col("source").replace_strict(self.suite_order, default=len(self.suite_order),
                                                       return_dtype=pl.Int64)
            df = df.sort(position, maintain_order=True)
        return df

    def write_tables(self) -> None:
        """Every table, in the commit order: summary.csv last."""
        self._write_graph_tables()
        self._write_breakdown()
        self._write_summary()

    def _write_graph_tables(self) -> None:
        """Every table but breakdown and summary (their rows of a graph not yet committed are dropped
        by a resume)."""
        _write_frame(self.folder / "validation.csv", self.frame("validation"), "csv")
        _write_frame(self.folder / "mismatches.csv", self.frame("mismatches"), "csv")
        if pairs_of(self.record):
            _write_frame(self.folder / "oracle.csv", self.frame("oracle"), "csv")
        ab = self.frame("ab")
        if ab.height:   # interleaved A/B runs only
            _write_frame(self.folder / "ab.csv", ab, "csv")
        for name in BIG_FRAMES:
            df = self.frame(name)
            if name != "iterations" and not df.height:
                continue
            for fmt in self.formats:
                _write_frame(self.folder / f"{name}.{fmt}", df, fmt)

    def _write_summary(self) -> None:
        """summary.json and the dnn-benchmarking files, then summary.csv: the commit point."""
        summary = self.frame("summary")
        _write_frame(self.folder / "summary.json", summary, "json")
        if self.dnnbench:
            from hipdnn_trace.results.dnnbench import CSV_NAME, FILE_NAME, to_csv, to_dnnbench

            result = to_dnnbench(self.meta, summary, self.frame("iterations"), self.frame("validation"),
                                 self.frame("oracle"))
            write_text_atomic(self.folder / FILE_NAME, json.dumps(result, indent=1, allow_nan=False) + "\n")
            write_text_atomic(self.folder / CSV_NAME, to_csv(result))
        _write_frame(self.folder / "summary.csv", summary, "csv")   # last: the commit point

    def finish(self, status: str, **extra: Any) -> None:
        """Write the tables, close the trace and mark run.json ``status``.

        After a failed write: no tables or trace (the files stay as after the last
        finished graph), and run.json says ``interrupted`` with the reason in ``error``
        if it can still be written; the folder is resumable either way.
        """
        try:
            self._finish(status, **extra)
        finally:   # the folder is whole (or resumable): the next writer may take it
            remove_stale_temporaries(self.folder)
            unlock_run_dir(self.folder)

    def _finish(self, status: str, **extra: Any) -> None:
        self.record.finish(status, **extra)
        if self.failed is None:
            with contextlib.suppress(RunWriteError), self._writing():
                self.write_tables()
                if self.timeline is not None:
                    self._trace_writer.close()
        if self.failed is not None:
            if self.timeline is not None:
                self._trace_writer.discard()
            self.record.finish("interrupted", error=self.failed)
            with contextlib.suppress(OSError):   # best effort: the previous run.json says "running"
                self.write_record()
            raise RunWriteError(self.failed)
        with self._writing():
            self.write_record()


#: run.json blocks that must match for a resumed run to equal an uninterrupted one.
RESUME_MUST_MATCH = ("timing", "configs", "seed", "validation", "shard", "graphs")
#: of those, the blocks that tell the slices of one suite apart (merge joins runs that differ there)
SLICE_KEYS = ("shard", "graphs")


def first_difference(old: Any, new: Any, where: str, labels: tuple[str, str] = ("then", "now")) -> str | None:
    """The first leaf where two run.json blocks differ, ``where: OLD then, NEW now`` (``labels``), or None."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in dict.fromkeys([*old, *new]):
            found = first_difference(old.get(key), new.get(key), f"{where}.{key}", labels)
            if found:
                return found
        return None
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new)):
            found = first_difference(a, b, f"{where}[{i}]", labels)
            if found:
                return found
        return None
    if old != new:
        show = (lambda v: f"{len(v)} items" if isinstance(v, list) and len(v) > 3 else repr(v))
        return f"{where}: {show(old)} {labels[0]}, {show(new)} {labels[1]}"
    return None


def input_generator(meta: Mapping[str, Any]) -> str | None:
    """run.json's input generator (None: a run written before it was recorded used the old stream one)."""
    block = meta.get("inputs")
    return block.get("generator") if isinstance(block, Mapping) else None


def _check_same_inputs(old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """Rows validated against inputs of two generators never share a run (run.json ``inputs``;
    a run written before it existed used the old stream generator)."""
    then, now = (input_generator(m) for m in (old, new))
    if then != now:
        raise UserError(f"--resume: the interrupted run's inputs came from "
                        f"{then or 'an older input generator'}, this version makes them with {now}; "
                        f"start a new run")


def check_resumable(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """run.json for resuming the run ``old`` with settings ``new``; UserError when they differ.

    Keeps the run's identity (run_id, created, argv) and adds a ``resumed`` entry.
    """
    _check_same_inputs(old, new)
    for key in RESUME_MUST_MATCH:
        if key == "graphs" and old.get("shard") != new.get("shard"):
            continue   # reported as the shard difference
        found = first_difference(old.get(key), new.get(key), key)
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


def _row_key(*columns: str) -> pl.Expr:
    """The columns as one text key, null-safe: a graph that never loaded has no graph_id and its
    rows no config, and still is one graph."""
    return pl.concat_str([pl.col(c).cast(pl.Utf8).fill_null("\x01") for c in columns], separator="\x00")


def split_finished(run: Run) -> tuple[Run, dict[str, int]]:
    """(``run`` without rows of graphs whose summary rows never made it to disk, the rows
    dropped per table): what a run killed between two renames left.

    A row is kept when its (source, graph_id, config) has summary rows: two files
    with identical content share a graph_id, so the graph_id alone would keep the
    rows a kill left of the second file, and a resume would add them again. Rows of
    tables written before validation and mismatches had a ``source`` column are
    matched on (graph_id, config); kernel and counter rows without a graph_id (profiler
    frames not tied to a graph) are kept. A missing graph_id or config (a graph that never
    loaded) is a value of the key like any other.
    """
    s = run.summary
    by_source, by_id = _row_key("source", "graph_id", "config"), _row_key("graph_id", "config")
    finished_source = set(s.select(by_source.alias("k")).get_column("k").to_list())
    finished_id = set(s.select(by_id.alias("k")).get_column("k").to_list())
    dropped: dict[str, int] = {}

    def keep(name: str, df: pl.DataFrame) -> pl.DataFrame:
        if not df.height:
            return df
        if name in ("kernels", "counters"):   # their source is a profiler; a kernel of no graph stays
            kept = df.filter(pl.col("graph_id").is_null() | by_id.is_in(finished_id))
        elif "source" in df.columns:
            kept = df.filter(pl.when(pl.col("source").is_null()).then(by_id.is_in(finished_id))
                             .otherwise(by_source.is_in(finished_source)))
        else:
            kept = df.filter(by_id.is_in(finished_id))
        if kept.height < df.height:
            dropped[name] = df.height - kept.height
        return kept

    frames = {name: keep(name, getattr(run, name)) for name in schemas.FRAMES if name != "summary"}
    return Run(run.path, run.meta, s, **frames), dropped


@dataclass(repr=False)
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
    oracle: pl.DataFrame = field(default_factory=lambda: schemas.empty(schemas.ORACLE))
    ab: pl.DataFrame = field(default_factory=lambda: schemas.empty(schemas.AB))

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id", self.path.name))

    def __repr__(self) -> str:
        """A few lines (folder, status, counts, configurations, frame sizes): the frames' own reprs
        are ~170 lines, too much to see at a prompt what a run holds."""
        statuses = self.summary.get_column("status").value_counts(sort=True).iter_rows() \
            if self.summary.height else []
        counts = ", ".join(f"{n} {s}" for s, n in statuses) or "no rows"
        configs = [str(c.get("name")) for c in self.meta.get("configs") or [] if isinstance(c, dict)]
        graphs = self.summary.get_column("source").n_unique() if self.summary.height else 0
        exit_code = f", exit code {self.meta['exit_code']}" if "exit_code" in self.meta else ""
        frames = ", ".join(f"{name} {getattr(self, name).height}" for name in schemas.FRAMES)
        return (f"Run({self.path}: {self.run_id}, status {self.meta.get('status', '?')}{exit_code}\n"
                f"  {graphs} graph(s) x {len(configs)} config(s) [{', '.join(configs)}]: {counts}\n"
                f"  rows: {frames}; .meta .summary .iterations ...)")


#: columns without which a file is not that table (garbage, or another file renamed)
REQUIRED_COLUMNS = {
    "summary": ("graph", "config", "status"),
    "iterations": ("graph", "config", "iteration", "kernel_ms"),
    "validation": ("graph_id", "config", "passed"),
    "mismatches": ("graph_id", "config", "output"),
    "kernels": ("name",),
    "counters": ("counter", "value"),
    "breakdown": ("graph", "config", "wall_ms"),
    "oracle": ("graph", "ootb_ms", "tuned_ms", "regret"),
    "ab": ("graph", "config", "config_b", "ratio", "verdict"),
}


def _read(folder: Path, name: str, *, strict: bool = False) -> pl.DataFrame:
    """One frame from its file; UserError naming the file when it is unreadable, empty (0 bytes:
    the writer always writes a header) or lacks the table's columns. ``strict``: summary.csv
    must exist (the commit point: a folder without it holds no finished graph)."""
    schema = schemas.FRAMES[name]
    if strict and name == "summary" and not (folder / "summary.csv").is_file():
        if os.path.lexists(folder / "summary.csv"):   # there but not a file: the gate says what it is
            read_gate.check(folder / "summary.csv", read_gate.TABLE_TEXT)
        raise UserError(f"{folder / 'summary.csv'}: missing; not a finished run directory (no graph recorded, "
                        "or the file was removed)")
    for fmt in ("csv",) if strict and name == "summary" else ("parquet", "csv", "json"):
        path = folder / f"{name}.{fmt}"
        if not path.exists():
            continue
        try:
            if not read_gate.check(path, read_gate.TABLE_PARQUET if fmt == "parquet" else read_gate.TABLE_TEXT).st_size:
                raise UserError(f"{path}: empty file (0 bytes); a run writes at least the header")
            if fmt == "parquet":
                df = pl.read_parquet(path)
            elif fmt == "csv":   # by the schema: a graph_id of digits and one "e" is text, not a float
                df = frame_cells.read_csv(path, schema)
            else:
                df = pl.read_json(path)
        except UserError:
            raise
        except Exception as exc:   # polars raises several types for corrupt files
            raise UserError(f"{path}: cannot read ({' '.join(str(exc).split())[:200]})") from None
        if fmt == "json" and not df.width:   # an empty frame as JSON is [] and has no columns
            return schemas.empty(schema)
        strict_summary = strict and name == "summary"   # compare, report and merge read its statistics
        absent = [c for c in REQUIRED_COLUMNS[name] + (("n", "median") if strict_summary else ())
                  if c not in df.columns]
        if absent:
            raise UserError(f"{path}: not a {name} table (no column {', '.join(absent)})")
        conformed = frame_cells.typed(path, df, schema, frame_cells.csv_line if fmt == "csv" else frame_cells.table_row)
        if strict_summary:
            summary_checks.check_statistics(path, conformed)
            summary_checks.check_repeated_rows(path, conformed)
        if strict:   # what compare, report, merge and repro show or carry: values no run writes are refused
            frame_values.check(name, path, conformed)
        return conformed
    return schemas.empty(schema)


#: run.json blocks readers index into: another JSON type there is a damaged or edited file
_BLOCK_TYPES: dict[str, type] = {"argv": list, "configs": list, "graphs": list, "versions": dict,
                                 "machine": dict, "timing": dict, "shard": dict, "validation": dict,
                                 "isolation": dict, "reference_cache": dict, "reference_device": dict,
                                 "inputs": dict, "estimate": dict, "clocks": dict, "sessions": dict}


def _check_blocks(meta_path: Path, meta: dict) -> None:
    """One line naming the first run.json block of the wrong JSON type (null is allowed: absent)."""
    for key, kind in _BLOCK_TYPES.items():
        if meta.get(key) is not None and not isinstance(meta[key], kind):
            raise UserError(f"{meta_path}: {key!r} is {type(meta[key]).__name__}, not a JSON "
                            f"{'array' if kind is list else 'object'} (damaged or edited run.json)")


def load_run(path: str | Path, *, strict: bool = False, frames: Sequence[str] | None = None) -> Run:
    """Read a run directory (or its run.json / summary file) into frames.

    ``strict`` (merge, report, compare): the directory must hold a readable summary.csv,
    so a broken copy is refused by name instead of read as a run with no graphs. ``frames``: read only
    these (the others empty): ``db import`` needs the summary, not the per-iteration samples.
    """
    folder = Path(path)
    if folder.is_file():
        folder = folder.parent
    meta_path = folder / "run.json"
    if not meta_path.exists():
        raise UserError(f"{folder}: not a run directory (no run.json)")
    try:
        meta = read_gate.read_json(meta_path, read_gate.RUN_JSON)
    except read_gate.ReadRefused as exc:
        raise UserError(f"{meta_path}: unreadable run.json ({exc.problem})") from None
    if not isinstance(meta, dict):
        raise UserError(f"{meta_path}: unreadable run.json (not a JSON object)")
    _check_blocks(meta_path, meta)
    wanted = schemas.FRAMES if frames is None else frames
    return Run(folder, meta, **{name: _read(folder, name, strict=strict) if name in wanted
                                else schemas.empty(schemas.FRAMES[name]) for name in schemas.FRAMES})

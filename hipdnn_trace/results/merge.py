"""Combine run directories (the shards of one sweep) into one run directory.

Shard runs are pieces of one measurement, so they must have been made the same
way: runs whose timing blocks differ are refused, and so are runs whose run.json differs in any other
block a resume must match but the suite's slice (configurations, seed, validation with --rtol/--atol,
``rundir.RESUME_MUST_MATCH``) or in the input generator; so is a graph (graph_id)
on a configuration that two runs both measured. Rows are put back in suite order
when every input is a shard of the same suite (``run.json`` ``shard.positions``),
so merging shards 1..N gives the tables an unsharded run would have written.
Inputs are read strictly (a missing, empty or garbage summary.csv is refused by
name), and rows whose graph has no summary row (a shard killed between two
renames) are dropped with a warning, never merged. A summary holding one (source, graph,
configuration) twice is refused (``summary_checks.check_repeated_rows``). The output folder is locked
(``results/runlock.py``) from before its emptiness is checked until the merge is written.
Traces are concatenated: each input's valid prefix
(cut back to its last complete flush), one packet sequence per writer; Perfetto reads such a concatenation as one
trace (sequence ids are random per writer and checked for clashes).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from hipdnn_trace import read_gate
from hipdnn_trace.atomic import write_bytes_atomic
from hipdnn_trace.errors import UserError
from hipdnn_trace.results import schemas
from hipdnn_trace.results.rundir import (
    RESUME_MUST_MATCH,
    SLICE_KEYS,
    Run,
    RunWriter,
    first_difference,
    holds_results,
    input_generator,
    load_run,
    split_finished,
    written_formats,
)
from hipdnn_trace.results.runlock import lock_run_dir, releasing
from hipdnn_trace.results.summary_checks import check_repeated_rows, check_statistics

_POS = "__position"


@dataclass
class MergeResult:
    folder: Path
    rows: int
    graphs: int
    trace: bool
    warnings: list[str] = field(default_factory=list)


def _timing_difference(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    for key in dict.fromkeys([*a, *b]):
        if a.get(key) != b.get(key):
            return f"{key}: {a.get(key)!r} vs {b.get(key)!r}"
    return None


def _check_methods(runs: Sequence[Run]) -> None:
    first = runs[0]
    for other in runs[1:]:
        diff = _timing_difference(first.meta.get("timing") or {}, other.meta.get("timing") or {})
        if diff:
            raise UserError(f"{other.path} was timed differently from {first.path} ({diff}); "
                            f"only runs made the same way can be merged")


def _check_same_measurement(runs: Sequence[Run]) -> None:
    """Every block a resume must match but the suite's slice (configurations, seed, validation and its
    tolerances; timing: :func:`_check_methods`) and the input generator is one for all inputs: run.json
    keeps the first input's, so a shard made with another --seed or --rtol would be claimed as made
    with these, and its rows validated against other inputs or tolerances joined as one measurement."""
    first = runs[0]
    keys = [k for k in RESUME_MUST_MATCH if k not in (*SLICE_KEYS, "timing")]
    for other in runs[1:]:
        labels = (f"in {first.path}", f"in {other.path}")
        found = next(filter(None, (first_difference(first.meta.get(k), other.meta.get(k), k, labels) for k in keys)),
                     None)
        if found is None and input_generator(first.meta) != input_generator(other.meta):
            found = (f"inputs.generator: {input_generator(first.meta)!r} {labels[0]}, "
                     f"{input_generator(other.meta)!r} {labels[1]}")
        if found:
            raise UserError(f"{other.path} was not made like {first.path} ({found}); only shards of one "
                            "measurement (same configurations, --seed, --rtol/--atol, validation) can be merged")


def _check_statistics(runs: Sequence[Run]) -> None:
    """Refuse an input whose summary holds a NaN or infinite statistic (``load_run(strict=True)`` checks it
    too; kept for runs built in memory)."""
    for run in runs:
        check_statistics(Path(run.path) / "summary.csv", run.summary)


def _check_duplicates(runs: Sequence[Run]) -> None:
    """Same graph_id on the same config in two runs (or the same failed file twice), or the same
    row twice in one run."""
    owner: dict[tuple[str, str | None], Path] = {}
    for run in runs:
        check_repeated_rows(Path(run.path) / "summary.csv", run.summary)
        s = run.summary
        keys = set()
        for graph, graph_id, config, source in s.select("graph", "graph_id", "config", "source").iter_rows():
            key = (f"id:{graph_id}", config) if graph_id is not None else (f"source:{source}", config)
            if key in keys:
                continue   # identical graphs inside one run are legal (two files, one content)
            keys.add(key)
            if key in owner:
                what = f"graph {graph!r} ({graph_id})" if graph_id else f"file {source}"
                raise UserError(f"{what} on config {config!r} is in both {owner[key]} and {run.path}; "
                                f"merge each shard once")
            owner[key] = run.path


def _suite_positions(runs: Sequence[Run]) -> dict[int, dict[str, int]] | None:
    """Per input: source -> position in the suite, when all inputs are shards of one suite."""
    shards = [r.meta.get("shard") for r in runs]
    if not all(isinstance(s, dict) and "positions" in s for s in shards):
        return None
    if len({(s["count"], s["suite_size"]) for s in shards}) != 1:   # type: ignore[index]
        return None
    out: dict[int, dict[str, int]] = {}
    for i, (run, sh) in enumerate(zip(runs, shards)):
        graphs = run.meta.get("graphs") or []
        positions = sh["positions"]   # type: ignore[index]
        if len(graphs) != len(positions):
            return None
        out[i] = dict(zip(graphs, positions))
    return out


def _ordered(frames: list[tuple[int, pl.DataFrame]], name: str, runs: Sequence[Run],
             positions: dict[int, dict[str, int]] | None, run_id: str) -> pl.DataFrame:
    """One frame from every input, in suite order, with the merged run_id."""
    parts = []
    for i, df in frames:
        if not df.height:
            continue
        if positions is not None:
            by_source = positions[i]
            if "source" in df.columns and df.get_column("source").is_not_null().any():
                pos = df.get_column("source").replace_strict(by_source, default=None, return_dtype=pl.Int64)
            else:   # validation, mismatches, kernels, counters: through the summary's graph_id
                s = runs[i].summary.filter(pl.col("graph_id").is_not_null())
                first: dict[str, int] = {}
                for gid, src in s.select("graph_id", "source").iter_rows():
                    if src in by_source:
                        first[gid] = min(first.get(gid, by_source[src]), by_source[src])
                pos = df.get_column("graph_id").replace_strict(first, default=None, return_dtype=pl.Int64)
            df = df.with_columns(pos.alias(_POS))
        parts.append(df.with_columns(pl.lit(run_id).alias("run_id")))
    if not parts:
        return schemas.empty(schemas.FRAMES[name])
    out = pl.concat(parts, how="diagonal_relaxed")
    if positions is not None:
        out = out.sort(_POS, nulls_last=True, maintain_order=True).drop(_POS)
    return out


def _trace_prefix(path: Path) -> bytes:
    from hipdnn_trace.trace.reader import valid_prefix

    data = read_gate.read_bytes(path, read_gate.TRACE)
    framing = valid_prefix(data)
    return data[:framing.complete if framing.committed is None else framing.committed]


def _sequence_ids(data: bytes) -> set[int]:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    return {p.trusted_packet_sequence_id for p in pb.Trace.FromString(data).packet}


def _merge_traces(runs: Sequence[Run], out: Path, warnings: list[str]) -> bool:
    paths = [r.path / "trace.pftrace" for r in runs if (r.path / "trace.pftrace").exists()]
    if not paths:
        return False
    if len(paths) < len(runs):
        warnings.append(f"{len(runs) - len(paths)} input(s) have no trace.pftrace; the merged trace lacks them")
    pieces, seen = [], {}
    for path in paths:
        data = _trace_prefix(path)
        for seq in _sequence_ids(data):
            if seq in seen:
                warnings.append(f"trace not merged: {path} and {seen[seq]} share packet sequence {seq}")
                return False
            seen[seq] = path
        pieces.append(data)
    write_bytes_atomic(out / "trace.pftrace", b"".join(pieces))
    return True


@releasing
def merge_runs(inputs: Sequence[str | Path], out: str | Path, *, formats: Sequence[str] = ()) -> MergeResult:
    """Merge the run directories ``inputs`` into the new run directory ``out``."""
    folder = Path(out)
    if len(inputs) < 1:
        raise UserError("merge needs at least one run directory")
    resolved = [Path(p).resolve() for p in inputs]
    if len(set(resolved)) != len(resolved):
        dup = next(p for p in inputs if resolved.count(Path(p).resolve()) > 1)
        raise UserError(f"{dup} is given twice")
    if folder.resolve() in resolved:
        raise UserError(f"--out {folder} is one of the inputs; merge into a new folder")
    if folder.is_dir():   # before looking inside: of two merges into one folder, the second stops here
        lock_run_dir(folder)
    if folder.exists() and (not folder.is_dir() or holds_results(folder)):
        raise UserError(f"{folder} already exists and is not an empty folder")
    runs = [load_run(p, strict=True) for p in inputs]
    _check_methods(runs)
    _check_same_measurement(runs)
    _check_statistics(runs)
    _check_duplicates(runs)
    warnings: list[str] = []
    for i, run in enumerate(runs):
        finished, orphans = split_finished(run)
        if orphans:
            counts = ", ".join(f"{n} {name}" for name, n in orphans.items())
            warnings.append(f"{run.path}: dropped row(s) of graphs with no summary row ({counts}; the run was "
                            f"killed mid-write: --resume it to finish them)")
            runs[i] = finished
    positions = _suite_positions(runs)
    statuses = [r.meta.get("status") for r in runs]
    shards = [r.meta.get("shard") for r in runs]
    if positions is not None:
        count = shards[0]["count"]   # type: ignore[index]
        indices = {s["index"] for s in shards}   # type: ignore[index]
        first = 0 if 0 in indices else 1   # run.json of versions before 1-based shards count from 0
        missing = sorted(set(range(first, first + count)) - indices)
        if missing:
            warnings.append(f"shard(s) {', '.join(map(str, missing))} of {count} not among the inputs")
    elif any(shards):
        warnings.append("inputs are not all shards of one suite: rows kept in input order")
    if any(s != "complete" for s in statuses):
        warnings.append("not every input is complete: " + ", ".join(
            f"{r.path} is {s}" for r, s in zip(runs, statuses) if s != "complete"))

    run_id = folder.name
    graphs = [g for r in runs for g in (r.meta.get("graphs") or [])]
    if positions is not None:
        order = {g: p for i in positions for g, p in positions[i].items()}
        graphs.sort(key=lambda g: order.get(g, len(order)))
    meta = dict(runs[0].meta)
    meta.update({
        "run_id": run_id,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "status": "running",
        "graphs": graphs,
        "shard": None,
        "merged_from": [{"path": str(r.path), "run_id": r.run_id, "status": r.meta.get("status"),
                         "shard": None if not isinstance(r.meta.get("shard"), dict) else
                         f"{r.meta['shard']['index']}/{r.meta['shard']['count']}",
                         "host": (r.meta.get("machine") or {}).get("host"),
                         "versions": r.meta.get("versions")} for r in runs],
    })
    all_formats = list(dict.fromkeys([*formats, *(f for r in runs for f in written_formats(r.path))]))
    writer = RunWriter(folder, meta, formats=all_formats or ("parquet",), trace=False,
                       exclusive=not folder.exists())   # two merges into one new --out: one wins
    rows = 0
    for name in schemas.FRAMES:
        df = _ordered([(i, getattr(r, name)) for i, r in enumerate(runs)], name, runs, positions, run_id)
        writer.frames[name] = [df] if df.height else []
        if name == "summary":
            rows = df.height
    has_trace = _merge_traces(runs, folder, warnings)
    status = "complete" if all(s == "complete" for s in statuses) else "incomplete"
    writer.finish(status, trace=has_trace, warnings=warnings or None)
    return MergeResult(folder, rows, len(graphs), has_trace, warnings)

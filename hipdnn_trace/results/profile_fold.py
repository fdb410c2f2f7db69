"""An external profiler's results folded into the run folder its child wrote.

The profiler (profilers/external.py with ncu / rocprofv3 / rocprof) returns what it measured: kernels
and counters frames, per-graph verdicts, its run.json ``profile`` block and what run.json's ``timing``
must say for ``compare``. Writing them is results' job: the frames in every format the run used,
the verdicts into summary.csv / summary.json and metrics.csv, kernel and counter tracks into
trace.pftrace, and the blocks into run.json.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from hipdnn_trace.results import schemas
from hipdnn_trace.results.kernel_names import with_demangled
from hipdnn_trace.results.run_record import Profile, RunRecord
from hipdnn_trace.results.rundir import Run, _write_frame, write_json


@dataclass
class ProfileResults:
    """What an external profiler adds to a run folder."""

    kernels: pl.DataFrame
    counters: pl.DataFrame
    verdicts: pl.DataFrame | None     # graph_id x config -> bottleneck (and the metrics behind it)
    profile: Profile                  # run.json "profile"
    timing: Mapping[str, Any]         # run.json "timing" keys the tool sets (e.g. clock_control)


def fold_profile(run: Run, added: ProfileResults, formats: Iterable[str] = ("parquet",)) -> None:
    """Write ``added`` into ``run``'s folder (frames, verdicts, trace tracks, then run.json)."""
    folder = run.path
    formats = tuple(dict.fromkeys(["parquet", *formats]))
    kernels = schemas.conform(with_demangled(added.kernels), schemas.KERNELS)
    counters = schemas.conform(added.counters, schemas.COUNTERS)
    for name, df in (("kernels", kernels), ("counters", counters)):
        if df.height:
            for fmt in formats:
                _write_frame(folder / f"{name}.{fmt}", df, fmt)
    verdicts = added.verdicts
    if isinstance(verdicts, pl.DataFrame) and verdicts.height:
        _merge_verdicts(folder, run.summary, verdicts)
        _write_frame(folder / "metrics.csv", verdicts, "csv")
    trace_path = folder / "trace.pftrace"
    if trace_path.exists() and kernels.height:
        from hipdnn_trace.results.timeline import append_profile_tracks

        append_profile_tracks(trace_path, str(run.meta["run_id"]), kernels, counters)
    record = RunRecord.from_json(run.meta)
    record.profile = added.profile
    record.timing.update(added.timing)
    write_json(folder / "run.json", record.to_json())


def _merge_verdicts(folder: Path, summary: pl.DataFrame, verdicts: pl.DataFrame) -> None:
    """Put each graph x config's bottleneck verdict into summary.csv / summary.json."""
    keys = [k for k in ("graph_id", "config") if k in verdicts.columns]
    if not keys or "bottleneck" not in verdicts.columns:
        return
    summary = summary.drop("bottleneck").join(
        verdicts.select([*keys, "bottleneck"]).unique(subset=keys, keep="first"), on=keys, how="left")
    summary = schemas.conform(summary, schemas.SUMMARY)
    _write_frame(folder / "summary.csv", summary, "csv")
    _write_frame(folder / "summary.json", summary, "json")

"""run.json as a typed record (results/run_record.py): today's keys exactly, older files read and
written back unchanged, profilers' blocks written by results, and no module outside results/ writing it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl

import hipdnn_trace
from hipdnn_trace.results.profile_fold import ProfileResults, fold_profile
from hipdnn_trace.results.run_record import Gpus, Isolation, Profile, RunRecord
from hipdnn_trace.results.rundir import RunWriter, load_run

ROOT = Path(__file__).resolve().parents[2]
GRAPH = str(ROOT / "graphs" / "pointwise" / "gelu_fp32.json")

#: run.json of an older version: no kernel_clock, inputs or reference_device, gpus without cpus, a
#: key this version never wrote, estimate explicitly null
OLD = {"run_id": "old", "created": "2025-01-01T00:00:00+00:00", "status": "complete",
       "argv": ["hipdnn-trace", "run", "g.json"], "versions": {"hipdnn_trace": "0.1"}, "machine": {"host": "h"},
       "gpu": None, "timing": {"timer": "device-events", "cache": "warm", "staged": False, "trace_clock": "x"},
       "seed": 0, "configs": [{"name": "cudnn", "backend": "cudnn"}], "graphs": ["g.json"], "shard": None,
       "validation": {"against": "reference"}, "isolation": {"enabled": True, "graph_timeout_s": 600.0},
       "gpus": {"devices": [0], "variable": "CUDA_VISIBLE_DEVICES", "visible": {"0": "0"}, "graphs": {}},
       "estimate": None, "from_the_future": {"x": 1}, "elapsed_s": 1.5}


def test_a_new_runs_run_json_reads_back_and_writes_the_same_keys_in_the_same_order(tmp_path: Path) -> None:
    run = hipdnn_trace.run(GRAPH, out=tmp_path, run_id="r", iters=2, warmup=0, trace=False)
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    again = RunRecord.from_json(meta).to_json()
    assert again == meta and list(again) == list(meta)
    assert list(meta["timing"])[-1] == "trace_clock" and "gpus" not in meta and "split" not in meta["isolation"]
    assert run.meta["status"] == "complete"


def test_an_older_run_json_is_read_and_written_back_unchanged(tmp_path: Path) -> None:
    record = RunRecord.from_json(OLD)
    assert isinstance(record.gpus, Gpus) and record.gpus.devices == [0] and record.estimate is None
    assert record.unknown == {"from_the_future": {"x": 1}}
    assert record.to_json() == OLD   # absent keys stay absent, unknown ones stay
    folder = tmp_path / "old"
    writer = RunWriter(folder, OLD, trace=False, exclusive=True)   # a mapping (merge, an old file) is read as a record
    writer.finish("complete", warnings=["w"])
    written = json.loads((folder / "run.json").read_text())
    assert written == {**OLD, "warnings": ["w"]}


def test_optional_blocks_appear_once_set_and_a_set_none_is_written() -> None:
    isolation = Isolation(enabled=True, graph_timeout_s=None, child="resident")
    assert "split" not in isolation.to_json()
    assert Isolation(enabled=True, split=[["a"], ["b"]]).to_json()["split"] == [["a"], ["b"]]
    record = RunRecord(run_id="x")
    assert "profile" not in record.to_json() and "error" not in record.to_json()
    record.error = None
    assert record.to_json()["error"] is None
    record.profile = Profile.of("cupti", {"activity": "CONCURRENT_KERNEL"})
    assert record.to_json()["profile"] == {"tool": "cupti", "activity": "CONCURRENT_KERNEL"}


def test_a_profilers_results_are_written_by_results(tmp_path: Path) -> None:
    hipdnn_trace.run(GRAPH, out=tmp_path, run_id="p", iters=2, warmup=0, trace=False)
    run = load_run(tmp_path / "p")
    before = dict(run.meta)
    empty = pl.DataFrame()
    added = ProfileResults(kernels=empty, counters=empty, verdicts=None,
                           profile=Profile.of("ncu", {"notes": ["n"]}, commands=["ncu ..."]),
                           timing={"clock_control": "base", "tool_only": 1})
    fold_profile(run, added)
    meta = json.loads((tmp_path / "p" / "run.json").read_text())
    assert meta["profile"] == {"tool": "ncu", "commands": ["ncu ..."], "notes": ["n"]}
    assert meta["timing"] == {**before["timing"], "clock_control": "base", "tool_only": 1}
    assert {k: v for k, v in meta.items() if k not in ("profile", "timing")} == \
        {k: v for k, v in before.items() if k != "timing"}


def test_only_results_writes_run_json() -> None:
    """results/ is the only place that knows file formats: no other module calls write_json."""
    package = ROOT / "hipdnn_trace"
    writers = [str(p.relative_to(package)) for p in package.rglob("*.py")
               if p.parent.name != "results" and re.search(r"\bwrite_json\(", p.read_text())]
    assert writers == []

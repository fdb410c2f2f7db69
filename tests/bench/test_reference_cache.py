"""The on-disk reference cache: a rerun reuses the float64 outputs, a change of seed misses, a
damaged entry is computed again with a note, and concurrent writers never leave half an entry."""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from hipdnn_trace.backends.reference import executor
from hipdnn_trace.bench import graph_run, reference_cache
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.bench.reference_cache import ReferenceCache, entry_key
from hipdnn_trace.bench.verdict import host_bytes
from hipdnn_trace.cli import main
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.sources import GraphSource
from hipdnn_trace.graph.write import dumps
from hipdnn_trace.markers import Markers


def _graph_bytes() -> bytes:
    b = GraphBuilder("cached_matmul", io="half", compute="float")
    b.matmul(b.tensor("a", [2, 16, 24]), b.tensor("b", [2, 24, 8]), out="c")
    return dumps(b.build()).encode()


DATA = _graph_bytes()


def _run(cache: ReferenceCache | None, seed: int = 0, **settings):
    return graph_run.run_graph(
        GraphSource("cached_matmul.json", lambda: DATA), [Config("reference", "reference")],
        graph_run.RunSettings(loop=LoopSettings(warmup=0, iters=1), seed=seed, reference_cache=cache, **settings),
        Markers())


def _no_evaluation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The oracle for validation must not be evaluated (the reference backend's own timed
    executions still call the same function: only calls from graph_run fail)."""
    real = executor.evaluate

    def guarded(graph, inputs):
        if sys._getframe(1).f_globals.get("__name__") == graph_run.__name__:
            raise AssertionError("the reference was evaluated although it was cached")
        return real(graph, inputs)

    monkeypatch.setattr(executor, "evaluate", guarded)


def test_second_run_hits_and_equals_the_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = ReferenceCache(tmp_path / "cache")
    first = _run(cache)
    assert first.reference_origin == "reference backend, cached"
    stored = {u: np.array(a) for u, a in first.reference.items()}
    _no_evaluation(monkeypatch)
    second = _run(cache)
    assert second.reference_origin == "cache"
    assert all(isinstance(a, np.memmap) for a in second.reference.values())     # mapped, not copied
    for uid, array in stored.items():
        np.testing.assert_array_equal(second.reference[uid], array)
    assert [v.passed for v in second.validation] == [v.passed for v in first.validation] == [True]
    assert [v.max_abs for v in second.validation] == [v.max_abs for v in first.validation]


def test_another_seed_misses(tmp_path: Path) -> None:
    cache = ReferenceCache(tmp_path / "cache")
    _run(cache, seed=0)
    assert _run(cache, seed=1).reference_origin == "reference backend, cached"
    assert len([p for p in cache.folder.iterdir() if not p.name.startswith(".")]) == 2


def test_reference_source_change_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = ReferenceCache(tmp_path / "cache")
    _run(cache)
    monkeypatch.setattr(reference_cache, "reference_version", lambda: "edited-reference")
    assert _run(cache).reference_origin == "reference backend, cached"


@pytest.mark.parametrize("what", ["GENERATOR", "tables_digest"])
def test_another_input_generator_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    """An entry made from other input values (another generator version, or value tables another
    machine's libm rounded differently) is never reused."""
    cache = ReferenceCache(tmp_path / "cache")
    _run(cache)
    if what == "GENERATOR":
        monkeypatch.setattr(reference_cache, "GENERATOR", "counter-fmix32-v0")
    else:
        monkeypatch.setattr(reference_cache, "tables_digest", lambda: "0" * 16)
    assert _run(cache).reference_origin == "reference backend, cached"


def test_input_recipe_covers_the_generator_module() -> None:
    assert "bench/counter_rng.py" in reference_cache._INPUT_RECIPE
    assert all((reference_cache._PACKAGE / p).is_file() for p in reference_cache._INPUT_RECIPE)


def test_reference_version_hashes_the_reference_package_source() -> None:
    version = reference_cache.reference_version()
    assert len(version) == 16 and version == reference_cache._source_hash(
        list((reference_cache._PACKAGE / "backends" / "reference").rglob("*.py")))
    assert version != reference_cache.input_recipe_version()


@pytest.mark.parametrize("damage", ["truncate", "header", "shape"])
def test_damaged_entry_is_computed_again_with_a_note(tmp_path: Path, damage: str) -> None:
    cache = ReferenceCache(tmp_path / "cache")
    first = _run(cache)
    graph = first.graph
    npy = cache.folder / entry_key(graph, 0) / f"{graph.output_tensors[0].uid}.npy"
    raw = npy.read_bytes()
    if damage == "truncate":
        npy.write_bytes(raw[: len(raw) // 2])
    elif damage == "header":
        npy.write_bytes(b"garbage" + raw[7:])
    else:
        np.save(npy, np.zeros(3))
    again = _run(cache)
    assert again.reference_origin == "computed, cached"   # an entry existed, so the oracle was looked up, then computed
    assert any("unreadable" in n and "computed again" in n for n in again.notes), again.notes
    assert [v.passed for v in again.validation] == [True]
    assert _run(cache).reference_origin == "cache"      # the damaged entry was replaced


def test_golden_inputs_and_save_tensors_bypass_the_cache(tmp_path: Path) -> None:
    cache = ReferenceCache(tmp_path / "cache")
    _run(cache)
    bundle = tmp_path / "bundle"
    saved = _run(cache, save_tensors=bundle)            # a bundle needs the intermediates: evaluated
    assert saved.reference_origin == "reference backend, cached"
    golden = _run(cache, golden=bundle)
    assert golden.reference_origin == "reference backend"        # inputs not from the seed: no key


def test_cap_evicts_least_recently_used(tmp_path: Path) -> None:
    cache = ReferenceCache(tmp_path / "cache")
    for seed in range(3):
        _run(cache, seed=seed)
    entry_bytes = sum(f.stat().st_size for f in next(cache.folder.iterdir()).iterdir())
    graph = _run(None).graph
    for seed, used in ((0, 0), (1, 1), (2, 2)):          # seed 0 least recently used, until...
        os.utime(cache.folder / entry_key(graph, seed) / "entry.json", (used, used))
    assert _run(cache, seed=0).reference_origin == "cache"   # ...a hit makes it the most recent
    small = ReferenceCache(cache.folder, max_bytes=2 * entry_bytes + entry_bytes // 2)
    assert _run(small, seed=3).reference_origin == "reference backend, cached"
    left = {p.name for p in cache.folder.iterdir()}
    assert left == {entry_key(graph, 0), entry_key(graph, 3)}   # seeds 1 and 2, least recently used, went


def test_entry_larger_than_the_cap_is_not_stored(tmp_path: Path) -> None:
    run = _run(ReferenceCache(tmp_path / "cache", max_bytes=16))
    assert run.reference_origin == "reference backend"
    assert any("exceed the cache" in n for n in run.notes)


def _store(folder: str, seed: int, rounds: int) -> None:
    graph_source = _run(None, seed=seed)
    cache = ReferenceCache(Path(folder))
    for _ in range(rounds):
        assert cache.store(graph_source.graph, seed, graph_source.reference) is None


def test_concurrent_writers_leave_one_whole_entry(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_store, args=(str(folder), 0, 20)) for _ in range(2)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(120)
    assert [w.exitcode for w in writers] == [0, 0]
    entries = list(folder.iterdir())
    assert len(entries) == 1 and not entries[0].name.startswith(".")   # no temporary folder left
    graph = _run(None).graph
    loaded, note = ReferenceCache(folder).load(graph, 0)
    assert note is None and loaded is not None
    manifest = json.loads((entries[0] / "entry.json").read_text())
    assert manifest["seed"] == 0 and manifest["graph_id"] == graph.graph_id


def test_cli_flag_records_the_origin_in_run_json(tmp_path: Path) -> None:
    graph = tmp_path / "cached_matmul.json"
    graph.write_bytes(DATA)
    common = [str(graph), "--backend", "reference", "--iters", "1", "--warmup", "0", "-q",
              "--out", str(tmp_path / "runs"), "--reference-cache", str(tmp_path / "cache")]
    for run_id in ("first", "second"):
        assert main(["run", *common, "--run-id", run_id]) == 0
    origins = [json.loads((tmp_path / "runs" / r / "run.json").read_text())["reference_cache"]["graphs"]
               for r in ("first", "second")]
    assert origins == [{"cached_matmul": "reference backend, cached"}, {"cached_matmul": "cache"}]
    assert main(["run", *common[:-2], "--run-id", "off"]) == 0
    assert json.loads((tmp_path / "runs" / "off" / "run.json").read_text())["reference_cache"] is None


def test_memory_plan_counts_a_cached_reference_as_its_outputs_only(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """With just enough memory for the mapped outputs and one comparison chunk, a cached reference
    validates where evaluating it would have been dropped by the memory plan."""
    import hipdnn_trace.backends.reference as reference_backend
    from hipdnn_trace.backends.reference.memory import (
        cached_reference_bytes,
        needed_memory_bytes,
        validation_memory_bytes,
    )
    from hipdnn_trace.validate.compare import CHUNK_BYTES_PER_ELEMENT, CHUNK_ELEMENTS

    cache = ReferenceCache(tmp_path / "cache")
    graph = _run(cache).graph
    checking = validation_memory_bytes(graph, CHUNK_ELEMENTS, CHUNK_BYTES_PER_ELEMENT)
    have = host_bytes(graph) + cached_reference_bytes(graph) + checking
    assert have < host_bytes(graph) + needed_memory_bytes(graph) + checking
    monkeypatch.setattr(reference_backend, "available_memory_bytes", lambda: have)
    hit = _run(cache)
    assert hit.reference_origin == "cache" and not hit.skip_reference
    dropped = _run(None)
    assert dropped.skip_reference and any("not validated against the reference" in n for n in dropped.notes)


def test_time_limit_does_not_refuse_a_cached_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--max-reference-seconds bounds an evaluation; a cached reference is not evaluated. Only the
    plan is asked (for a cudnn configuration, which never runs here): the reference backend itself
    still evaluates, so it stays bounded."""
    cache = ReferenceCache(tmp_path / "cache")
    graph = _run(cache).graph
    from hipdnn_trace.bench import verdict  # where run's (and inspect's) time refusal is decided

    monkeypatch.setattr(verdict, "surely_fast", lambda *a, **k: False)
    monkeypatch.setattr(verdict, "time_refusal", lambda *a, **k: "too slow (mocked estimate)")
    settings = graph_run.RunSettings(reference_cache=cache)
    run = graph_run.GraphRun(source="cached_matmul.json", name="cached_matmul")
    cached = graph_run._limits(graph, settings, run)   # the limits run's verdict judges cudnn with
    assert verdict.time_limit_refusal(graph, cached, as_backend=False) is None
    evaluated = graph_run._limits(graph, graph_run.RunSettings(), run)
    assert "too slow" in (verdict.time_limit_refusal(graph, evaluated, as_backend=False) or "")


@pytest.mark.parametrize("flags, needle", [
    (["--reference-cache-max", "0"], "must be > 0 GiB"),
    (["--reference-cache-max", "lots"], "expected a size in GiB"),
    (["--reference-cache", "{tmp}/file/cache"], "--reference-cache"),
])
def test_bad_cache_flags_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str],
                                      needle: str) -> None:
    graph = tmp_path / "cached_matmul.json"
    graph.write_bytes(DATA)
    (tmp_path / "file").write_text("not a folder")
    flags = [f.replace("{tmp}", str(tmp_path)) for f in flags]
    assert main(["run", str(graph), "--out", str(tmp_path / "runs"), *flags]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err, err
    assert not (tmp_path / "runs").exists()             # refused before any run directory

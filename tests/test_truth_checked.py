"""Nothing is taken as the truth unchecked (reliability issue, item 2): a reference-cache entry or a golden
bundle whose bytes changed after they were written is never used; a tarball that does not reach its proper end
is refused instead of running as a smaller suite; a --save-tensors write that fails (a full file system,
simulated by a monkeypatched write) leaves no partial files, is reported and recorded, and a later --golden on
that folder refuses the incomplete bundle instead of quietly falling back to the reference."""

from __future__ import annotations

import errno
import io
import json
import pathlib
import tarfile
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from reliability_helpers import graph_json

from hipdnn_trace.bench import graph_run
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.bench.reference_cache import ReferenceCache, entry_key
from hipdnn_trace.cli import main
from hipdnn_trace.errors import GraphError
from hipdnn_trace.graph import golden
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.load import load_file
from hipdnn_trace.graph.sources import GraphSource, expand
from hipdnn_trace.graph.write import dumps
from hipdnn_trace.markers import Markers

# ------------------------------------------------------------------ reference-cache entries


def _matmul() -> bytes:
    b = GraphBuilder("truth_matmul", io="half", compute="float")
    b.matmul(b.tensor("a", [2, 16, 24]), b.tensor("b", [2, 24, 8]), out="c")
    return dumps(b.build()).encode()


MATMUL = _matmul()


def _run_cached(cache: ReferenceCache):
    return graph_run.run_graph(
        GraphSource("truth_matmul.json", lambda: MATMUL), [Config("reference", "reference")],
        graph_run.RunSettings(loop=LoopSettings(warmup=0, iters=1), reference_cache=cache), Markers())


def _alter_data_keep_header(npy: Path, how: str) -> None:
    """Rewrite a .npy's data in place: the header (dtype, shape) stays exactly as it was."""
    mapped = np.load(npy, mmap_mode="r+")
    if how == "zeroed":
        mapped[...] = 0.0
    elif how == "one element":
        mapped.reshape(-1)[7] += 1.0
    else:
        mapped[...] = np.nan
    mapped.flush()
    del mapped


@pytest.mark.parametrize("how", ["zeroed", "one element", "all NaN"])
def test_a_cache_entry_altered_behind_an_intact_header_is_recomputed_not_used(tmp_path: Path, how: str) -> None:
    cache = ReferenceCache(tmp_path / "cache")
    first = _run_cached(cache)
    truth = {u: np.array(a) for u, a in first.reference.items()}
    graph = first.graph
    npy = cache.folder / entry_key(graph, 0) / f"{graph.output_tensors[0].uid}.npy"
    header = npy.read_bytes()[:128]
    _alter_data_keep_header(npy, how)
    assert npy.read_bytes()[:128] == header
    again = _run_cached(cache)
    assert again.reference_origin == "computed, cached"          # the origin says it was not the cache
    assert any("does not match the checksum" in n and "computed again" in n for n in again.notes), again.notes
    for uid, array in truth.items():
        np.testing.assert_array_equal(again.reference[uid], array)
    assert [v.passed for v in again.validation] == [True]
    assert _run_cached(cache).reference_origin == "cache"      # replaced by a whole, checked entry


def test_a_cache_entry_without_checksums_is_recomputed(tmp_path: Path) -> None:
    cache = ReferenceCache(tmp_path / "cache")
    graph = _run_cached(cache).graph
    manifest = cache.folder / entry_key(graph, 0) / "entry.json"
    meta = json.loads(manifest.read_text())
    del meta["sha256"]
    manifest.write_text(json.dumps(meta))
    again = _run_cached(cache)
    assert again.reference_origin == "computed, cached"
    assert any("holds no checksums" in n for n in again.notes), again.notes


# ------------------------------------------------------------------ golden bundles and --save-tensors


@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    path = tmp_path / "g" / "saved.json"
    path.parent.mkdir()
    path.write_text(json.dumps(graph_json("saved")))
    return path


def _run(tmp_path: Path, run_id: str, *args: str | Path) -> int:
    return main(["run", *map(str, args), "--out", str(tmp_path / "runs"), "--run-id", run_id, "-i", "1", "-w", "0",
                 "--no-isolate", "--no-trace"])


def _summary(tmp_path: Path, run_id: str) -> pl.DataFrame:
    return pl.read_csv(tmp_path / "runs" / run_id / "summary.csv")


def test_save_tensors_writes_a_checksum_manifest_sha256sum_reads(tmp_path: Path, graph_file: Path) -> None:
    tensors = tmp_path / "t"
    assert _run(tmp_path, "save", graph_file, "--save-tensors", tensors) == 0
    manifest = tensors / "saved.sha256"
    lines = manifest.read_text().splitlines()
    names = {line.split("  ", 1)[1] for line in lines}
    assert {"saved.json", "saved.meta.json"} <= names and sum(n.endswith(".bin") for n in names) == 3
    for line in lines:   # sha256sum's format: "<hex>  <name>"
        digest, name = line.split("  ", 1)
        assert __import__("hashlib").sha256((tensors / name).read_bytes()).hexdigest() == digest
    assert not (tensors / "saved.incomplete").exists()
    meta = json.loads((tmp_path / "runs" / "save" / "run.json").read_text())
    assert meta["saved_tensors"] == {"saved": str(tensors / "saved.json")}
    assert _run(tmp_path, "use", graph_file, "--golden", tensors) == 0


@pytest.mark.parametrize("which", ["input", "output"])
def test_golden_refuses_a_tensor_that_does_not_match_its_checksum(tmp_path: Path, graph_file: Path,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  which: str) -> None:
    tensors = tmp_path / "t"
    assert _run(tmp_path, "save", graph_file, "--save-tensors", tensors) == 0
    graph = load_file(graph_file)
    uid = (graph.input_tensors if which == "input" else graph.output_tensors)[0].uid
    bin_path = tensors / f"saved.tensor{uid}.bin"
    data = bytearray(bin_path.read_bytes())
    data[5] ^= 0x01          # one bit: same size, plausible value
    bin_path.write_bytes(bytes(data))
    capsys.readouterr()
    assert _run(tmp_path, "use", graph_file, "--golden", tensors) == 1
    row = _summary(tmp_path, "use").row(0, named=True)
    assert row["status"] == "error" and str(bin_path) in row["error"] and "does not match its checksum" in row["error"]
    assert str(bin_path) in capsys.readouterr().out


def _full_disk_after(monkeypatch: pytest.MonkeyPatch, folder: Path, good: int) -> list[Path]:
    """Path.write_bytes under ``folder`` succeeds ``good`` times, then writes half its bytes and fails with
    ENOSPC, as a full file system does (monkeypatched: no tmpfs or root needed). Returns the files tried."""
    real = pathlib.Path.write_bytes
    tried: list[Path] = []

    def write_bytes(self: Path, data: bytes) -> int:
        if not str(self).startswith(str(folder)):
            return real(self, data)
        tried.append(self)
        if len(tried) <= good:
            return real(self, data)
        real(self, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pathlib.Path, "write_bytes", write_bytes)
    return tried


@pytest.mark.parametrize("good", [0, 2, 5])   # the first tensor, a later tensor, the manifest itself
def test_save_tensors_on_a_full_disk_monkeypatched_leaves_no_partial_files_and_says_so(
        tmp_path: Path, graph_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        good: int) -> None:
    tensors = tmp_path / "t"
    tried = _full_disk_after(monkeypatch, tensors, good)
    assert _run(tmp_path, "save", graph_file, "--save-tensors", tensors) == 0   # the measurement stands
    failed = tried[good]
    out = capsys.readouterr().out
    assert f"tensors not saved: {failed}: No space left on device" in out, out
    assert sorted(p.name for p in tensors.iterdir()) == ["saved.incomplete"]   # partial files removed
    assert "No space left on device" in json.loads((tensors / "saved.incomplete").read_text())["state"]
    meta = json.loads((tmp_path / "runs" / "save" / "run.json").read_text())
    assert meta["saved_tensors"]["saved"].startswith(f"failed: {failed}: No space left on device")
    monkeypatch.undo()
    assert _run(tmp_path, "use", graph_file, "--golden", tensors) == 1      # refused, not the seeded fallback
    row = _summary(tmp_path, "use").row(0, named=True)
    assert row["status"] == "error" and "incomplete golden bundle" in row["error"], row


def test_a_full_disk_monkeypatched_is_a_warning_line_of_a_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "g"
    folder.mkdir()
    for name, dims in (("one", (2, 3, 4, 5)), ("two", (2, 4, 4, 6))):
        (folder / f"{name}.json").write_text(json.dumps(graph_json(name, dims=dims)))
    tensors = tmp_path / "t"
    _full_disk_after(monkeypatch, tensors, 0)
    assert _run(tmp_path, "suite", folder, "--save-tensors", tensors) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if "WARNING" in line]
    assert len(warnings) == 2 and all("tensors not saved" in w and "No space left" in w for w in warnings), warnings


def test_a_killed_bundle_write_is_refused(tmp_path: Path, graph_file: Path) -> None:
    """A writer killed after the .json but before the manifest leaves its marker: the bundle is refused."""
    tensors = tmp_path / "t"
    assert _run(tmp_path, "save", graph_file, "--save-tensors", tensors) == 0
    (tensors / "saved.sha256").unlink()
    (tensors / "saved.incomplete").write_text('{"state": "writing"}\n')
    with pytest.raises(golden.BundleError, match="incomplete golden bundle"):
        golden.read_bundle(tensors / "saved.json")


# ------------------------------------------------------------------ tarballs


def _members(n: int = 3) -> list[tuple[str, bytes]]:
    return [(f"g{i}.json", json.dumps(graph_json(f"g{i}", dims=(2, 3 + i, 4, 5)), indent=1).encode())
            for i in range(n)]


def _tar(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _second_header(members: list[tuple[str, bytes]]) -> int:
    return 512 + -(-len(members[0][1]) // 512) * 512


def _damaged(kind: str) -> bytes:
    members = _members()
    raw = bytearray(_tar(members))
    at = _second_header(members)
    if kind == "corrupt second header":
        raw[at + 148:at + 156] = b"garbage!"   # the header's checksum field
    elif kind == "truncated at a block":
        del raw[at:]
    else:   # another archive appended after the end marker
        raw += _tar(_members(1))
    return bytes(raw)


@pytest.mark.parametrize("kind", ["corrupt second header", "truncated at a block", "data after the end"])
@pytest.mark.parametrize("suffix", [".tar", ".tar.gz"])
def test_a_tar_that_does_not_reach_its_end_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      kind: str, suffix: str) -> None:
    data = _damaged(kind)
    path = tmp_path / f"suite{suffix}"
    if suffix == ".tar.gz":
        import gzip

        data = gzip.compress(data)
    path.write_bytes(data)
    with pytest.raises(GraphError, match="refused: the archive|refused: data after the end"):
        expand([str(path)])
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "-i", "1", "-w", "0", "--no-isolate"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(path) in err, err


def test_a_whole_tar_still_runs_every_member(tmp_path: Path) -> None:
    path = tmp_path / "suite.tar"
    path.write_bytes(_tar(_members()))
    assert [s.name for s in expand([str(path)])] == [f"{path}:g{i}.json" for i in range(3)]
    gz = tmp_path / "suite.tar.gz"
    with tarfile.open(gz, "w:gz") as tar:   # tarfile's own writer pads to its record size
        for name, data in _members(2):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert len(expand([str(gz)])) == 2


def test_a_tar_cut_after_one_zero_block_is_refused(tmp_path: Path) -> None:
    members = _members(1)
    raw = _tar(members)
    end = 512 + -(-len(members[0][1]) // 512) * 512
    path = tmp_path / "cut.tar"
    path.write_bytes(raw[:end + 512])   # only one of the two zero blocks
    with pytest.raises(GraphError, match="without the end-of-archive marker"):
        expand([str(path)])

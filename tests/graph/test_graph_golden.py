"""Golden bundles in hipDNN's layout ({Name}.json + {Name}.tensor{uid}.bin, raw
little-endian bytes laid out by strides) and as .npz."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from graph_samples import conv_bias_relu

from hipdnn_trace.backends.reference.executor import evaluate
from hipdnn_trace.bench.inputs import make_inputs
from hipdnn_trace.errors import UserError
from hipdnn_trace.graph import golden
from hipdnn_trace.graph.build import GraphBuilder
from hipdnn_trace.graph.model import Graph


def all_tensors(graph: Graph, seed: int = 3) -> dict[int, np.ndarray]:
    """Inputs, outputs and virtual intermediates from the reference, as the harness passes them."""
    inputs = make_inputs(graph, seed)
    return {**inputs, **evaluate(graph, inputs).stored}


def layout_graph(io: str, layout: str | None = None, strides: list[int] | None = None) -> Graph:
    b = GraphBuilder(f"relu {layout or 'padded'}/{io}", io=io)
    x = b.tensor("x", [2, 3, 4, 5], layout=layout, strides=strides)
    b.pointwise("relu_fwd", x, out="y", layout=None if strides is None else "NCHW")
    return b.build()


CASES = {
    "nchw_fp32": lambda: layout_graph("float", "NCHW"),
    "nhwc_fp16": lambda: layout_graph("half", "NHWC"),
    "nhwc_bf16": lambda: layout_graph("bfloat16", "NHWC"),
    "padded_fp16": lambda: layout_graph("half", strides=[3 * 4 * 8 + 5, 4 * 8, 8, 1]),
    "fused_virtual_bf16": lambda: conv_bias_relu("bfloat16"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bundle_round_trip(case: str, tmp_path: Path) -> None:
    graph = CASES[case]()
    tensors = all_tensors(graph)
    path = golden.write_bundle(tmp_path, graph, tensors, seed=3)
    assert path == tmp_path / f"{golden.bundle_stem(graph)}.json"
    for t in graph.tensors:   # hipDNN's loader needs a file for every tensor
        bin_path = tmp_path / f"{path.stem}.tensor{t.uid}.bin"
        assert bin_path.stat().st_size == t.storage_elements * np.dtype(tensors[t.uid].dtype).itemsize
    again, read = golden.read_bundle(path)
    assert again.graph_id == graph.graph_id
    assert set(read) == {t.uid for t in graph.tensors}
    for uid, arr in tensors.items():
        assert read[uid].dtype == arr.dtype and read[uid].shape == arr.shape
        np.testing.assert_array_equal(read[uid].view(np.uint8), np.ascontiguousarray(arr).view(np.uint8))
    meta = golden.read_meta(path)
    assert meta is not None and meta["format_version"] == 1 and meta["seed"] == 3
    assert meta["generator"] == "hipdnn-trace"


def test_bytes_follow_strides_little_endian(tmp_path: Path) -> None:
    """NHWC fp16 [1, 2, 1, 3]: memory order is (w0 c0, w0 c1, w1 c0, ...)."""
    b = GraphBuilder("bytes", io="half")
    x = b.tensor("x", [1, 2, 1, 3], layout="NHWC")
    b.pointwise("identity", x, out="y")
    graph = b.build()
    logical = np.arange(6, dtype=np.float16).reshape(1, 2, 1, 3)   # c0: 0 1 2, c1: 3 4 5
    path = golden.write_bundle(tmp_path, graph, {1: logical, 2: logical})
    data = (tmp_path / f"{path.stem}.tensor1.bin").read_bytes()
    expected = np.array([0, 3, 1, 4, 2, 5], dtype="<f2").tobytes()
    assert data == expected


def test_padded_layout_gaps_are_zero_and_read_back(tmp_path: Path) -> None:
    b = GraphBuilder("padded")
    x = b.tensor("x", [2, 3], strides=[4, 1])
    b.pointwise("neg", x, out="y", layout="packed")
    graph = b.build()
    arr = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    path = golden.write_bundle(tmp_path, graph, {1: arr, 2: -arr})
    raw = np.frombuffer((tmp_path / f"{path.stem}.tensor1.bin").read_bytes(), "<f4")
    np.testing.assert_array_equal(raw, [1, 2, 3, 0, 4, 5, 6])
    np.testing.assert_array_equal(golden.read_bundle(path)[1][1], arr)


def test_value_scalars_and_untouched_tensors_are_filled(tmp_path: Path) -> None:
    b = GraphBuilder("bn")
    x = b.tensor("x", [2, 3, 2, 2])
    b.tensor("unused", [4])
    b.batchnorm(x, b.tensor("s", [1, 3, 1, 1]), b.tensor("b", [1, 3, 1, 1]), epsilon=0.25, out="y")
    graph = b.build()
    path = golden.write_bundle(tmp_path, graph, all_tensors(graph))
    _, read = golden.read_bundle(path)
    eps = next(t for t in graph.tensors if t.is_value)
    assert read[eps.uid].tolist() == [0.25]
    unused = next(t for t in graph.tensors if t.name == "unused")
    assert read[unused.uid].tolist() == [0, 0, 0, 0]


def test_writing_without_a_needed_tensor_is_refused(tmp_path: Path) -> None:
    graph = CASES["nchw_fp32"]()
    with pytest.raises(ValueError, match="no data for tensor"):
        golden.write_bundle(tmp_path, graph, make_inputs(graph, 0))
    assert not any(tmp_path.iterdir())


def test_missing_or_short_bin_names_the_file(tmp_path: Path) -> None:
    """hipDNN's own bundles (no .sha256 manifest) are judged by their sizes alone."""
    graph = CASES["nhwc_fp16"]()
    path = golden.write_bundle(tmp_path, graph, all_tensors(graph))
    golden.checksums_path(path).unlink()
    bin2 = tmp_path / f"{path.stem}.tensor2.bin"
    data = bin2.read_bytes()
    bin2.write_bytes(data[:-2])
    with pytest.raises(golden.BundleError, match=r"tensor2\.bin: 238 bytes.*needs 240"):
        golden.read_bundle(path)
    bin2.write_bytes(data + b"\0" * 16)   # longer: hipDNN copies what it needs, so do we
    np.testing.assert_array_equal(golden.read_bundle(path)[1][2].view(np.uint16),
                                  all_tensors(graph)[2].view(np.uint16))
    bin2.unlink()
    with pytest.raises(golden.BundleError, match=r"tensor2\.bin: missing"):
        golden.read_bundle(path)


def test_bundle_json_is_the_graph_and_meta_follows_hipdnn_types(tmp_path: Path) -> None:
    graph = CASES["nchw_fp32"]()
    path = golden.write_bundle(tmp_path, graph, all_tensors(graph), meta={"gpu_architecture": "gfx942"})
    assert json.loads(path.read_text())["name"] == graph.name
    meta = json.loads((tmp_path / f"{path.stem}.meta.json").read_text())
    assert meta["gpu_architecture"] == "gfx942" and meta["operation"] == "Pointwise"
    with pytest.raises(ValueError, match="seed"):
        golden.write_bundle(tmp_path / "x", graph, all_tensors(graph), meta={"seed": "seven"})
    (tmp_path / f"{path.stem}.meta.json").write_text('{"format_version": 2}')
    assert golden.read_meta(path) is None   # hipDNN ignores other versions too


def test_file_names_are_sanitized() -> None:
    assert golden.bundle_stem(CASES["nchw_fp32"]()) == "relu_NCHW_float"
    b = GraphBuilder("../../etc/passwd")
    b.pointwise("abs", b.tensor("x", [2]))
    assert golden.bundle_stem(b.build()) == "etc_passwd"
    assert golden.tensor_path(Path("d/a.b.json"), -3) == Path("d/a.b.tensor-3.bin")


@pytest.mark.parametrize("case", ["nhwc_bf16", "padded_fp16", "fused_virtual_bf16"])
def test_npz_round_trip(case: str, tmp_path: Path) -> None:
    graph = CASES[case]()
    tensors = all_tensors(graph)
    path = golden.write_npz(tmp_path / "g.npz", graph, tensors)
    with np.load(path, allow_pickle=False) as npz:   # plain numpy can read it
        assert {f"t{t.uid}" for t in graph.tensors} | {"graph"} == set(npz.files)
    again, read = golden.read_npz(path)
    assert again.graph_id == graph.graph_id
    for uid, arr in tensors.items():
        assert read[uid].dtype == arr.dtype
        np.testing.assert_array_equal(read[uid].view(np.uint8), np.ascontiguousarray(arr).view(np.uint8))
    assert read[1].dtype in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16))


def test_npz_that_is_not_a_bundle(tmp_path: Path) -> None:
    np.savez(tmp_path / "other.npz", a=np.zeros(2))
    with pytest.raises(UserError, match="no 'graph' entry"):
        golden.read_npz(tmp_path / "other.npz")


def test_find_bundle_by_name_then_by_graph_id(tmp_path: Path) -> None:
    graph = CASES["nhwc_fp16"]()
    other = CASES["nchw_fp32"]()
    assert golden.find_bundle(tmp_path, graph) is None
    golden.write_bundle(tmp_path / "a", other, all_tensors(other))
    path = golden.write_bundle(tmp_path / "b", graph, all_tensors(graph))
    assert golden.find_bundle(tmp_path, graph) == path
    # renamed bundle: found through its graph_id
    renamed = tmp_path / "b" / "renamed.json"
    for f in sorted((tmp_path / "b").iterdir()):
        f.rename(f.with_name(f.name.replace(path.stem, "renamed")))
    assert golden.find_bundle(tmp_path, graph) == renamed
    # same name, different graph: not a match
    renamed.write_text(renamed.read_text().replace('"half"', '"float"'))
    assert golden.find_bundle(tmp_path, graph) is None
    npz = golden.write_npz(tmp_path / "c" / "x.npz", graph, all_tensors(graph))
    assert golden.find_bundle(tmp_path, graph) == npz


def test_hipdnn_loader_problems() -> None:
    assert golden.hipdnn_loader_problems(CASES["nchw_fp32"]()) == []
    b = GraphBuilder("bn")
    b.batchnorm(b.tensor("x", [2, 3, 2]), b.tensor("s", [1, 3, 1]), b.tensor("b", [1, 3, 1]))
    assert any("null output" in p for p in golden.hipdnn_loader_problems(b.build()))
    r = GraphBuilder("r")
    r.reduction("add", r.tensor("x", [2, 3]), [2, 1])
    assert any("'outputs' object" in p for p in golden.hipdnn_loader_problems(r.build()))

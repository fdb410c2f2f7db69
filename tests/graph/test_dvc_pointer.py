"""A bundle's DVC pointer as a manifest (graph/dvc_pointer.py, graph/bundles.py ``golden_data``).

The pointer records each ``.bin`` file's md5. Two upstream facts anchor these tests: dnn-providers'
``integration_test_bundles/README.md`` shows the pointer of the SDPA-forward bundle its generator's usage
line makes (``generate_sdpa_fwd_golden.py --q-dims 2 4 256 128 --v-dims 2 4 256 128 --seed 42``, bf16):
``Small.tensor0.bin`` md5 ``437ad9f6e2b1db28ca900503e09f7a63``, 524288 bytes; and ``docs/file-formats.md``
(@ 6ed0dc19) shows ``hd128_causal_mha/Small``'s, ``8510f215d557db558ee2f131ed05d2e3``, 33554432 bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hipdnn_trace.errors import GraphError, UserError
from hipdnn_trace.graph.bundles import golden_data
from hipdnn_trace.graph.dvc_pointer import PointerEntry, read_pointer
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.sources import expand
from tests.support.graph_dicts import sdpa_generator

torch = pytest.importorskip("torch")

README_Q_MD5 = "437ad9f6e2b1db28ca900503e09f7a63"   # integration_test_bundles/README.md, "DVC Remote Layout"
POINTER = """outs:
- path: Small.tensor0.bin
  remote: golden-data        # <- DVC fetches/pushes this output from golden-data
  md5: {md5}
  size: 524288
  hash: md5
"""


def test_a_pointer_reads_as_dvc_writes_it(tmp_path: Path) -> None:
    """file-formats.md's example, and the README's hand-written ``- path:`` lines (no md5 yet)."""
    path = tmp_path / "Small.tensors.dvc"
    path.write_text("outs:\n- path: Small.tensor0.bin\n  md5: 8510f215d557db558ee2f131ed05d2e3\n  size: 33554432\n"
                    "  hash: md5\n  remote: golden-data\n- path: Small.tensor1.bin\n")
    assert read_pointer(path) == {
        "Small.tensor0.bin": PointerEntry("Small.tensor0.bin", "8510f215d557db558ee2f131ed05d2e3", 33554432),
        "Small.tensor1.bin": PointerEntry("Small.tensor1.bin")}


@pytest.mark.parametrize("text,where", [
    ("- path: a.bin\n", "line 1"),                                   # no outs: header
    ("outs:\n- path: a.bin\n  checksum: 1\n", "line 3"),             # not a DVC key
    ("outs:\n- md5: 00\n", "outs[0].path"),
    ("outs:\n- path: a.bin\n  size: big\n", "outs[0].size"),
])
def test_a_malformed_pointer_is_one_line_naming_file_and_place(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "Small.tensors.dvc"
    path.write_text(text)
    with pytest.raises(GraphError) as err:
        read_pointer(path)
    assert str(err.value).startswith(f"{path}: {where}") and "\n" not in str(err.value), err.value


def _readme_bundle(root: Path, q_md5: str, *, output: bool = False) -> tuple:
    """The README's bundle (bf16 Q, K, V [2, 4, 256, 128], seed 42) as generate_sdpa_fwd_golden.py writes its
    graph and meta, with only the pointer (and, with ``output``, an O file)."""
    folder = root / "quick" / "SdpaFwd" / "bhsd" / "bf16" / "hd128_nomask_batch" / "Small"
    folder.mkdir(parents=True)
    (folder / "Small.json").write_text(json.dumps(sdpa_generator([2, 4, 256, 128], dtype="bfloat16"), indent=4))
    (folder / "Small.meta.json").write_text(json.dumps(
        {"format_version": 1, "generator": "generate_sdpa_fwd_golden.py", "seed": 42, "input_range": [-1.0, 1.0]}))
    (folder / "Small.tensors.dvc").write_text(POINTER.format(md5=q_md5))
    if output:
        (folder / "Small.tensor3.bin").write_bytes(bytes(2 * 4 * 256 * 128 * 2))
    [source] = expand([str(root)])
    return source, load_bytes(source.read(), source.name)


def test_remade_inputs_are_amds_bytes_when_the_recipe_is_the_published_one(tmp_path: Path) -> None:
    """Our copy of the generator's recipe (one seeded CPU generator, Q, K, V uniform in that order) gives the
    very file AMD's pointer records: proven on AMD's md5, not on our own output."""
    source, graph = _readme_bundle(tmp_path, README_Q_MD5)
    data = golden_data(source.bundle, graph)
    assert data.state == "dvc-only"
    assert any("byte for byte (md5 of Small.tensor0.bin" in n for n in data.notes), data.notes


def test_golden_outputs_of_other_inputs_are_not_a_target(tmp_path: Path) -> None:
    """Remade inputs whose md5 is not the pointer's: the golden O belongs to other inputs, so judging our
    output against it would blame the library for the harness's inputs."""
    source, graph = _readme_bundle(tmp_path, "0" * 32, output=True)
    data = golden_data(source.bundle, graph)
    assert data.state == "unusable" and data.outputs == {}
    assert any(n.startswith("inputs remade from the recipe differ") and README_Q_MD5 in n for n in data.notes)
    assert any("not the inputs its outputs were computed from" in n for n in data.notes), data.notes


def test_a_file_that_is_not_the_pointers_is_not_golden(tmp_path: Path) -> None:
    """A pulled file edited since, or left from an older pull: its md5 is not the pointer's."""
    source, graph = _readme_bundle(tmp_path, README_Q_MD5, output=True)
    out = source.bundle.tensor_file(3)
    (out.parent / "Small.tensors.dvc").write_text(
        POINTER.format(md5=README_Q_MD5) + "- path: Small.tensor3.bin\n  md5: ffffffffffffffffffffffffffffffff\n")
    data = golden_data(source.bundle, graph)
    assert data.state == "unusable" and data.outputs == {}
    assert any("not the ones its DVC pointer names (Small.tensor3.bin: md5" in n for n in data.notes), data.notes
    out.write_bytes(np.zeros(1, "<u1").tobytes())   # without the pointer's md5 for it, its size is still judged
    (out.parent / "Small.tensors.dvc").write_text(POINTER.format(md5=README_Q_MD5))
    with pytest.raises(UserError, match="Small.tensor3.bin: 1 bytes"):
        golden_data(source.bundle, graph)

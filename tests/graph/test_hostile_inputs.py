"""Hostile inputs are refused with one clear line, before anything big is allocated.

Each case is checked under tracemalloc: the refusal must come while Python has
allocated little beyond the input itself (numpy reports its buffers to tracemalloc
too), so a graph "needing" a petabyte or an archive unpacking to a gigabyte is
refused by reading its description, not by trying.

tests/data/reliability/bomb.tar.bz2 (854 bytes) is a real tar bomb: one member of
1 GiB + 1 MiB of zeros, made with ``bz2.open(path, "wb", compresslevel=9)`` writing
``tarfile.TarInfo("bomb.json")`` (size 2**30 + 2**20, GNU format) then the zeros.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from reliability_helpers import REPO, graph_json

from hipdnn_trace.cli import main as cli_main
from hipdnn_trace.errors import GraphError, UserError, describe
from hipdnn_trace.graph import sources
from hipdnn_trace.graph.load import MAX_DEPTH, MAX_FILE_BYTES, load_bytes, load_file
from hipdnn_trace.graph.sources import MAX_ARCHIVE_BYTES, expand
from hipdnn_trace.results.rundir import load_run

BOMB = REPO / "tests" / "data" / "reliability" / "bomb.tar.bz2"
#: What a refusal may allocate beyond its input (tracemalloc peak).
SMALL = 8 << 20


def refused_cheaply(action: Callable[[], object], input_bytes: int = 0) -> str:
    """Run ``action``; it must raise UserError with a peak allocation under SMALL + input."""
    tracemalloc.start()
    try:
        with pytest.raises(UserError) as info:
            action()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < SMALL + 4 * input_bytes, f"peak {peak} bytes before the refusal"
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def _graph_bytes(**tensor_dims: list[int]) -> bytes:
    g = graph_json("hostile")
    for t in g["tensors"]:
        if t["name"] in tensor_dims:
            dims = tensor_dims[t["name"]]
            t["dims"] = dims
            strides, step = [], 1
            for d in reversed(dims):
                strides.insert(0, step)
                step *= d
            t["strides"] = strides
    return json.dumps(g).encode()


# ------------------------------------------------------------------- graph files

def test_dims_that_would_need_a_petabyte_are_refused_by_the_loader():
    data = _graph_bytes(x=[65536, 65536, 65536, 1], z=[65536, 65536, 65536, 1])
    msg = refused_cheaply(lambda: load_bytes(data, "huge.json"), len(data))
    assert msg == "huge.json: $.tensors[0].dims: 2.81e+14 elements is larger than any device can hold"


@pytest.mark.parametrize("dims, problem", [
    ([2**40, 2**20, 1, 1], "1.15e+18 elements is larger than any device can hold"),
    ([2**63, 1, 1, 1], "9223372036854775808 does not fit in a 64-bit integer"),
    ([10**30, 3, 1, 1], "does not fit in a 64-bit integer"),
    ([1e308, 3, 4, 5], "expected an integer, got the number 1e+308"),
    ([0, 3, 4, 5], "dim 0 must be >= 1"),
    ([-2**31, 3, 4, 5], "dim -2147483648 must be >= 1"),
])
def test_absurd_dims_are_refused(dims, problem):
    data = _graph_bytes(x=dims)
    assert problem in refused_cheaply(lambda: load_bytes(data, "dims.json"), len(data))


def test_deep_nesting_is_refused_without_recursion():
    data = b"[" * 200_000 + b"]" * 200_000
    msg = refused_cheaply(lambda: load_bytes(data, "deep.json"), len(data))
    assert msg == f"deep.json: JSON nested deeper than {MAX_DEPTH} levels"
    g = graph_json("deep")
    g["tensors"][0]["extra"] = json.loads("[" * 30 + "]" * 30)   # deep where a graph allows anything
    data = json.dumps(g).encode()
    assert f"nested deeper than {MAX_DEPTH}" in refused_cheaply(lambda: load_bytes(data, "deep2.json"), len(data))


@pytest.mark.parametrize("data, problem", [
    ('{"name": "caf\u00e9"}'.encode("latin-1"), "not UTF-8 text (byte 0xe9 at offset 13)"),
    ('{"name": "x"}'.encode("utf-16"), "not UTF-8 text (byte 0xff at offset 0)"),
    (b"\x00" * 64, "invalid JSON"),
    (b"   \n\t ", "file is empty"),
    (b'{"name": NaN}', "NaN is not valid JSON"),
    (b'{"name": "a", "name": "b"}', "duplicate key 'name' in a JSON object"),
])
def test_encoding_and_syntax_attacks_are_refused(data, problem):
    assert problem in refused_cheaply(lambda: load_bytes(data, "enc.json"), len(data))


def test_oversized_file_is_refused_before_reading(tmp_path):
    path = tmp_path / "big.json"
    with open(path, "wb") as fh:      # sparse: no disk, no memory
        fh.truncate(MAX_FILE_BYTES + 1)
    msg = refused_cheaply(lambda: load_file(path))
    assert msg == f"{path}: file is {MAX_FILE_BYTES + 1} bytes; graphs over {MAX_FILE_BYTES} are refused"


def test_cyclic_graph_is_refused():
    g = graph_json("cycle")
    node = g["nodes"][0]
    out_uid = next(iter(node["outputs"].values()))
    first_in = next(k for k in node["inputs"] if k.endswith("_tensor_uid"))
    node["inputs"][first_in] = out_uid
    data = json.dumps(g).encode()
    assert "reads a tensor it writes itself" in refused_cheaply(lambda: load_bytes(data, "cycle.json"))


# ----------------------------------------------------------------------- archives

def _tar(path: Path, members: list[tarfile.TarInfo], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as tar:
        for m in members:
            tar.addfile(m, io.BytesIO(b"{}") if m.isfile() else None)
    return path


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    info.size = 2 if kind == tarfile.REGTYPE else 0
    return info


def test_real_tar_bomb_is_refused_from_its_header():
    assert BOMB.stat().st_size < 1024
    with tarfile.open(BOMB) as tar:          # what the fixture claims, read from its header only
        (member,) = [tar.next()]
        assert member.size > MAX_ARCHIVE_BYTES
    msg = refused_cheaply(lambda: expand([str(BOMB)]))
    assert msg == f"{BOMB}: refused: unpacks to more than {MAX_ARCHIVE_BYTES} bytes"


@pytest.mark.parametrize("member, problem", [
    (_member("g/evil.json", tarfile.SYMTYPE, "../../etc/passwd"), "links out of the archive (to '../../etc/passwd')"),
    (_member("evil.json", tarfile.SYMTYPE, "/etc/passwd"), "links out of the archive (to '/etc/passwd')"),
    (_member("evil.json", tarfile.LNKTYPE, "/etc/shadow"), "links out of the archive (to '/etc/shadow')"),
    (_member("g/../../escape.json"), "climbs out with '..'"),
    (_member("/abs/graph.json"), "has an absolute path"),
    (_member("C:/graph.json"), "has an absolute path"),
    (_member("dev/null.json", tarfile.CHRTYPE), "is a device, fifo or other special file"),
    (_member("pipe.json", tarfile.FIFOTYPE), "is a device, fifo or other special file"),
])
def test_archive_members_escaping_the_folder_are_refused(tmp_path, member, problem):
    path = _tar(tmp_path / "evil.tar.gz", [_member("ok.json"), member])
    msg = refused_cheaply(lambda: expand([str(path)]))
    assert msg.startswith(f"{path}: refused: member ") and msg.endswith(problem)


def test_archive_with_too_many_members_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "MAX_ARCHIVE_MEMBERS", 50)   # the real cap (100k) takes seconds to reach
    path = _tar(tmp_path / "many.tar", [_member(f"g/{i}.json") for i in range(51)], mode="w")
    assert refused_cheaply(lambda: expand([str(path)])) == f"{path}: refused: more than 50 members"


def test_corrupt_archive_is_a_user_error(tmp_path):
    path = tmp_path / "broken.tar.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00" + os.urandom(64))
    assert "not a readable tar archive" in refused_cheaply(lambda: expand([str(path)]))


# ---------------------------------------------------------------- through the CLI

def test_suite_of_hostile_files_records_each_and_runs_the_rest(tmp_path, capsys):
    folder = tmp_path / "hostile"
    folder.mkdir()
    (folder / "a_huge.json").write_bytes(_graph_bytes(x=[65536, 65536, 65536, 1]))
    (folder / "b_deep.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    (folder / "c_latin1.json").write_bytes('{"name": "caf\u00e9"}'.encode("latin-1"))
    (folder / "d_good.json").write_text(json.dumps(graph_json("good")))
    code = cli_main(["run", str(folder), "-w", "0", "-i", "1", "--out", str(tmp_path), "--run-id", "r", "-q"])
    assert code == 1
    summary = load_run(tmp_path / "r").summary
    errors = dict(zip(summary.get_column("source").to_list(), summary.get_column("error").to_list()))
    assert errors[str(folder / "a_huge.json")].endswith("elements is larger than any device can hold")
    assert errors[str(folder / "b_deep.json")].endswith(f"JSON nested deeper than {MAX_DEPTH} levels")
    assert errors[str(folder / "c_latin1.json")].endswith("not UTF-8 text (byte 0xe9 at offset 13)")
    assert summary.filter(pl.col("graph") == "good").get_column("validation").to_list() == ["passed"]


def test_bomb_on_the_command_line_is_one_line_and_exit_1(tmp_path, capsys):
    code = cli_main(["run", str(BOMB), "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert err == f"hipdnn-trace run: error: {BOMB}: refused: unpacks to more than {MAX_ARCHIVE_BYTES} bytes"
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("exc, line", [
    (GraphError("g.json", "$.nodes[0]", "bad\n  uid"), "g.json: $.nodes[0]: bad uid"),
    (KeyError("x"), "KeyError: 'x'"),
    (MemoryError(), "MemoryError"),
    (RuntimeError("cuda\nfailed"), "RuntimeError: cuda failed"),
])
def test_error_rows_describe_an_exception_in_one_line(exc, line) -> None:
    """A user error speaks for itself; anything else keeps its type, which is half the message."""
    assert describe(exc) == line

"""Graph sources: files, folders (recursive), globs, tarballs, mixed; unsafe archives
are refused whole with exit 1 and nothing is ever extracted."""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
from pathlib import Path

import pytest
from graph_samples import as_json, conv_bias_relu, matmul_graph

from hipdnn_trace.cli import main
from hipdnn_trace.errors import GraphError, UserError
from hipdnn_trace.graph.load import load_bytes
from hipdnn_trace.graph.sources import expand, expand_counting_skipped

CONV = json.dumps(as_json(conv_bias_relu())).encode()
MATMUL = json.dumps(as_json(matmul_graph())).encode()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """root/a.json, root/sub/b.json, root/sub/deeper/c.json, root/run.json (a result file),
    root/notes.txt."""
    root = tmp_path / "root"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "a.json").write_bytes(CONV)
    (root / "sub" / "b.json").write_bytes(MATMUL)
    (root / "sub" / "deeper" / "c.json").write_bytes(CONV)
    (root / "run.json").write_text("{}")
    (root / "notes.txt").write_text("not a graph")
    return root


def names(sources) -> list[str]:
    return [Path(s.name).name if ":" not in s.name else s.name.rsplit(":", 1)[1] for s in sources]


def make_tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], mode: str = "w") -> Path:
    with tarfile.open(path, mode) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return path


def file_member(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def link_member(name: str, target: str, kind: bytes) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, None


def test_folder_is_searched_recursively_and_skips_result_files(tree: Path) -> None:
    assert names(expand([str(tree)])) == ["a.json", "b.json", "c.json"]


def test_single_file(tree: Path) -> None:
    [src] = expand([str(tree / "sub" / "b.json")])
    assert src.path == tree / "sub" / "b.json"
    assert load_bytes(src.read(), src.name).name == "matmul"


def test_globs_including_recursive(tree: Path) -> None:
    assert names(expand([str(tree / "*.json")])) == ["a.json", "run.json"]
    assert sorted(names(expand([str(tree / "**" / "c.json")]))) == ["c.json"]
    assert names(expand([str(tree / "sub" / "*")])) == ["b.json", "c.json"]


def test_mixed_arguments_keep_order_and_drop_duplicates(tree: Path, tmp_path: Path) -> None:
    tar = make_tar(tmp_path / "extra.tar.gz", [file_member("x/m.json", MATMUL)], "w:gz")
    got = expand([str(tree / "sub" / "b.json"), str(tar), str(tree), str(tree / "a.json")])
    assert names(got) == ["b.json", "x/m.json", "a.json", "c.json"]


def test_missing_path_and_empty_glob_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such file"):
        expand([str(tmp_path / "nope.json")])
    with pytest.raises(UserError, match="glob matches no files"):
        expand([str(tmp_path / "*.nothing")])


@pytest.mark.parametrize("suffix,mode", [(".tar", "w"), (".tar.gz", "w:gz"), (".tgz", "w:gz"),
                                         (".tar.xz", "w:xz")])
def test_tarballs_are_read_in_memory(tmp_path: Path, suffix: str, mode: str) -> None:
    folder_info = tarfile.TarInfo("graphs")
    folder_info.type = tarfile.DIRTYPE
    tar = make_tar(tmp_path / f"suite{suffix}", [
        (folder_info, None),
        file_member("graphs/conv.json", CONV),
        file_member("graphs/mm.json", MATMUL),
        file_member("graphs/readme.txt", b"hello"),
        link_member("graphs/alias.json", "conv.json", tarfile.SYMTYPE),   # stays inside: fine
    ], mode)
    before = set(tmp_path.rglob("*"))
    sources = expand([str(tar)])
    assert names(sources) == ["graphs/conv.json", "graphs/mm.json"]
    assert [load_bytes(s.read(), s.name).name for s in sources] == ["conv_bias_relu", "matmul"]
    assert all(s.path is None and s.name.startswith(str(tar)) for s in sources)
    assert set(tmp_path.rglob("*")) == before   # nothing extracted


def test_tarball_inside_a_folder_is_expanded(tree: Path) -> None:
    make_tar(tree / "sub" / "more.tgz", [file_member("m.json", MATMUL)], "w:gz")
    assert names(expand([str(tree)]))[-1] == "m.json"


def test_skipped_folders_are_counted_not_expanded(tree: Path) -> None:
    (tree / "perf").mkdir()
    (tree / "perf" / "big.json").write_bytes(MATMUL)
    make_tar(tree / "perf" / "more.tgz", [file_member("m1.json", MATMUL), file_member("m2.json", CONV)], "w:gz")
    sources, skipped = expand_counting_skipped([str(tree)], skip_dirs=("perf",))
    assert names(sources) == ["a.json", "b.json", "c.json"] and skipped == 3
    assert names(sources) == names(expand([str(tree)], skip_dirs=("perf",)))
    # named directly, a skipped folder is included, also when recursion met it first
    sources, skipped = expand_counting_skipped([str(tree), str(tree / "perf")], skip_dirs=("perf",))
    assert names(sources) == ["a.json", "b.json", "c.json", "big.json", "m1.json", "m2.json"]
    assert skipped == 0
    assert expand_counting_skipped([str(tree)])[1] == 0


UNSAFE = {
    "absolute_path": (file_member("/tmp/hipdnn_trace_escape.json", CONV), "absolute path"),
    "dot_dot": (file_member("graphs/../../hipdnn_trace_escape.json", CONV), "climbs out"),
    "symlink_out": (link_member("graphs/evil.json", "../../etc/passwd", tarfile.SYMTYPE), "links out"),
    "absolute_symlink": (link_member("graphs/evil.json", "/etc/passwd", tarfile.SYMTYPE), "links out"),
    "hardlink_out": (link_member("graphs/evil.json", "../outside.json", tarfile.LNKTYPE), "links out"),
    "device_file": (link_member("graphs/tty", "", tarfile.CHRTYPE), "special file"),
}


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_unsafe_archive_is_refused_whole_before_extracting(case: str, tmp_path: Path, capsys,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    member, why = UNSAFE[case]
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    # a good member first: refusing "as a whole" means it is not reported either
    tar = make_tar(work / "suite.tar", [file_member("graphs/good.json", CONV), member])
    before = sorted(tmp_path.rglob("*"))
    rc = main(["inspect", str(tar)])
    out, err = capsys.readouterr()
    assert rc == 1
    assert out == ""
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert str(tar) in err and "refused" in err and why in err
    assert sorted(tmp_path.rglob("*")) == before
    assert not Path("/tmp/hipdnn_trace_escape.json").exists()


def test_unsafe_archive_among_good_arguments_stops_the_command(tree: Path, tmp_path: Path, capsys) -> None:
    tar = make_tar(tmp_path / "bad.tar", [file_member("../x.json", CONV)])
    assert main(["inspect", "--quiet", str(tree), str(tar)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "climbs out" in err


def test_corrupt_tarball_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "broken.tar.gz"
    bad.write_bytes(b"\x1f\x8b not really gzip")
    assert main(["inspect", str(bad)]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "not a readable tar archive" in err


def test_a_file_gone_before_it_is_read_is_a_graph_error(tmp_path: Path) -> None:
    p = tmp_path / "gone.json"
    p.write_bytes(CONV)
    (source,) = expand([str(p)])
    p.unlink()
    with pytest.raises(GraphError, match="^" + re.escape(f"{p}: cannot read: ")):
        source.read()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_is_a_user_error(tmp_path: Path) -> None:
    p = tmp_path / "locked.json"
    p.write_bytes(CONV)
    p.chmod(0)
    with pytest.raises(UserError, match="not readable"):
        expand([str(p)])

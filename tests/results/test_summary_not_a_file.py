"""A summary.csv that is there but is not a regular file (issue 33 item 7): linked to /dev/zero it
was reported as "missing"; the read gate (read_gate.py) now says what it is. And a dnn-benchmarking
results file of another schema version is named as such, not as "not part of a run directory"."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from one_line import one_line_error
from repo_paths import GRAPHS, TEST_DATA

from hipdnn_trace.cli import main

GRAPH = GRAPHS / "matmul" / "matmul_2d_fp32.json"
DNB = TEST_DATA / "dnnbench" / "newest-layout.json"


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    assert main(["run", str(GRAPH), "--out", str(runs), "--run-id", "A", "-i", "3", "-w", "0", "-q"]) == 0
    return runs / "A"


def _copy(finished: Path, tmp_path: Path) -> Path:
    import shutil
    out = tmp_path / "A"
    shutil.copytree(finished, out)
    return out


@pytest.mark.parametrize(("target", "words"), [
    ("/dev/zero", ("not a regular file but a character device",)),
    ("dir", ("not a regular file but a folder",)),
    ("gone.csv", ("cannot read",)),
])
def test_a_summary_that_is_not_a_regular_file_says_what_it_is(finished: Path, tmp_path: Path, capsys,
                                                             target: str, words: tuple[str, ...]) -> None:
    run = _copy(finished, tmp_path)
    summary = run / "summary.csv"
    summary.unlink()
    if target == "dir":
        summary.mkdir()
    else:
        os.symlink(target, summary)
    assert main(["report", str(run), "--out", str(tmp_path / "r")]) == 1
    err = one_line_error(capsys, "summary.csv", *words)
    assert "missing" not in err


def test_a_removed_summary_is_still_missing(finished: Path, tmp_path: Path, capsys) -> None:
    run = _copy(finished, tmp_path)
    (run / "summary.csv").unlink()
    assert main(["report", str(run), "--out", str(tmp_path / "r")]) == 1
    one_line_error(capsys, "summary.csv", "missing")


@pytest.mark.parametrize("version", [1, 3, "2", None, True])
def test_a_dnnbench_file_of_another_schema_version_says_so(tmp_path: Path, capsys, version) -> None:
    data = json.loads(DNB.read_text())
    data["schema_version"] = version
    other = tmp_path / "results.dnnbench.json"
    other.write_text(json.dumps(data))
    assert main(["compare", str(DNB), str(other)]) == 1
    one_line_error(capsys, str(other), f"schema version {version!r}", "this tool reads schema version 2")

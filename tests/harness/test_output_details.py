"""Details of what run, inspect and the files show: a graph with a blank JSON name shows its file's
stem, a failing comparison's line is printed once, the worst-elements list says what it is ordered by
and shows that column, and an output with no finite element says so instead of "max abs 0"."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import graph_dicts as hg
from hipdnn_trace.cli import main
from hipdnn_trace.results.rundir import load_run
from hipdnn_trace.trace.reader import read_trace


def _unnamed(folder: Path, stem: str = "upstream_conv") -> Path:
    """A graph file whose JSON ``name`` is empty, as some upstream graphs are."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.json"
    path.write_text(json.dumps({**hg.add_relu(), "name": ""}))
    return path


def test_a_blank_graph_name_shows_the_file_stem_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = _unnamed(tmp_path / "g")
    hg.write(tmp_path / "g", [hg.matmul(name="named")])
    assert main(["run", str(tmp_path / "g"), "-w", "0", "-i", "2", "--out", str(tmp_path), "--run-id", "r",
                 "--rtol", "0", "--atol", "0", "--save-tensors", str(tmp_path / "bundles")]) in (0, 2)
    out = capsys.readouterr().out
    assert "] " in out and any(ln.split()[2:3] == ["upstream_conv"] for ln in out.splitlines() if ln.startswith("["))
    run = load_run(tmp_path / "r")
    assert sorted(run.summary["graph"]) == ["named", "upstream_conv"]
    assert set(run.iterations["graph"]) == {"named", "upstream_conv"}
    assert sorted(run.meta["graphs"]) == sorted(str(p) for p in (graph, tmp_path / "g" / "named.json"))
    slices = read_trace(tmp_path / "r" / "trace.pftrace").slices
    assert slices.filter(pl.col("name") == "graph upstream_conv").height == 1
    assert not slices.filter(pl.col("name").str.strip_chars() == "graph").height
    assert (tmp_path / "bundles" / "upstream_conv.json").is_file()   # golden bundle named by the stem too
    assert json.loads((tmp_path / "bundles" / "upstream_conv.json").read_text())["name"] == ""   # file as is
    assert main(["inspect", "--json", str(graph)]) == 0
    assert json.loads(capsys.readouterr().out)[0]["name"] == "upstream_conv"
    assert main(["inspect", "--quiet", str(graph)]) == 0
    assert capsys.readouterr().out.startswith("upstream_conv  ")

"""Details of what run, inspect and the files show: a graph with a blank JSON name shows its file's
stem, a failing comparison's line is printed once, the worst-elements list says what it is ordered by
and shows that column, and an output with no finite element says so instead of "max abs 0"."""

from __future__ import annotations

import json
import math
from pathlib import Path

import graph_dicts as hg
import numpy as np
import polars as pl
import pytest

from hipdnn_trace import backends
from hipdnn_trace.backends.reference import ReferenceBackend, ReferenceSession
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


class AllNaNSession(ReferenceSession):
    """The reference, except every output element is NaN (a kernel that produced nothing usable)."""

    def fetch(self, uids):  # type: ignore[override]
        return {uid: np.full_like(arr, np.nan) for uid, arr in super().fetch(uids).items()}


class AllNaNBackend(ReferenceBackend):
    name = "allnan"

    def prepare(self, graph, engine, options):  # type: ignore[override]
        return AllNaNSession(graph)


@pytest.fixture
def all_nan(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(backends.REGISTRY, "allnan", "tests:AllNaNBackend")
    monkeypatch.setitem(backends._instances, "allnan", AllNaNBackend())
    return "allnan"


def test_an_all_nan_output_says_so_instead_of_max_abs_0(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       all_nan: str) -> None:
    path = hg.write(tmp_path / "g", [hg.add_relu()])[0]
    assert main(["run", str(path), "--backend", all_nan, "-w", "0", "-i", "2", "--out", str(tmp_path),
                 "--run-id", "r"]) == 2
    out = capsys.readouterr().out
    row = load_run(tmp_path / "r").validation.row(0, named=True)
    total = row["total"]
    assert row["message"].startswith(f"all {total} elements NaN/Inf (no element with finite values to measure "
                                     "an error on; worst at [")
    assert row["max_abs"] is None or math.isnan(row["max_abs"])   # no maximum over nothing
    assert "max abs 0" not in out and "max rel 0" not in out and f"all {total} elements NaN/Inf" in out


def test_a_failed_check_is_printed_once_and_the_worst_list_shows_its_order(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One graph (a block): the FAIL line is not repeated without its prefix; the worst elements are
    listed by error / allowed error, and that column, the abs and the rel error are all shown."""
    graph = Path(__file__).resolve().parents[2] / "graphs" / "pointwise" / "gelu_fp16.json"
    assert main(["run", str(graph), "-w", "0", "-i", "2", "--out", str(tmp_path), "--run-id", "r",
                 "--rtol", "1e-4", "--atol", "1e-4"]) == 2
    out = capsys.readouterr().out.splitlines()
    run = load_run(tmp_path / "r")
    message = run.validation["message"][0]
    block = out[:next(i for i, ln in enumerate(out) if "MISMATCH" in ln)]
    assert [ln.strip() for ln in block if message in ln] == [f"y vs reference: FAIL {message}"]
    start = next(i for i, ln in enumerate(out) if "MISMATCH" in ln)
    assert out[start].endswith("the 10 worst of "
                               f"{run.validation['mismatches'][0]} failing element(s), by error / allowed error "
                               "(allowed: atol 0.0001 + rtol 0.0001 * |expected|), largest first")
    assert out[start + 1].split() == ["index", "actual", "reference", "abs", "err", "rel", "err", "err/allowed"]
    rows = [ln.rsplit(maxsplit=3) for ln in out[start + 2:start + 12]]
    ratios = [float(r[-1]) for r in rows]
    assert ratios == sorted(ratios, reverse=True) and ratios[0] > 1   # the order is the column's
    worst = run.mismatches.sort("rank")
    assert [float(r[-2]) for r in rows] == pytest.approx(worst["rel_err"].to_list(), rel=1e-2)
    assert [float(r[-3]) for r in rows] == pytest.approx(worst["abs_err"].to_list(), rel=1e-2)
    bound = 1e-4 + 1e-4 * worst["expected"].abs()
    assert ratios == pytest.approx((worst["abs_err"] / bound).to_list(), rel=1e-2)

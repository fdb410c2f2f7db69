"""A/B in one run: reference vs reference passes; a backend that perturbs one element fails
with a report naming that element, and the run exits 2."""

from __future__ import annotations

import re
from pathlib import Path

import graph_dicts as hg
import numpy as np
import polars as pl
import pytest

from hipdnn_trace import backends
from hipdnn_trace.backends.reference import ReferenceBackend, ReferenceSession
from hipdnn_trace.cli import main
from hipdnn_trace.results.rundir import load_run

BAD_INDEX = (0, 1, 2, 3)


class PerturbingSession(ReferenceSession):
    """The reference, except one output element is off by 1.0 (a test backend)."""

    def fetch(self, uids):  # type: ignore[override]
        out = super().fetch(uids)
        for uid, arr in out.items():
            arr = arr.copy()
            arr[BAD_INDEX[: arr.ndim]] += 1.0
            out[uid] = arr
        return out


class PerturbingBackend(ReferenceBackend):
    name = "perturbed"

    def prepare(self, graph, engine, options):  # type: ignore[override]
        super().prepare(graph, engine, options)
        return PerturbingSession(graph)


class NaNSession(ReferenceSession):
    def fetch(self, uids):  # type: ignore[override]
        out = super().fetch(uids)
        for uid, arr in out.items():
            arr = arr.copy()
            arr.reshape(-1)[0] = np.nan
            out[uid] = arr
        return out


class NaNBackend(ReferenceBackend):
    name = "nan"

    def prepare(self, graph, engine, options):  # type: ignore[override]
        return NaNSession(graph)


@pytest.fixture
def test_backends(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, cls in (("perturbed", PerturbingBackend), ("nan", NaNBackend)):
        monkeypatch.setitem(backends.REGISTRY, name, f"tests:{cls.__name__}")
        monkeypatch.setitem(backends._instances, name, cls())


def _graph(tmp_path: Path) -> Path:
    return hg.write(tmp_path / "g", [hg.add_relu()])[0]


def test_ab_reference_against_itself_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", str(_graph(tmp_path)), "--a", "reference", "--b", "reference", "-w", "1", "-i", "10",
                 "--ab-sequential",   # the interleaved line and frame: test_interleaved_ab.py
                 "--out", str(tmp_path / "runs"), "--run-id", "ab"])
    out = capsys.readouterr().out
    assert code == 0
    run = load_run(tmp_path / "runs" / "ab")
    assert run.summary["config"].to_list() == ["reference#A", "reference#B"]
    ab_rows = run.validation.filter(pl.col("against").str.starts_with("A:"))
    assert ab_rows.height == 1 and ab_rows["passed"].all() and ab_rows["max_abs"][0] == 0.0
    # the one ratio of compare and report: B's median time over A's, >1 = B slower, named as such
    line = next(ln for ln in out.splitlines() if "A/B add_relu:" in ln)
    m = re.search(r"B/A time \(>1: B slower\) ([0-9.]+) \[95% CI ([0-9.]+), ([0-9.]+)\], B [0-9.]+% (slower|faster); "
                  r"A = reference#A, B = reference#B$", line)
    assert m, line
    timed = run.iterations.filter(pl.col("phase") == "timed").group_by("config").agg(pl.col("kernel_ms").median())
    medians = dict(timed.iter_rows())
    ratio = medians["reference#B"] / medians["reference#A"]
    assert float(m.group(1)) == pytest.approx(ratio, abs=1e-3)
    assert float(m.group(2)) <= float(m.group(1)) <= float(m.group(3))
    assert m.group(4) == ("slower" if ratio > 1 else "faster")


def test_ab_with_a_perturbed_element_fails_and_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], test_backends: None
) -> None:
    code = main(["run", str(_graph(tmp_path)), "--a", "reference", "--b", "perturbed", "-w", "1", "-i", "5",
                 "--out", str(tmp_path / "runs"), "--run-id", "bad"])
    out = capsys.readouterr().out
    assert code == 2
    assert "MISMATCH" in out and str(list(BAD_INDEX)) in out
    run = load_run(tmp_path / "runs" / "bad")
    failing = run.validation.filter(~pl.col("passed"))
    # B is wrong against the reference and against A; A itself is right against the reference
    assert set(failing["against"]) == {"reference", "A:reference"}
    assert (failing["mismatches"] == 1).all()
    assert (failing["worst_index"] == str(list(BAD_INDEX))).all()
    worst = run.mismatches.filter(pl.col("rank") == 0)
    assert set(worst["index"]) == {str(list(BAD_INDEX))}
    row = worst.filter(pl.col("against") == "A:reference").row(0, named=True)
    assert row["actual"] - row["expected"] == pytest.approx(1.0, abs=1e-6)
    assert row["reference"] == pytest.approx(row["expected"], abs=1e-6)
    assert set(run.summary["status"]) == {"failed"}


def test_nan_in_an_output_always_fails_with_its_own_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], test_backends: None
) -> None:
    code = main(["run", str(_graph(tmp_path)), "--backend", "nan", "-w", "0", "-i", "2",
                 "--out", str(tmp_path / "runs"), "--run-id", "nan",
                 "--atol", "1e6", "--rtol", "1"])   # the loosest allowed
    assert code == 2
    run = load_run(tmp_path / "runs" / "nan")
    row = run.validation.row(0, named=True)
    assert not row["passed"] and row["nonfinite"] == 1 and "NaN/Inf" in row["message"]


def test_tolerance_overrides_reach_the_comparison(tmp_path: Path, test_backends: None) -> None:
    code = main(["run", str(_graph(tmp_path)), "--backend", "perturbed", "-w", "0", "-i", "2", "--atol", "2",
                 "--out", str(tmp_path / "runs"), "--run-id", "loose", "--quiet"])
    assert code == 0
    run = load_run(tmp_path / "runs" / "loose")
    assert run.validation["atol"][0] == 2.0 and run.validation["passed"].all()

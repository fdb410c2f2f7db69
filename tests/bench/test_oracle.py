"""run --oracle: each graph's out-of-the-box plan against a tuned one, both validated.

No GPU here: the cuDNN path (autotune over the listed candidates) runs on the ``twospeed``
stand-in and the torch/hipDNN path (a process-wide switch, the tuned twin in its own child) on
the ``tunedproc`` stand-in (``oracle_backends.py``: the float64 reference underneath, a fixed
time per execution instead of a device's). Real cuDNN and torch runs are the ``cuda`` tests at the
end, which skip without a GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import graph_dicts as hg
import polars as pl
import pytest
from oracle_backends import FAST_MS, OOTB_MS, SLOW_MS, TUNED_MS, TUNED_PROCESS_SPEC, TWO_SPEED_SPEC

from hipdnn_trace import backends
from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.oracle import oracle_configs
from hipdnn_trace.cli import main
from hipdnn_trace.errors import UserError
from hipdnn_trace.results.oracle import geomean_regret
from hipdnn_trace.results.rundir import load_run

HERE = Path(__file__).resolve().parents[1] / "support"   # oracle_backends.py


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setitem(backends.REGISTRY, "twospeed", TWO_SPEED_SPEC)
    monkeypatch.setitem(backends.REGISTRY, "tunedproc", TUNED_PROCESS_SPEC)


def _run(tmp_path: Path, graphs: list[dict], backend: str, *extra: str) -> tuple[int, Path]:
    paths = hg.write(tmp_path / "g", graphs)
    code = main(["run", *map(str, paths), "--backend", backend, "--oracle", "-w", "1", "-i", "5",
                 "--out", str(tmp_path / "runs"), "--run-id", "o", *extra])
    return code, tmp_path / "runs" / "o"


def test_autotune_stand_in_times_both_plans_validates_both_and_reports_the_regret(
        tmp_path: Path, stand_ins: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, folder = _run(tmp_path, [hg.add_relu(), hg.matmul()], "twospeed", "--format", "parquet,dnnbench")
    out = capsys.readouterr().out
    assert code == 0, out
    run = load_run(folder)
    assert run.summary["config"].to_list() == ["twospeed#ootb", "twospeed#tuned"] * 2
    engines = dict(zip(run.summary["config"], run.summary["engine"], strict=False))
    assert engines == {"twospeed#ootb": "slow", "twospeed#tuned": "fast (autotuned)"}
    # both plans checked against the float64 reference, and not against each other (not an A/B)
    checked = run.validation.filter(pl.col("against") == "reference")
    assert sorted(set(checked["config"])) == ["twospeed#ootb", "twospeed#tuned"] and checked["passed"].all()
    assert not run.validation.filter(pl.col("against").str.starts_with("A:")).height
    oracle = pl.read_csv(folder / "oracle.csv")
    assert oracle["graph"].to_list() == ["add_relu", "mm_small"]
    assert oracle["regret"].to_list() == [SLOW_MS / FAST_MS] * 2
    assert oracle["tuned_validation"].to_list() == ["passed"] * 2
    assert oracle["flag"].fill_null("").to_list() == ["", ""]
    assert oracle["tuning"][0] == "autotune: 2 of 2 candidate plan(s) built and timed"
    assert geomean_regret(run.oracle) == (pytest.approx(SLOW_MS / FAST_MS), 2)
    assert "oracle: geomean regret 4.000x over 2 graph(s)" in out
    assert json.loads((folder / "run.json").read_text())["oracle"]["pairs"] == [
        {"ootb": "twospeed#ootb", "tuned": "twospeed#tuned"}]
    doc = json.loads((folder / "results.dnnbench.json").read_text())
    assert doc["run"]["config"]["oracle"] is True
    rows = [r for g in doc["graphs"] for r in g["results"]]
    assert len(rows) == 2   # the tuned twin is its ootb row's oracle object, not a row of its own
    for r in rows:
        assert r["ootb"]["kernel"]["median_ms"] == SLOW_MS and r["oracle"]["kernel"]["median_ms"] == FAST_MS
        assert r["oracle"]["tuning_available"] is True and r["oracle"]["correctness"]["match"] is True
        assert r["oracle_error"] is None


def test_a_tuned_plan_that_fails_validation_is_flagged_faster_but_wrong(
        tmp_path: Path, stand_ins: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, folder = _run(tmp_path, [hg.add_relu("wrong__relu"), hg.matmul()], "twospeed")
    out = capsys.readouterr().out
    assert code == 2   # a wrong tuned plan is a failed row
    assert main(["report", str(folder)]) == 0
    report = (folder / "report.md").read_text()
    assert "Oracle: out-of-the-box vs tuned plan" in report and "geomean regret 4.000x over 1 graph(s)" in report
    assert "faster-but-wrong" in report
    row = pl.read_csv(folder / "oracle.csv").row(0, named=True)
    assert (row["graph"], row["ootb_validation"], row["tuned_validation"]) == ("wrong__relu", "passed", "failed")
    assert row["flag"] == "faster-but-wrong" and row["regret"] is None
    assert row["tuned_ms"] < row["ootb_ms"]
    assert "oracle: geomean regret 4.000x over 1 graph(s)" in out
    assert "oracle: 1 graph(s) faster-but-wrong: wrong__relu" in out


def test_a_process_wide_tuning_runs_in_its_own_child_and_never_reaches_the_ootb_plan(
        tmp_path: Path, stand_ins: None, capsys: pytest.CaptureFixture[str]) -> None:
    code, folder = _run(tmp_path, [hg.add_relu(), hg.matmul()], "tunedproc")
    assert code == 0, capsys.readouterr().out
    run = load_run(folder)
    meta = run.meta
    assert meta["isolation"]["split"] == [["tunedproc#ootb"], ["tunedproc#tuned"]]
    oracle = run.oracle
    assert oracle["regret"].to_list() == [OOTB_MS / TUNED_MS] * 2
    assert oracle["tuning"].to_list() == ["stand-in process-wide switch on"] * 2
    assert oracle["tuning_available"].to_list() == [True, True]
    ootb = meta["sessions"]["tunedproc#ootb"]["method"]
    tuned = meta["sessions"]["tunedproc#tuned"]["method"]
    assert ootb["switch_on_at_prepare"] is False and ootb["pid"] != tuned["pid"]


def test_oracle_refuses_in_one_line_where_there_is_nothing_to_pair(
        tmp_path: Path, stand_ins: None, capsys: pytest.CaptureFixture[str]) -> None:
    path = hg.write(tmp_path / "g", [hg.add_relu()])[0]
    assert main(["run", str(path), "--oracle", "--out", str(tmp_path / "runs")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("hipdnn-trace run: error: --oracle: backend reference has no tuned plan") and "\n" not in err
    assert not (tmp_path / "runs").exists()   # refused before a run directory exists
    with pytest.raises(UserError, match="excludes --a/--b"):
        oracle_configs([Config("a", "twospeed"), Config("b", "twospeed")])
    with pytest.raises(UserError, match="drop --engine fast"):
        oracle_configs([Config("twospeed:fast", "twospeed", engine="fast")])
    with pytest.raises(UserError, match="drop --autotune"):
        oracle_configs([Config("twospeed", "twospeed", autotune=True)])
    # a backend that tunes itself may tune a chosen engine
    assert [c.tuned for c in oracle_configs([Config("tunedproc:x", "tunedproc", engine="x")])] == [False, True]


# --- real libraries (skip here: no GPU) --------------------------------------------------------


def _gpu_backend(name: str) -> None:
    support = backends.get(name).available()
    if not support:
        pytest.skip(f"{name}: {support.reason}")


@pytest.mark.cuda
@pytest.mark.parametrize("backend", ["cudnn", "torch"])
def test_real_backend_oracle_pairs_and_validates_both_plans(tmp_path: Path, backend: str) -> None:
    _gpu_backend(backend)
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    code, folder = _run(tmp_path, [hg.conv(), hg.matmul()], backend)
    assert code in (0, 2)
    oracle = load_run(folder).oracle
    assert oracle.height == 2
    assert set(oracle["tuned_config"]) == {f"{backend}#tuned"}
    assert oracle["tuned_validation"].is_in(["passed", "failed"]).all()
    assert (oracle["regret"].drop_nulls() > 0).all()


def test_each_process_group_keeps_its_resident_child_from_graph_to_graph(
        tmp_path: Path, stand_ins: None, capsys: pytest.CaptureFixture[str]) -> None:
    """The ootb plan and its tuned twin each keep one resident child, set up before the first graph:
    no graph pays a process start (one runner alternating between the groups started two per graph)."""
    code, folder = _run(tmp_path, [hg.add_relu("a"), hg.matmul(), hg.add_relu("c")], "tunedproc")
    assert code == 0, capsys.readouterr().out
    run = load_run(folder)
    assert run.breakdown.height == 6
    assert run.breakdown.get_column("t_process_ms").to_list() == [0.0] * 6
    assert run.meta["isolation"]["warm_up_s"] is not None


def test_split_children_send_outputs_back_only_for_an_ab() -> None:
    """An A/B across processes validates B against A in the parent, so its children send outputs back;
    the oracle's twins each validate in their own child, whose outputs (and device data) stay there."""
    from hipdnn_trace.bench.graph_run import RunSettings
    from hipdnn_trace.bench.split import _part_settings

    assert _part_settings(RunSettings(ab=True)).keep_outputs is True
    assert _part_settings(RunSettings(ab=False)).keep_outputs is False
    assert _part_settings(RunSettings(ab=True)).ab is False

"""NaN/Inf in an output, or an output buffer left unwritten (still poisoned), always
fails validation, each with its own message, end to end through the suite and the
files it writes. The spoiled outputs come from the faulty test backend (a stand-in
for a kernel that skips or corrupts its output)."""

from __future__ import annotations

import polars as pl
import pytest
from reliability_helpers import write_graphs

from hipdnn_trace.bench.config import Config
from hipdnn_trace.bench.graph_run import RunSettings
from hipdnn_trace.bench.loop import LoopSettings
from hipdnn_trace.bench.records import FAILED, OK
from hipdnn_trace.bench.suite import run_in_process
from hipdnn_trace.cli import main as cli_main
from hipdnn_trace.graph.sources import expand
from hipdnn_trace.markers import Markers
from hipdnn_trace.results.rundir import load_run

CONFIGS = [Config("faulty", "faulty")]
SETTINGS = RunSettings(loop=LoopSettings(warmup=0, iters=1))
NUMEL = 2 * 3 * 4 * 5


def _run(tmp_path, name: str, dtype: str = "float"):
    (path,) = write_graphs(tmp_path, [name], dtype=dtype)
    (source,) = expand([str(path)])
    g = run_in_process(source, CONFIGS, SETTINGS, Markers())
    (v,) = g.validation
    return g.configs[0], v


@pytest.mark.parametrize("dtype", ["float", "half", "bfloat16", "double"])
def test_unwritten_output_fails_as_never_written(faulty, tmp_path, dtype):
    c, v = _run(tmp_path, "unwritten__x", dtype)
    assert (c.status, c.validation, v.passed) == (FAILED, "failed", False)
    assert v.message == f"all {NUMEL} elements never written (still poisoned) (no element with finite values " \
                        "to measure an error on; worst at [0, 0, 0, 0])"   # not "max abs 0"
    assert "NaN/Inf" not in v.message and "outside" not in v.message
    assert c.error == f"z vs reference: {v.message}"


def test_partly_written_output_counts_the_unwritten_half(faulty, tmp_path):
    _, v = _run(tmp_path, "partial__x")
    assert v.message.startswith(f"{NUMEL // 2} element(s) never written (still poisoned)")
    assert v.nonfinite == NUMEL // 2 and v.mismatches == 0


@pytest.mark.parametrize("mode, where", [("nan", "[0, 0, 0, 0]"), ("inf", "[1, 2, 3, 4]")])
def test_nan_or_inf_output_fails_with_its_own_message(faulty, tmp_path, mode, where):
    c, v = _run(tmp_path, f"{mode}__x")
    assert (c.status, v.passed) == (FAILED, False)
    assert v.message.startswith("1 NaN/Inf element(s)")
    assert "never written" not in v.message
    assert v.worst_index == where and v.mismatches == 0


def test_clean_output_passes(faulty, tmp_path):
    c, v = _run(tmp_path, "ok__x")
    assert (c.status, v.passed) == (OK, True)


def test_cli_writes_the_messages_and_exits_2(faulty, tmp_path):
    folder = tmp_path / "g"
    write_graphs(folder, ["nan__a", "unwritten__b", "ok__c"])
    code = cli_main(["run", str(folder), "--backend", "faulty", "--no-isolate", "-w", "0", "-i", "1",
                     "--out", str(tmp_path / "runs"), "--run-id", "r", "-q"])
    assert code == 2
    run = load_run(tmp_path / "runs" / "r")
    messages = dict(run.validation.select("graph", "message").iter_rows())
    totals = dict(run.validation.select("graph", "total").iter_rows())
    assert messages["nan__a"].startswith("1 NaN/Inf element(s)")
    assert messages["unwritten__b"].startswith(f"all {totals['unwritten__b']} elements never written")
    assert run.summary.filter(pl.col("graph") == "ok__c").get_column("validation").to_list() == ["passed"]
    worst = run.mismatches.filter(pl.col("graph") == "nan__a")
    assert worst.height == 1 and worst.get_column("index").to_list() == ["[0, 0, 0, 0]"]

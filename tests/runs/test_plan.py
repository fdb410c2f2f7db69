"""``runs.plan.plan_run``: the one place a run's options become decisions and refusals.

The command line and the Python API build the same ``RunRequest`` and so the same plan; every refusal
is a UserError raised before a run folder exists; GPU pins are typed and leave the request as it was;
the API raises the plan's exceptions instead of reading the CLI's stderr."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

import pytest

import hipdnn_trace
import hipdnn_trace.cli
from hipdnn_trace.bench.config import Config
from hipdnn_trace.errors import UserError
from hipdnn_trace.runs import plan as planning, record
from hipdnn_trace.runs.request import OPTIONS, RunRequest, request_from_args

ROOT = Path(__file__).resolve().parents[2]
GRAPH = str(ROOT / "graphs" / "pointwise" / "gelu_fp32.json")


def _cli_request(argv: list[str]) -> RunRequest:
    """The request ``hipdnn-trace run ARGV`` builds (parsed as cli.main parses it)."""
    from hipdnn_trace.cli import build_parser

    args = build_parser(load=["run"]).parse_args(["run", *argv])
    args.argv = argv
    return request_from_args(args)


def test_the_flags_defaults_are_the_requests_defaults() -> None:
    """One place for a default: the parser takes RunRequest's, and a bare command line gives RunRequest()."""
    assert _cli_request([GRAPH]) == RunRequest(graphs=(GRAPH,), argv=(GRAPH,))
    assert set(OPTIONS) - {"graphs"} <= set(vars(_parsed([GRAPH])))


def _parsed(argv: list[str]) -> argparse.Namespace:
    from hipdnn_trace.cli import build_parser

    return build_parser(load=["run"]).parse_args(["run", *argv])


def test_api_and_cli_build_the_same_request_and_plan(tmp_path: Path) -> None:
    from hipdnn_trace.api import _request

    options = {"iters": 3, "warmup": 0, "trace": False, "seed": 5, "format": ["csv", "parquet"],
               "isolate": False, "max_rel_ci": 0.05, "reference_device": "cpu", "gpus": None, "cache": "cold"}
    from_api = _request([GRAPH], tmp_path, "same", False, options)
    argv = [GRAPH, "--out", str(tmp_path), "--run-id", "same", "--iters", "3", "--warmup", "0", "--no-trace",
            "--seed", "5", "--format", "csv,parquet", "--no-isolate", "--max-rel-ci", "0.05",
            "--reference-device", "cpu",
            "--cache", "cold"]
    from_cli = _cli_request(argv)
    assert {f.name: getattr(from_api, f.name) for f in fields(RunRequest) if f.name != "argv"} == \
        {f.name: getattr(from_cli, f.name) for f in fields(RunRequest) if f.name != "argv"}
    a, b = planning.plan_run(from_api), planning.plan_run(from_cli)
    assert isinstance(a, planning.RunPlan) and isinstance(b, planning.RunPlan)
    for name in ("configs", "folder", "run_id", "timeout", "reference_device", "vendor", "split", "shard"):
        assert getattr(a, name) == getattr(b, name), name
    assert [s.name for s in a.sources] == [s.name for s in b.sources] == [GRAPH]
    assert a.settings.loop == b.settings.loop and a.settings.options == b.settings.options
    drop = ("created", "argv", "run_id")
    meta_a, meta_b = a.record.to_json(), b.record.to_json()
    assert {k: v for k, v in meta_a.items() if k not in drop} == {k: v for k, v in meta_b.items() if k not in drop}
    assert not (tmp_path / "same").exists()   # planning made no run folder


@pytest.mark.parametrize(("argv", "message"), [
    (["--rtol", "2"], "--rtol 2 would let any result pass validation"),
    (["--profile-set", "basic"], "--profile-set basic chooses hardware counters"),
    (["--gpus", "0,1"], "--gpus 0,1: the reference backend runs on the CPU"),
    (["--graph-timeout", "5", "--no-isolate"], "--graph-timeout needs --isolate"),
    (["--timing", "kernel"], "--timing kernel: the CPU reference has no GPU kernels"),
    (["--golden", "no-such-golden"], "--golden no-such-golden: not a folder"),
    (["--backend", "no-such-backend"], "no-such-backend"),
    (["--oracle"], "--oracle: backend reference has no tuned plan"),
    (["--oracle", "--a", "reference", "--b", "reference"], "--oracle compares one backend's"),
    (["--oracle", "--engine", "list"], "--oracle times one plan and its tuned twin; --engine list"),
])
def test_every_refusal_comes_before_a_run_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 argv: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        request = _cli_request([GRAPH, "--out", str(tmp_path / "runs"), *argv])
    except SystemExit:   # argparse refuses an unknown --backend itself: build the request directly
        request = RunRequest(graphs=(GRAPH,), out=tmp_path / "runs", backend="no-such-backend")
    with pytest.raises(UserError, match=message.replace("-", r"\-").replace(".", r"\.")):
        planning.plan_run(request)
    assert not (tmp_path / "runs").exists()


def test_a_resume_refusal_comes_before_the_folder_is_touched(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--run-id does not apply"):
        planning.plan_run(RunRequest(graphs=(GRAPH,), resume=tmp_path / "old", run_id="x"))
    with pytest.raises(UserError, match="nothing to resume"):
        planning.plan_run(RunRequest(graphs=(GRAPH,), resume=tmp_path / "old"))
    assert list(tmp_path.iterdir()) == []


def test_gpu_pins_are_typed_leave_the_request_alone_and_render_run_json_gpus(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """--gpus no longer sets --isolate on the flags: the plan isolates, run.json's block comes from the pins."""
    for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    request = RunRequest(graphs=(GRAPH,), backend="torch", gpus=(0, 2))
    configs = [Config("torch", "torch")]
    pins = planning.gpu_pins(request, configs, None, profiling=False)
    assert pins is not None and request.isolate is None
    assert [(p.index, p.visible) for p in pins.pins] == [(0, "0"), (2, "2")]
    assert planning.isolation(request, configs, 1, profiling=False, gpus=True) is not None
    block = record.gpus_block(pins).to_json()
    assert block["devices"] == [0, 2] and block["variable"] == "CUDA_VISIBLE_DEVICES"
    assert block["visible"] == {"0": "0", "2": "2"} and set(block["cpus"]) == {"0", "2"} and block["graphs"] == {}
    assert pins.pins[0].env("CUDA_VISIBLE_DEVICES")["CUDA_VISIBLE_DEVICES"] == "0"


def test_the_api_raises_the_plans_exceptions_and_never_runs_the_cli(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def no_cli(*_: object, **__: object) -> int:
        raise AssertionError("hipdnn_trace.run went through cli.main")

    monkeypatch.setattr(hipdnn_trace.cli, "main", no_cli)
    capsys.readouterr()
    with pytest.raises(UserError, match=r"^run\(\): iters=-1: "):
        hipdnn_trace.run(GRAPH, out=tmp_path / "runs", iters=-1)
    with pytest.raises(UserError, match=r"^run\(\): cache='hot': choose from warm, cold$"):
        hipdnn_trace.run(GRAPH, out=tmp_path / "runs", cache="hot")
    with pytest.raises(UserError, match=r"^--gpus all: the reference backend runs on the CPU"):
        hipdnn_trace.run(GRAPH, out=tmp_path / "runs", gpus="all")
    assert capsys.readouterr() == ("", "") and not (tmp_path / "runs").exists()
    run = hipdnn_trace.run(GRAPH, out=tmp_path / "runs", run_id="ok", iters=2, warmup=0, trace=False)
    assert run.meta["exit_code"] == 0 and run.meta["status"] == "complete"
    assert run.meta["argv"][2:] == [GRAPH, "--out", str(tmp_path / "runs"), "--run-id", "ok", "--iters", "2",
                                    "--warmup", "0", "--no-trace", "--quiet"]
    # the reference backend's own result is the oracle: no separate evaluation ran anywhere
    assert run.meta["reference_device"] == {"asked": "auto", "used": "cpu"}


def test_where_the_validating_reference_ran_reaches_run_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Evaluation.placement (per node) reaches run.json as reference_device.graphs, per graph; the
    faulty test backend (tests/support, the CPU reference underneath) stands in for a GPU backend."""
    import sys

    from hipdnn_trace import backends

    monkeypatch.syspath_prepend(str(ROOT / "tests" / "support"))
    monkeypatch.setitem(backends.REGISTRY, "faulty", "faulty_backend:FaultyBackend")
    monkeypatch.setattr(sys, "argv", ["pytest"])
    run = hipdnn_trace.run(GRAPH, out=tmp_path, run_id="placed", backend="faulty", iters=2, warmup=0,
                           trace=False, reference_device="cpu")
    assert run.meta["reference_device"] == {"asked": "cpu", "used": "cpu", "graphs": {"gelu_fp32": ["cpu"]}}


def test_an_oracle_plan_pairs_one_configuration_and_records_the_pairs_typed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--oracle: NAME#ootb and NAME#tuned decided in the plan (not an A/B), the pairs in run.json's
    typed ``oracle`` block. STAND-IN backend (oracle_backends.py: no GPU here)."""
    from hipdnn_trace import backends
    from hipdnn_trace.results.run_record import Oracle, RunRecord

    monkeypatch.syspath_prepend(str(ROOT / "tests" / "support"))
    monkeypatch.setitem(backends.REGISTRY, "twospeed", "oracle_backends:TwoSpeedBackend")
    plan = planning.plan_run(_cli_request([GRAPH, "--backend", "twospeed", "--oracle", "--out", str(tmp_path)]))
    assert isinstance(plan, planning.RunPlan)
    assert [(c.name, c.tuned, c.autotune) for c in plan.configs] == [
        ("twospeed#ootb", False, False), ("twospeed#tuned", True, True)]
    assert plan.settings.ab is False   # both plans are checked against the reference, not each other
    assert isinstance(plan.record.oracle, Oracle)
    meta = plan.record.to_json()
    assert meta["oracle"] == {"pairs": [{"ootb": "twospeed#ootb", "tuned": "twospeed#tuned"}],
                              "tuning": {"twospeed": "autotune"}}
    assert RunRecord.from_json(meta).oracle.pair_names() == [("twospeed#ootb", "twospeed#tuned")]
    plain = planning.plan_run(_cli_request([GRAPH, "--backend", "twospeed", "--out", str(tmp_path)]))
    assert isinstance(plain, planning.RunPlan) and "oracle" not in plain.record.to_json()
    assert list(tmp_path.iterdir()) == []   # planning made no run folder

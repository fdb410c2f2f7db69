"""``hipdnn-trace repro``: a failed row becomes a bundle whose run.sh gives the run's verdict and exit
code again (issue 27's CPU proof), errors are one line, and what run.sh carries comes from run.json."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hipdnn_trace.cli import main
from hipdnn_trace.commands.repro_flags import rerun_flags
from hipdnn_trace.commands.repro_shrink import relaid
from hipdnn_trace.results.environment import recorded_environment
from hipdnn_trace.results.rundir import load_run

ROOT = Path(__file__).resolve().parents[2]
GELU = ROOT / "graphs" / "pointwise" / "gelu_fp16.json"
RELU = ROOT / "graphs" / "pointwise" / "relu_clip_fp32.json"


def _run(tmp_path: Path, run_id: str, *graphs: Path, flags: tuple[str, ...] = ("--rtol", "0", "--atol", "0")) -> int:
    return main(["run", *map(str, graphs), *flags, "-w", "0", "-i", "1", "--no-trace", "-q",
                 "--out", str(tmp_path / "runs"), "--run-id", run_id])


def _shell_env() -> dict[str, str]:
    env = dict(os.environ)
    env["HIPDNN_TRACE"] = f"{sys.executable} -m hipdnn_trace"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def test_a_row_failed_with_zero_tolerances_becomes_a_bundle_whose_run_sh_exits_2(tmp_path: Path) -> None:
    graph = tmp_path / "gelu_fp16.json"
    shutil.copyfile(GELU, graph)
    assert _run(tmp_path, "r", graph, RELU) == 2
    assert main(["repro", str(tmp_path / "runs" / "r"), "--out", str(tmp_path / "b")]) == 0
    bundle = tmp_path / "b" / "gelu_fp16"
    assert (bundle / "gelu_fp16.json").read_bytes() == GELU.read_bytes()   # the bytes the run read
    assert {"run.sh", "README.md", "repro.json"} <= {p.name for p in bundle.iterdir()}
    done = subprocess.run([str(bundle / "run.sh"), "-q", "--no-trace"], env=_shell_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    rerun = load_run(next((bundle / "runs").iterdir())).summary.to_dicts()
    original = [(r["graph_id"], r["status"]) for r in load_run(tmp_path / "runs" / "r").summary.to_dicts()
                if r["graph"] == "gelu_fp16"]
    assert [status for _, status in original] == ["failed"]
    assert [(r["graph_id"], r["status"]) for r in rerun] == original   # the same graph, the same verdict
    record = json.loads((bundle / "repro.json").read_text())
    assert record["exit_code"] == 2 and record["verified"] is True and record["seed"] == 0
    assert "FAILED" in (bundle / "README.md").read_text()


def test_only_failed_rows_get_bundles_and_graph_narrows(tmp_path: Path) -> None:
    _run(tmp_path, "r", GELU, RELU)
    rows = {r["graph"]: r["status"] for r in load_run(tmp_path / "runs" / "r").summary.to_dicts()}
    failed = sorted(g for g, s in rows.items() if s == "failed")
    assert main(["repro", str(tmp_path / "runs" / "r"), "--out", str(tmp_path / "all")]) == 0
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == failed
    assert main(["repro", str(tmp_path / "runs" / "r"), "gelu_fp16.json", "--out", str(tmp_path / "one")]) == 0
    assert [p.name for p in (tmp_path / "one").iterdir()] == ["gelu_fp16"]


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], *words: str) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, err


def test_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "runs" / "r"
    _one_line_error(capsys, ["repro", str(tmp_path / "nope"), "--out", str(tmp_path / "b")], "no such run folder")
    graph = tmp_path / "g.json"
    shutil.copyfile(GELU, graph)
    assert _run(tmp_path, "r", graph) == 2
    capsys.readouterr()
    _one_line_error(capsys, ["repro", str(run), "nothere", "--out", str(tmp_path / "b")], "not a graph of the run")
    assert _run(tmp_path, "ok", GELU, flags=()) == 0
    capsys.readouterr()
    _one_line_error(capsys, ["repro", str(tmp_path / "runs" / "ok"), "--out", str(tmp_path / "b")],
                    "no failed or errored row")
    graph.write_text(RELU.read_text())   # edited since the run
    _one_line_error(capsys, ["repro", str(run), "--out", str(tmp_path / "b")], "no longer the graph the run read")
    graph.unlink()
    _one_line_error(capsys, ["repro", str(run), "--out", str(tmp_path / "c")], "graph file is gone")


def test_an_existing_bundle_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _run(tmp_path, "r", GELU)
    (tmp_path / "b" / "gelu_fp16").mkdir(parents=True)
    _one_line_error(capsys, ["repro", str(tmp_path / "runs" / "r"), "--out", str(tmp_path / "b")], "already exists")


def test_an_out_that_cannot_be_written_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _run(tmp_path, "r", GELU)
    (tmp_path / "afile").write_text("")
    _one_line_error(capsys, ["repro", str(tmp_path / "runs" / "r"), "--out", str(tmp_path / "afile")],
                    "cannot write the bundle")


def test_run_json_records_the_environment_and_run_sh_exports_it(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.setenv("HIPDNN_TEST_SWITCH", "on; rm -rf /")   # quoted, never run
    monkeypatch.setenv("HIPDNN_API_TOKEN", "secret")
    _run(tmp_path, "r", GELU)
    env = load_run(tmp_path / "runs" / "r").meta["environment"]
    assert env["variables"]["CUDA_VISIBLE_DEVICES"] == "3" and "HIPDNN_API_TOKEN" not in env["variables"]
    assert env["cwd"] == str(Path.cwd())
    assert main(["repro", str(tmp_path / "runs" / "r"), "--out", str(tmp_path / "b")]) == 0
    script = (tmp_path / "b" / "gelu_fp16" / "run.sh").read_text()
    assert "export CUDA_VISIBLE_DEVICES=3\n" in script
    assert "export HIPDNN_TEST_SWITCH='on; rm -rf /'\n" in script and "secret" not in script


def test_recorded_environment_keeps_only_what_matters() -> None:
    env = {"PATH": "/bin", "HOME": "/root", "ROCR_VISIBLE_DEVICES": "0", "MIOPEN_FIND_MODE": "1",
           "NVIDIA_TF32_OVERRIDE": "0", "CUDNN_LOGINFO_DBG": "1", "TORCH_SECRET_KEY": "x", "OMP_NUM_THREADS": "2"}
    assert recorded_environment(env)["variables"] == {
        "CUDNN_LOGINFO_DBG": "1", "MIOPEN_FIND_MODE": "1", "NVIDIA_TF32_OVERRIDE": "0", "OMP_NUM_THREADS": "2",
        "ROCR_VISIBLE_DEVICES": "0"}


def test_rerun_flags_keep_the_configuration_and_drop_where_it_wrote() -> None:
    meta = {"argv": ["hipdnn-trace", "run", "suite/", "g.json", "-w5", "--backend", "cudnn", "--engine", "all",
                     "--out", "runs", "--run-id=x", "--shard", "2/4", "--gpus", "all", "--golden", "gold",
                     "--no-isolate", "--profile", "cupti", "--seed", "7", "--rtol", "1e-3"],
            "environment": {"cwd": "/srv/sweep"}, "seed": 7,
            "validation": {"against": "reference", "rtol": 0.001, "atol": None}}
    assert rerun_flags(meta, engine="eng9") == [
        "-w", "5", "--backend", "cudnn", "--golden", "/srv/sweep/gold", "--no-isolate", "--engine", "eng9",
        "--seed", "7", "--validate", "reference", "--rtol", "0.001"]
    isolated = {**meta, "isolation": {"enabled": True, "graph_timeout_s": 600}}
    assert rerun_flags({**isolated, "argv": meta["argv"][:4]})[:3] == ["--isolate", "--graph-timeout", "600.0"]
    assert "--isolate" not in rerun_flags(isolated)   # --no-isolate given: as given


@pytest.mark.parametrize("dims, strides, want", [
    ([4, 8, 8, 8], [1024, 1, 128, 16], [512, 1, 64, 8]),    # NHWC (of a 16-channel tensor) stays NHWC
    ([2, 3], [3, 1], [3, 1]),
    ([2, 3], [1, 2], [1, 2]),                               # column-major stays column-major
])
def test_relaid_keeps_each_tensors_axis_order(dims: list[int], strides: list[int], want: list[int]) -> None:
    assert relaid(dims, strides) == want


def test_shrink_writes_a_smaller_graph_that_still_fails_and_says_what_it_tried(tmp_path: Path) -> None:
    assert _run(tmp_path, "r", GELU) == 2
    assert main(["repro", str(tmp_path / "runs" / "r"), "--out", str(tmp_path / "b"), "--shrink",
                 "--shrink-steps", "3"]) == 0
    bundle = tmp_path / "b" / "gelu_fp16"
    shrunk = json.loads((bundle / "shrunk" / "gelu_fp16.json").read_text())
    dims = {t["name"]: t["dims"] for t in shrunk["tensors"]}
    assert dims["x"] == dims["y"] and dims["x"][0] * dims["x"][1] < 64 * 256
    steps = json.loads((bundle / "repro.json").read_text())["shrink"]["steps"]
    assert 1 <= len(steps) <= 3 and any(s["result"] == "kept: still failed" for s in steps)
    assert "## Shrinking" in (bundle / "README.md").read_text()
    assert main(["run", str(bundle / "shrunk" / "gelu_fp16.json"), "--rtol", "0", "--atol", "0", "-w", "0",
                 "-i", "1", "--no-trace", "-q", "--out", str(tmp_path / "again")]) == 2


def test_a_hostile_graph_name_becomes_no_code(tmp_path: Path) -> None:
    """The name a graph file gives itself heads run.sh and the programs: newlines, quotes and command
    substitutions in it must stay text."""
    data = json.loads(GELU.read_text())
    data["name"] = 'x\n"""\nimport os; os.system("touch pwned")\n$(touch pwned) `touch pwned`'
    graph = tmp_path / "evil.json"
    graph.write_text(json.dumps(data))
    assert _run(tmp_path, "r", graph) == 2
    assert main(["repro", str(tmp_path / "runs" / "r"), "--out", str(tmp_path / "b")]) == 0
    (bundle,) = (tmp_path / "b").iterdir()
    script = (bundle / "run.sh").read_text()
    assert "$(touch" not in script and "`" not in script
    from hipdnn_trace.commands.repro_flags import launcher

    fixed = {line for line in script.splitlines() if line in set(launcher(sys.executable).splitlines())}
    assert all(line.startswith(("#", "cd ", "export ", "tool run ")) or line in fixed for line in script.splitlines())
    done = subprocess.run([str(bundle / "run.sh"), "-q", "--no-trace"], env=_shell_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert not list(tmp_path.rglob("pwned"))


def test_a_relative_graph_path_is_found_from_the_folder_the_run_started_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "suite").mkdir()
    shutil.copyfile(GELU, tmp_path / "suite" / "gelu_fp16.json")
    monkeypatch.chdir(tmp_path)
    assert _run(tmp_path, "r", Path("suite/gelu_fp16.json")) == 2
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["repro", str(tmp_path / "runs" / "r"), "--out", "b"]) == 0
    record = json.loads((elsewhere / "b" / "gelu_fp16" / "repro.json").read_text())
    assert record["source"] == "suite/gelu_fp16.json"
    assert record["read_from"] == str(tmp_path / "suite" / "gelu_fp16.json") and record["verified"]


def test_a_graph_from_a_tarball_is_read_from_its_archive(tmp_path: Path) -> None:
    import tarfile

    archive = tmp_path / "suite.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(GELU, arcname="pointwise/gelu_fp16.json")
    assert _run(tmp_path, "r", archive) == 2
    assert main(["repro", str(tmp_path / "runs" / "r"), "--out", str(tmp_path / "b")]) == 0
    bundle = tmp_path / "b" / "gelu_fp16"
    assert (bundle / "gelu_fp16.json").read_bytes() == GELU.read_bytes()
    read_from = json.loads((bundle / "repro.json").read_text())["read_from"]
    assert read_from.endswith("suite.tar.gz:pointwise/gelu_fp16.json")


def test_shrink_search_keeps_the_failure_and_respects_the_shape_rules() -> None:
    """The search alone, with a verdict that fails while a matmul's K is at least 24: it halves
    M, N and K where the matmul's shape rule allows, and stops at the smallest K that still fails."""
    from hipdnn_trace.commands.repro_shrink import shrink

    data = (ROOT / "graphs" / "matmul" / "matmul_2d_fp32.json").read_bytes()   # a [64, 96] x b [96, 128]

    def verdict(text: bytes) -> str:
        dims = {t["name"]: t["dims"] for t in json.loads(text)["tensors"]}
        return "failed" if dims["a"][1] >= 24 else "passed"

    result = shrink(data, "failed", verdict, max_steps=100, max_seconds=60)
    dims = {t["name"]: t["dims"] for t in json.loads(result.data)["tensors"]}
    assert dims == {"a": [1, 24], "b": [24, 1], "c": [1, 1]}
    results = [s["result"] for s in result.steps]
    assert "dropped: passed" in results and any(r.startswith("refused by the shape rules") for r in results)
    assert shrink(data, "failed", lambda text: "passed", max_steps=3, max_seconds=60).stopped.startswith("budget")


def test_an_error_shrinks_only_to_the_same_error() -> None:
    from hipdnn_trace.commands.repro_shrink import signature

    assert signature("error", 'execute: NotImplementedError: "x" for 64') == "error (execute: NotImplementedError)"
    assert signature("error", "build: cuDNN: no plan") != signature("error", "execute: cudaErrorIllegalAddress")
    assert signature("failed", "y: 10/64 elements") == signature("failed", "y: 1/8 elements") == "failed"

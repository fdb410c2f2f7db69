"""repro under attack (issue 33, the fourth attack): an edited run.json or a hostile summary row must make
neither code nor a leak in a bundle meant to be shared, and a bundle runs where only ``python -m
hipdnn_trace`` does (no console script on PATH)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from one_line import one_line_error

from hipdnn_trace.cli import main

ROOT = Path(__file__).resolve().parents[2]
GELU = ROOT / "graphs" / "pointwise" / "gelu_fp16.json"


def _failed_run(tmp_path: Path) -> Path:
    graph = tmp_path / "gelu_fp16.json"
    graph.write_bytes(GELU.read_bytes())
    assert main(["run", str(graph), "--rtol", "0", "--atol", "0", "-w", "0", "-i", "1", "--no-trace", "-q",
                 "--out", str(tmp_path / "runs"), "--run-id", "r"]) == 2
    return tmp_path / "runs" / "r"


def _edit_meta(run: Path, **changes) -> None:
    meta = json.loads((run / "run.json").read_text())
    meta.update(changes)
    (run / "run.json").write_text(json.dumps(meta))


def _bare_env(tmp_path: Path, python3: bool = False) -> dict[str, str]:
    """No hipdnn-trace on PATH, no HIPDNN_TRACE; ``python3``: this interpreter is the python3 on PATH (the
    fallback when run.json's interpreter is unusable), else only the system's."""
    env = {k: v for k, v in os.environ.items() if k != "HIPDNN_TRACE"}
    env["PATH"] = "/usr/bin:/bin"
    if python3:
        (tmp_path / "bin").mkdir(exist_ok=True)
        link = tmp_path / "bin" / "python3"
        if not link.exists():
            link.symlink_to(sys.executable)
        env["PATH"] = f"{tmp_path / 'bin'}:/usr/bin:/bin"
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_run_sh_falls_back_to_the_interpreter_that_made_the_run(tmp_path: Path) -> None:
    run = _failed_run(tmp_path)
    assert json.loads((run / "run.json").read_text())["environment"]["python"] == sys.executable
    assert main(["repro", str(run), "--out", str(tmp_path / "b")]) == 0
    (bundle,) = (tmp_path / "b").iterdir()
    env = _bare_env(tmp_path)
    assert subprocess.run(["sh", "-c", "command -v hipdnn-trace"], env=env, capture_output=True).returncode != 0
    done = subprocess.run(["sh", str(bundle / "run.sh"), "-q", "--no-trace"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr   # the row's FAILED, reproduced: not 127


@pytest.mark.parametrize("variables", [
    {"HIPDNN_TRACE": "sh -c 'touch pwned'"},
    {"LD_PRELOAD": "./pwned.so"},
    {"BASH_ENV": "./x", "PS4": "$(touch pwned)", "ENV": "./x"},
    {"HIPDNN_X": "$(touch pwned)`touch pwned`\n touch pwned"},
    {"BAD NAME; touch pwned": "1", "1X": "2"},
])
def test_an_edited_environment_block_makes_no_code(tmp_path: Path, variables: dict) -> None:
    run = _failed_run(tmp_path)
    _edit_meta(run, environment={"cwd": str(tmp_path), "python": "/bin/sh -c touch pwned", "variables": variables})
    assert main(["repro", str(run), "--out", str(tmp_path / "b")]) == 0
    (bundle,) = (tmp_path / "b").iterdir()
    script = (bundle / "run.sh").read_text()
    for name in ("HIPDNN_TRACE", "LD_PRELOAD", "BASH_ENV", "PS4", "ENV"):
        assert f"export {name}=" not in script
    done = subprocess.run(["sh", str(bundle / "run.sh"), "-q", "--no-trace"], env=_bare_env(tmp_path, python3=True),
                          cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert not list(tmp_path.rglob("pwned"))


@pytest.mark.parametrize("source", ["/etc/passwd", "/proc/self/environ"])
def test_a_row_without_graph_id_never_copies_a_file_that_is_no_graph(tmp_path: Path, capsys, source: str) -> None:
    run = _failed_run(tmp_path)
    summary = pl.read_csv(run / "summary.csv", infer_schema_length=0)
    summary.with_columns(pl.lit("").alias("graph_id"), pl.lit(source).alias("source")).write_csv(run / "summary.csv")
    main(["repro", str(run), "--out", str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert "not a JSON graph file; not copied into a bundle" in err
    copied = [p for p in (tmp_path / "b").rglob("*") if p.is_file()] if (tmp_path / "b").exists() else []
    assert not any(p.read_bytes() == Path(source).read_bytes() for p in copied if Path(source).exists())


@pytest.mark.parametrize("changes, problem", [
    ({"seed": "abc"}, "run.json: seed is 'abc', not a whole number"),
    ({"seed": 1e400}, "run.json: seed is inf, not a whole number"),
    ({"seed": 1.5}, "run.json: seed is 1.5, not a whole number"),
    ({"validation": {"against": "reference", "rtol": {"x": 1}}}, "run.json: validation.rtol is {'x': 1}"),
    ({"validation": {"against": "reference", "rtol": float("nan")}}, "run.json: validation.rtol is nan"),
    ({"validation": {"against": "reference", "atol": -1}}, "run.json: validation.atol is -1"),
    ({"validation": {"against": ["x"]}}, "run.json: validation.against is ['x'], not one of reference, none"),
    ({"validation": {"against": "none; touch pwned"}}, "run.json: validation.against is 'none; touch pwned'"),
    ({"isolation": {"enabled": True, "graph_timeout_s": "abc"}}, "run.json: isolation.graph_timeout_s is 'abc'"),
    ({"isolation": {"enabled": True, "graph_timeout_s": 1e400}}, "run.json: isolation.graph_timeout_s is inf"),
    ({"seed": True}, "run.json: seed is True, not a whole number"),
])
def test_hostile_run_json_values_are_one_line(tmp_path: Path, capsys, changes: dict, problem: str) -> None:
    run = _failed_run(tmp_path)
    _edit_meta(run, **changes)
    assert main(["repro", str(run), "--out", str(tmp_path / "b")]) == 1
    one_line_error(capsys, problem)


@pytest.mark.parametrize("environment", [["a", "list"], "text", {"cwd": 5, "variables": ["x"]}])
def test_an_environment_of_the_wrong_type_still_makes_a_bundle(tmp_path: Path, environment) -> None:
    run = _failed_run(tmp_path)
    _edit_meta(run, environment=environment)
    assert main(["repro", str(run), "--out", str(tmp_path / "b")]) == 0


def test_two_failing_graphs_of_one_name_from_two_folders_get_two_bundles(tmp_path: Path) -> None:
    paths = []
    for folder, rows in (("x", 64), ("y", 32)):   # one name, two shapes: two graphs
        data = json.loads(GELU.read_text())
        for t in data["tensors"]:
            t["dims"] = [rows, 256]
        (tmp_path / folder).mkdir()
        path = tmp_path / folder / "gelu_fp16.json"
        path.write_text(json.dumps(data))
        paths.append(str(path))
    assert main(["run", *paths, "--rtol", "0", "--atol", "0", "-w", "0", "-i", "1", "--no-trace", "-q",
                 "--out", str(tmp_path / "runs"), "--run-id", "r"]) == 2
    rows = pl.read_csv(tmp_path / "runs" / "r" / "summary.csv", infer_schema_length=0)
    assert rows["status"].to_list() == ["failed", "failed"] and rows["graph"].n_unique() == 1
    assert main(["repro", str(tmp_path / "runs" / "r"), "--out", str(tmp_path / "b")]) == 0
    bundles = sorted(p.name for p in (tmp_path / "b").iterdir())
    assert bundles == sorted(f"gelu_fp16--{g}" for g in rows["graph_id"])


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_shrink_seconds_must_be_positive_and_finite(tmp_path: Path, capsys, value: str) -> None:
    run = _failed_run(tmp_path)
    assert main(["repro", str(run), "--out", str(tmp_path / "b"), "--shrink", "--shrink-seconds", value]) == 1
    one_line_error(capsys, "--shrink-seconds must be positive and finite")


@pytest.mark.parametrize("text", [b'{"auths": {"registry": {"auth": "c2VjcmV0"}}}', b'{"tensors": [], "token": "x"}',
                                  b'[1, 2]', b'"secret"'])
def test_a_row_without_graph_id_copies_no_json_file_that_is_not_graph_shaped(tmp_path: Path, capsys,
                                                                             text: bytes) -> None:
    run = _failed_run(tmp_path)
    secret = tmp_path / "config.json"
    secret.write_bytes(text)
    summary = pl.read_csv(run / "summary.csv", infer_schema_length=0)
    summary.with_columns(pl.lit("").alias("graph_id"), pl.lit(str(secret)).alias("source")).write_csv(
        run / "summary.csv")
    assert main(["repro", str(run), "--out", str(tmp_path / "b")]) == 1
    assert "not a JSON graph file; not copied into a bundle" in capsys.readouterr().err
    copied = [p for p in (tmp_path / "b").rglob("*") if p.is_file()] if (tmp_path / "b").exists() else []
    assert not any(p.read_bytes() == text for p in copied)


def test_a_row_without_graph_id_still_bundles_a_graph_file_that_does_not_load(tmp_path: Path) -> None:
    run = _failed_run(tmp_path)
    broken = json.loads(GELU.read_text())
    broken["nodes"][0]["type"] = "NoSuchOp"
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    summary = pl.read_csv(run / "summary.csv", infer_schema_length=0)
    summary.with_columns(pl.lit("").alias("graph_id"), pl.lit(str(tmp_path / "broken.json")).alias("source"),
                         pl.lit("error").alias("status")).write_csv(run / "summary.csv")
    assert main(["repro", str(run), "--out", str(tmp_path / "b")]) == 0
    (bundle,) = (tmp_path / "b").iterdir()
    assert (bundle / "broken.json").read_bytes() == (tmp_path / "broken.json").read_bytes()


def test_a_torch_error_row_where_torch_is_absent_mocked_still_makes_a_bundle(tmp_path: Path, monkeypatch) -> None:
    run = _failed_run(tmp_path)
    summary = pl.read_csv(run / "summary.csv", infer_schema_length=0)
    summary.with_columns(pl.lit("error").alias("status"), pl.lit("torch").alias("backend"),
                         pl.lit("RuntimeError: boom").alias("error")).write_csv(run / "summary.csv")
    monkeypatch.setitem(sys.modules, "torch", None)   # torch absent on this machine, present on the run's
    assert main(["repro", str(run), "--out", str(tmp_path / "b")]) == 0
    (bundle,) = (tmp_path / "b").iterdir()
    record = json.loads((bundle / "repro.json").read_text())
    assert record["library_script"] == {"file": None,
                                        "why": "writing the torch program needs torch installed here "
                                               "(ModuleNotFoundError)"}
    assert (bundle / "run.sh").exists()


def test_names_with_spaces_quotes_and_newlines_make_no_code(tmp_path: Path) -> None:
    data = json.loads(GELU.read_text())
    data["name"] = "a b'\"$(touch pwned)\n`touch pwned`; touch pwned"
    graph = tmp_path / "we ird '$(touch pwned)'.json"
    graph.write_text(json.dumps(data))
    assert main(["run", str(graph), "--rtol", "0", "--atol", "0", "-w", "0", "-i", "1", "--no-trace", "-q",
                 "--out", str(tmp_path / "runs"), "--run-id", "r"]) == 2
    assert main(["repro", str(tmp_path / "runs" / "r"), "--out", str(tmp_path / "b")]) == 0
    (bundle,) = (tmp_path / "b").iterdir()
    assert "\n" not in bundle.name and "'" not in bundle.name and "$" not in bundle.name
    done = subprocess.run(["sh", str(bundle / "run.sh"), "-q", "--no-trace"], env=_bare_env(tmp_path),
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert not list(tmp_path.rglob("pwned"))


def test_recorded_switches_that_load_code_are_written_down_never_exported(tmp_path: Path) -> None:
    run = _failed_run(tmp_path)
    loads = {"HIPDNN_TRACE_EXTRA_BACKENDS": "os:system", "HIPDNN_TRACE_ROCTX_LIB": "./evil.so",
             "HIPDNN_TRACE_NCU": "./evil", "HIPDNN_PLUGIN_PATH": "./plugins", "TORCH_EXTENSIONS_DIR": "./ext",
             "MIOPEN_USER_DB_PATH": "./db"}
    kept = {"CUDNN_LOGLEVEL_DBG": "2", "OMP_NUM_THREADS": "1", "HIPDNN_LOG_LEVEL": "info it's"}
    _edit_meta(run, environment={"cwd": str(tmp_path), "variables": {**loads, **kept}})
    assert main(["repro", str(run), "--out", str(tmp_path / "b")]) == 0
    (bundle,) = (tmp_path / "b").iterdir()
    script = (bundle / "run.sh").read_text()
    for name in loads:
        assert f"export {name}=" not in script and f"# {name}=" in script
    assert "export OMP_NUM_THREADS=1" in script and "export HIPDNN_LOG_LEVEL='info it'\"'\"'s'" in script
    assert "export CUDNN_LOGLEVEL_DBG=2" in script

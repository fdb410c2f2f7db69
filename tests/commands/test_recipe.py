"""--config recipe.toml: defaults < recipe < flags; paths from the recipe's folder; bad keys are one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hipdnn_trace.cli import main

GRAPH = Path(__file__).resolve().parents[2] / "graphs" / "pool" / "maxpool_2d_index_fp32.json"


def _recipe(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "recipe.toml"
    path.write_text(text)
    return path


def _only_run(out: Path) -> dict:
    (run,) = list(out.iterdir())
    return json.loads((run / "run.json").read_text())


def test_flags_beat_the_recipe_which_beats_defaults_and_paths_are_from_its_folder(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    recipe = _recipe(tmp_path / "recipes", f'version = 1\ngraphs = ["{GRAPH}"]\niters = 7\nwarmup = 1\n'
                                           'out = "results"\ntrace = false\n')
    monkeypatch.chdir(tmp_path)   # run from elsewhere: out is still next to the recipe
    assert main(["run", "--config", str(recipe), "--iters", "4", "-q"]) == 0
    meta = _only_run(tmp_path / "recipes" / "results")
    assert meta["timing"]["iters"] == 4 and meta["timing"]["warmup"] == 1
    (run,) = list((tmp_path / "recipes" / "results").iterdir())
    assert not (run / "trace.pftrace").exists()


def test_graphs_on_the_command_line_replace_the_recipes(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path, 'graphs = ["missing.json"]\niters = 2\nwarmup = 0\n')
    assert main(["run", str(GRAPH), "--config", str(recipe), "--out", str(tmp_path / "o"), "-q"]) == 0


@pytest.mark.parametrize(("text", "message"), [
    ("itres = 3\n", "itres: unknown key (did you mean 'iters'?)"),
    ("iters = \"many\"\n", "iters: "),
    ("backend = \"tensorrt\"\n", "backend: 'tensorrt' is not one of"),
    ("trace = 1\n", "trace: expected true or false"),
    ("version = 2\n", "version: only version 1 recipes exist"),
    ("[[engines]]\nid = \"MIOPEN_ENGINE\"\n", "engines: use engine = "),
    ("iters = \n", "not valid TOML"),
    # dnn-benchmarking's keys (docs/usage.md @ 03382e30) with no equivalent here, and its older names
    ("hipdnn_cache_dir = \"cache\"\n", "hipdnn_cache_dir: no equivalent here"),
    ("metrics = false\n", "metrics: FLOPs, bytes and rates are always computed here"),
    ("oracle = true\n", "oracle: no equivalent here"),
    ("emit_trace = \"pftrace\"\n", "emit_trace: dnn-benchmarking's older name: the key is trace"),
    ("cache_dir = \"cache\"\n", "cache_dir: no equivalent here"),
    ("runtime = \"tensorrt\"\n", "runtime: 'tensorrt' is not one of"),
    ("runtime = \"hipdnn\"\nbackend = \"hipdnn\"\n", "runtime: give runtime or backend, not both"),
])
def test_bad_recipes_are_one_line_errors_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         text: str, message: str) -> None:
    recipe = _recipe(tmp_path, f'graphs = ["{GRAPH}"]\n' + text)
    assert main(["run", "--config", str(recipe), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("hipdnn-trace run: error:") and message in err
    assert not (tmp_path / "o").exists()


def test_no_graphs_anywhere_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = _recipe(tmp_path, "iters = 2\n")
    assert main(["run", "--config", str(recipe)]) == 1
    assert "no graphs given" in capsys.readouterr().err


def test_the_readme_recipe_is_valid() -> None:
    import argparse
    import re

    from hipdnn_trace.commands import run as run_command
    from hipdnn_trace.commands.recipe import recipe_defaults

    readme = Path(__file__).resolve().parents[2] / "README.md"
    (block,) = re.findall(r"```toml\n(.*?)```", readme.read_text(), flags=re.S)
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    run_command.add_parser(sub)
    recipe = readme.parent / ".readme-recipe.toml"
    recipe.write_text(block)
    try:
        values = recipe_defaults(recipe, sub.choices["run"])
    finally:
        recipe.unlink()
    assert values["backend"] == "cudnn" and values["iters"] == 200
    assert all(Path(g).is_dir() for g in values["graphs"])


def test_the_readme_python_example_runs_as_written(tmp_path: Path, monkeypatch) -> None:
    """README "From Python": the block runs as printed, against runs/A and runs/B made here."""
    import re
    import shutil

    import hipdnn_trace

    readme = Path(__file__).resolve().parents[2] / "README.md"
    (block,) = re.findall(r"```python\n(.*?)```", readme.read_text(), flags=re.S)
    shutil.copytree(readme.parent / "graphs" / "matmul", tmp_path / "graphs" / "matmul")
    monkeypatch.chdir(tmp_path)
    for run_id in ("A", "B"):
        hipdnn_trace.run("graphs/matmul", run_id=run_id, iters=5, warmup=1, trace=False)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)   # the README's own code
    assert namespace["cmp"].table.height == 9 and namespace["again"].summary.height == 9


def test_dnn_benchmarkings_newest_keys_are_read_as_ours(tmp_path: Path) -> None:
    """runtime -> backend (its pytorch is our torch), metrics = true is what we always do, trace is ours."""
    import argparse

    from hipdnn_trace.commands import run as run_command
    from hipdnn_trace.commands.recipe import recipe_defaults

    parser = argparse.ArgumentParser()
    run_command.add_parser(parser.add_subparsers(dest="command"))
    sub = parser._subparsers._group_actions[0].choices["run"]   # the run subparser
    torch = _recipe(tmp_path / "t", 'runtime = "pytorch"\nmetrics = true\n')
    assert recipe_defaults(torch, sub) == {"backend": "torch"}
    recipe = _recipe(tmp_path / "r", f'graphs = ["{GRAPH}"]\nruntime = "reference"\nmetrics = true\n'
                                     'trace = false\niters = 2\nwarmup = 0\nout = "o"\n')
    assert main(["run", "--config", str(recipe), "-q"]) == 0
    meta = _only_run(tmp_path / "r" / "o")
    assert [c["backend"] for c in meta["configs"]] == ["reference"]
    (run,) = list((tmp_path / "r" / "o").iterdir())
    assert not (run / "trace.pftrace").exists()

"""merge joins only shards of one measurement (issue 33's fourth attack: shards made with different --seed or
--rtol/--atol merged without a word, and run.json then claimed one seed and the default tolerances)."""

from __future__ import annotations

import json
from pathlib import Path

import graph_dicts as hg
import pytest
from one_line import one_line_error

from hipdnn_trace.cli import main
from hipdnn_trace.results.rundir import load_run


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Shard 1/2 of a two-graph suite with the default flags; shard 2/2 with the same and with other ones."""
    root = tmp_path_factory.mktemp("shards")
    hg.write(root / "g", [hg.matmul(name="mm_a"), hg.matmul(name="mm_b", m=4)])

    def shard(run_id: str, index: int, *flags: str) -> None:
        assert main(["run", str(root / "g"), "--shard", f"{index}/2", "-w", "0", "-i", "2", "-q", "--no-trace",
                     "--out", str(root), "--run-id", run_id, *flags]) == 0

    shard("s1", 1)
    shard("s2", 2)
    shard("s2_seed", 2, "--seed", "7")
    shard("s2_rtol", 2, "--rtol", "0.1")
    shard("s2_atol", 2, "--atol", "0.001")
    return root


@pytest.mark.parametrize(("second", "words"), [
    ("s2_seed", ("seed: 0 in", "7 in")),
    ("s2_rtol", ("validation.rtol: None in", "0.1 in")),
    ("s2_atol", ("validation.atol: None in", "0.001 in")),
])
def test_shards_made_differently_are_refused_naming_the_key_and_both(shards: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str], second: str,
                                                                     words: tuple[str, ...]) -> None:
    capsys.readouterr()
    assert main(["merge", str(shards / "s1"), str(shards / second), "--out", str(tmp_path / "m")]) == 1
    one_line_error(capsys, str(shards / "s1"), str(shards / second), "was not made like", *words)
    assert not (tmp_path / "m").exists()


def test_an_input_generator_of_another_version_is_refused(shards: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "s2_old"
    other.mkdir()
    for entry in (shards / "s2").iterdir():
        (other / entry.name).write_bytes(entry.read_bytes())
    meta = json.loads((other / "run.json").read_text())
    (other / "run.json").write_text(json.dumps({**meta, "inputs": None}))   # a run from before it was recorded
    capsys.readouterr()
    assert main(["merge", str(shards / "s1"), str(other), "--out", str(tmp_path / "m")]) == 1
    one_line_error(capsys, "inputs.generator", "None in")


def test_shards_made_alike_merge_and_keep_their_seed_and_tolerances(shards: Path, tmp_path: Path) -> None:
    assert main(["merge", str(shards / "s1"), str(shards / "s2"), "--out", str(tmp_path / "m")]) == 0
    merged = load_run(tmp_path / "m", strict=True)
    assert merged.summary.height == 2 and merged.meta["seed"] == 0
    assert merged.meta["validation"] == load_run(shards / "s1").meta["validation"]

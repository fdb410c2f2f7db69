"""Hostile option values (reliability issue, items 4, 5 and 7): a value that would become code, garbage or a
traceback is one line on stderr naming the flag, file or field, exit 1, whether it comes from the command line
or a --config recipe."""

from __future__ import annotations

from pathlib import Path

import pytest
from one_line import one_line_error as _one_line

from hipdnn_trace.cli import main

GRAPH = Path(__file__).resolve().parents[2] / "graphs" / "pool" / "maxpool_2d_index_fp32.json"


@pytest.mark.parametrize("run_id", ["a\nb", "a" * 300, "a b", "x\x1b[2J", ".", "..", ".hidden", "a/b", ""])
def test_a_run_id_must_be_a_safe_folder_name(tmp_path: Path, capsys: pytest.CaptureFixture[str], run_id: str) -> None:
    assert main(["run", str(GRAPH), "--out", str(tmp_path / "o"), "--run-id", run_id, "-i", "1", "-w", "0"]) == 1
    _one_line(capsys, "--run-id")
    assert not (tmp_path / "o").exists()


def test_a_plain_run_id_still_works(tmp_path: Path) -> None:
    assert main(["run", str(GRAPH), "--out", str(tmp_path), "--run-id", "shard-3_v1.2", "-i", "1", "-w", "0",
                 "-q", "--no-trace"]) == 0
    assert (tmp_path / "shard-3_v1.2" / "run.json").exists()


@pytest.mark.parametrize(("flag", "value"), [
    ("--min-time-ms", "nan"), ("--min-time-ms", "inf"), ("--min-time-ms", "-5"),
    ("--iters", "100000000000000000"), ("--warmup", "10000001"), ("--max-iters", "99999999999"),
    ("--graph-timeout", "nan"), ("--max-reference-seconds", "nan"),
])
def test_numeric_flags_are_finite_and_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str,
                                              value: str) -> None:
    assert main(["run", str(GRAPH), "--out", str(tmp_path / "o"), flag, value]) == 1
    _one_line(capsys, flag)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("text", "key"), [
    ("min_time_ms = nan\n", "min_time_ms"), ("min_time_ms = inf\n", "min_time_ms"),
    ("iters = 1e17\n", "iters"), ("iters = 100000000000000000\n", "iters"), ("warmup = -1\n", "warmup"),
    ("max_iters = 20000000\n", "max_iters"), ("graph_timeout = nan\n", "graph_timeout"),
    ("graphs = [1, 2]\n", "graphs"), ("run_id = \"a/../b\"\n", "run_id"), ("run_id = \"a\\nb\"\n", "run_id"),
])
def test_a_recipe_gets_the_same_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                      key: str) -> None:
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(text)
    argv = ["run", "--config", str(recipe), "--out", str(tmp_path / "o")]
    assert main(argv if "graphs" in text else [*argv, str(GRAPH)]) == 1
    _one_line(capsys, str(recipe), key)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("flag", "value"), [
    ("--time", "01:00\n#SBATCH --foo"), ("--job-name", "x\ny"), ("--sbatch-arg", "--qos=debug\nrm -rf ~"),
    ("--partition", "gpu\r"), ("--account", "a\x00b"), ("--hipdnn-trace", "hipdnn-trace\nid"),
    ("--array", "100000000"), ("--array", "4000002"),
])
def test_slurm_values_that_would_become_script_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str,
                                                     value: str) -> None:
    assert main(["slurm", str(GRAPH), "--array", "2", "--out", str(tmp_path / "s"), f"{flag}={value}"]) == 1
    _one_line(capsys, flag)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(("where", "argv"), [
    ("SUITE", ["{tmp}/g\nx.json"]),
    ("run options after --", ["{graph}", "--", "--save-tensors", "t\nx"]),
    ("--out", ["{graph}", "--out", "{tmp}/s\nx"]),
])
def test_slurm_control_characters_in_paths_and_run_options(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           where: str, argv: list[str]) -> None:
    (tmp_path / "g\nx.json").write_bytes(GRAPH.read_bytes())
    argv = [a.format(tmp=tmp_path, graph=GRAPH) for a in argv]
    if "--out" not in argv:
        argv = [*argv[:1], "--out", str(tmp_path / "s"), *argv[1:]]
    assert main(["slurm", *argv, "--array", "2"] if "--" not in argv else
                ["slurm", *argv[:argv.index("--")], "--array", "2", *argv[argv.index("--"):]]) == 1
    _one_line(capsys, where)
    assert not any(p.name.startswith("s") for p in tmp_path.iterdir())


def test_slurm_plain_values_still_make_their_lines(tmp_path: Path) -> None:
    assert main(["slurm", str(GRAPH), "--array", "4000001", "--out", str(tmp_path / "s"), "--time", "04:00:00",
                 "--sbatch-arg=--qos=debug", "--job-name", "sweep 1"]) == 0
    script = (tmp_path / "s" / "slurm" / "shards.sbatch").read_text()
    assert "#SBATCH --time=04:00:00\n" in script and "#SBATCH --qos=debug\n" in script
    assert "#SBATCH --array=0-4000000\n" in script and "#SBATCH '--job-name=sweep 1-shards'\n" in script


def test_slurm_an_unsplittable_command_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slurm", str(GRAPH), "--array", "2", "--out", str(tmp_path / "s"),
                 "--hipdnn-trace", '"unterminated']) == 1
    _one_line(capsys, "--hipdnn-trace", "No closing quotation")
    assert not (tmp_path / "s").exists()


def test_slurm_out_under_a_regular_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Running as root, a read-only folder is still writable; a path through a regular file fails for anyone."""
    (tmp_path / "afile").write_text("x")
    assert main(["slurm", str(GRAPH), "--array", "2", "--out", str(tmp_path / "afile" / "sweep")]) == 1
    _one_line(capsys, "--out", "cannot write the scripts", "Not a directory")
    assert (tmp_path / "afile").read_text() == "x"


@pytest.mark.parametrize("out", ["afile", "/dev/null"])
def test_an_out_that_is_not_a_folder_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str], out: str) -> None:
    (tmp_path / "afile").write_text("x")
    path = out if out.startswith("/") else str(tmp_path / out)
    assert main(["run", str(GRAPH), "--out", path, "-i", "1", "-w", "0"]) == 1
    err = _one_line(capsys, path, "not a folder")
    assert "already exists" not in err


@pytest.mark.parametrize("with_graphs", [True, False])
def test_resume_of_a_folder_never_created_says_there_is_nothing_to_resume(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], with_graphs: bool) -> None:
    gone = str(tmp_path / "runs" / "killed-before-mkdir")
    assert main(["run", *([str(GRAPH)] if with_graphs else []), "--resume", gone, "-i", "1"]) == 1
    err = _one_line(capsys, f"--resume {gone}", "no such folder")
    assert "not a run directory" not in err
    assert not (tmp_path / "runs").exists()


KERNEL_TRACE = Path(__file__).resolve().parents[1] / "data" / "rocprof" / "v62" / "kernel_trace.csv"


@pytest.mark.parametrize(("cells", "words"), [
    (",25000,21000,", ("'End_Timestamp'", "ends before it starts")),
    (",21000," + "1" * 40 + ",", ("'End_Timestamp'", "timestamp outside")),
    (",-21000,-5,", ("'Start_Timestamp'", "timestamp outside")),
    (",21000,25000,0,0,four,", ("'Workgroup_Size_X'", "not an integer")),
])
def test_ingest_refuses_damaged_timestamps_and_cells(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     cells: str, words: tuple[str, ...]) -> None:
    """Refused, not dropped: a capture with one damaged timestamp cannot be trusted to time the rest (a folder
    still skips such a file with a warning and ingests the others)."""
    lines = KERNEL_TRACE.read_text().splitlines(keepends=True)
    assert ",21000,25000,0,0,4," in lines[1]
    lines[1] = lines[1].replace(",21000,25000,0,0,4," if "four" in cells else ",21000,25000,",
                                cells if "four" in cells else cells, 1)
    bad = tmp_path / "kernel_trace.csv"
    bad.write_text("".join(lines))
    assert main(["ingest", str(bad), "--out", str(tmp_path / "o"), "-q"]) == 1
    _one_line(capsys, str(bad), "line 2", *words)


@pytest.mark.parametrize(("column", "value"), [("median", "nan"), ("p95", "inf"), ("mean", "NaN")])
def test_merge_refuses_a_summary_with_non_finite_statistics(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            column: str, value: str) -> None:
    """Refused, not dropped: the row is a graph's only record, and a merged NaN median reads as measured."""
    import csv

    assert main(["run", str(GRAPH), "--out", str(tmp_path / "runs"), "--run-id", "s1", "-i", "2", "-w", "0", "-q",
                 "--no-trace", "--format", "csv"]) == 0
    summary = tmp_path / "runs" / "s1" / "summary.csv"
    with summary.open(newline="") as f:
        rows = list(csv.reader(f))
    rows[1][rows[0].index(column)] = value
    with summary.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "runs" / "s1"), "--out", str(tmp_path / "merged")]) == 1
    _one_line(capsys, str(summary), "line 2", repr(column))
    assert not (tmp_path / "merged").exists()
